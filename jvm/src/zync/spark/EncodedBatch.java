package zync.spark;

import java.util.Arrays;
import java.util.List;

/**
 * Encoded records with the consecutive staging offsets {@code first, first + 1, ...}, kept as
 * the packed arrays {@link StagingFetch}'s tasks sent and indexed by offset: Spark returns them in file order, not offset order. A record's key and value become
 * arrays of their own only when it is sent, so a batch is a few large arrays, not millions.
 */
public final class EncodedBatch {
  // A packed record (this class writes and reads the layout): its offset (8 bytes), the key's
  // length (4, NULL for none) and bytes, the value's length (4, NULL for a tombstone) and bytes.
  private static final int OFFSET = 8;
  private static final int LENGTH = 4;
  private static final int NULL = -1;

  final long first;
  private final byte[][] buffers;
  private final int[] bufferOf; // by index (offset - first): which buffer holds the record
  private final int[] at; // and where it starts there
  private final long bytes;

  private EncodedBatch(long first, byte[][] buffers, int[] bufferOf, int[] at, long bytes) {
    this.first = first;
    this.buffers = buffers;
    this.bufferOf = bufferOf;
    this.at = at;
    this.bytes = bytes;
  }

  /** Starts a packed record; its key and value follow, each by appendNull or begin/endBytes. */
  static void appendOffset(AvroOut out, long offset) {
    out.fixedLong(offset);
  }

  static void appendNull(AvroOut out) {
    out.fixedInt(NULL);
  }

  /** Reserves the length of the bytes written next; returns where, for endBytes. */
  static int beginBytes(AvroOut out) {
    int at = out.size();
    out.fixedInt(0);
    return at;
  }

  static void endBytes(AvroOut out, int at) {
    out.intAt(at, out.size() - at - LENGTH);
  }

  /** Indexes the records of offsets [low, high) in {@code packed}; each must be there once. */
  static EncodedBatch of(long low, long high, List<byte[]> packed) {
    int count = Math.toIntExact(high - low);
    int[] bufferOf = new int[count];
    int[] at = new int[count];
    Arrays.fill(bufferOf, -1);
    long bytes = 0;
    long found = 0;
    for (int b = 0; b < packed.size(); b++) {
      byte[] buffer = packed.get(b);
      int position = 0;
      while (position < buffer.length) {
        long index = AvroOut.longAt(buffer, position) - low;
        if (index < 0 || index >= count || bufferOf[(int) index] != -1) throw changed(low, high);
        bufferOf[(int) index] = b;
        at[(int) index] = position;
        int keyLength = Math.max(AvroOut.intAt(buffer, position + OFFSET), 0);
        int valueLength = Math.max(AvroOut.intAt(buffer, position + OFFSET + LENGTH + keyLength), 0);
        position += OFFSET + 2 * LENGTH + keyLength + valueLength;
        bytes += keyLength + valueLength;
        found++;
      }
    }
    if (found != count) throw changed(low, high);
    return new EncodedBatch(low, packed.toArray(new byte[0][]), bufferOf, at, bytes);
  }

  private static IllegalStateException changed(long low, long high) {
    return new IllegalStateException(
        "staging offsets " + low + ".." + (high - 1) + " changed while sending; run again");
  }

  byte[] key(int index) {
    return slice(bufferOf[index], at[index] + OFFSET);
  }

  byte[] value(int index) {
    byte[] buffer = buffers[bufferOf[index]];
    int keyLength = Math.max(AvroOut.intAt(buffer, at[index] + OFFSET), 0);
    return slice(bufferOf[index], at[index] + OFFSET + LENGTH + keyLength);
  }

  /** The bytes after the length at {@code position}; null for NULL. */
  private byte[] slice(int buffer, int position) {
    byte[] packed = buffers[buffer];
    int length = AvroOut.intAt(packed, position);
    return length == NULL ? null : Arrays.copyOfRange(packed, position + LENGTH, position + LENGTH + length);
  }

  public int size() {
    return at.length;
  }

  /** Bytes of keys and values, to size the next fetch. */
  public long bytes() {
    return bytes;
  }
}
