package zync.spark;

import java.util.Arrays;
import java.util.List;

/**
 * Encoded records with the consecutive staging offsets {@code first, first + 1, ...}, kept as
 * the packed arrays {@link StagingFetch}'s tasks sent (see its Encode for the layout) and indexed
 * by offset: Spark returns them in file order, not offset order. A record's key and value become
 * arrays of their own only when it is sent, so a batch is a few large arrays, not millions.
 */
public final class EncodedBatch {
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
        int keyLength = Math.max(AvroOut.intAt(buffer, position + 8), 0);
        int valueLength = Math.max(AvroOut.intAt(buffer, position + 12 + keyLength), 0);
        position += 16 + keyLength + valueLength;
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
    return slice(bufferOf[index], at[index] + 8);
  }

  byte[] value(int index) {
    byte[] buffer = buffers[bufferOf[index]];
    int keyLength = Math.max(AvroOut.intAt(buffer, at[index] + 8), 0);
    return slice(bufferOf[index], at[index] + 12 + keyLength);
  }

  /** The bytes after the length at {@code position}; null for length -1. */
  private byte[] slice(int buffer, int position) {
    byte[] packed = buffers[buffer];
    int length = AvroOut.intAt(packed, position);
    return length < 0 ? null : Arrays.copyOfRange(packed, position + 4, position + 4 + length);
  }

  public int size() {
    return at.length;
  }

  /** Bytes of keys and values, to size the next fetch. */
  public long bytes() {
    return bytes;
  }
}
