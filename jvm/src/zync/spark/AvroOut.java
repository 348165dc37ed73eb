package zync.spark;

import java.util.Arrays;

/** A growable byte buffer with Avro's binary primitives (zig-zag varints, little-endian doubles). */
final class AvroOut {
  private byte[] bytes = new byte[256];
  private int size;

  void reset() {
    size = 0;
  }

  byte[] toByteArray() {
    return Arrays.copyOf(bytes, size);
  }

  void raw(byte[] data) {
    room(data.length);
    System.arraycopy(data, 0, bytes, size, data.length);
    size += data.length;
  }

  void varLong(long value) {
    room(10);
    long zigzag = (value << 1) ^ (value >> 63);
    while ((zigzag & ~0x7FL) != 0) {
      bytes[size++] = (byte) ((zigzag & 0x7F) | 0x80);
      zigzag >>>= 7;
    }
    bytes[size++] = (byte) zigzag;
  }

  void bool(boolean value) {
    room(1);
    bytes[size++] = (byte) (value ? 1 : 0);
  }

  void dbl(double value) {
    room(8);
    long bits = Double.doubleToRawLongBits(value);
    for (int i = 0; i < 8; i++) bytes[size++] = (byte) (bits >>> (8 * i));
  }

  void lengthPrefixed(byte[] data) {
    varLong(data.length);
    raw(data);
  }

  private void room(int more) {
    if (size + more > bytes.length) bytes = Arrays.copyOf(bytes, Math.max(bytes.length * 2, size + more));
  }
}
