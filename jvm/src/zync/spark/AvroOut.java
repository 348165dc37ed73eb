package zync.spark;

import java.util.Arrays;

/** A growable byte buffer with Avro's binary primitives (zig-zag varints, little-endian doubles). */
final class AvroOut {
  private byte[] bytes = new byte[256];
  private int size;

  void reset() {
    size = 0;
  }

  int size() {
    return size;
  }

  /** The buffer itself (valid up to size()): no copy. */
  byte[] buffer() {
    return bytes;
  }

  /** A big-endian int, to be overwritten by {@link #intAt} once its value is known. */
  void fixedInt(int value) {
    room(4);
    intAt(size, value);
    size += 4;
  }

  void intAt(int position, int value) {
    bytes[position] = (byte) (value >>> 24);
    bytes[position + 1] = (byte) (value >>> 16);
    bytes[position + 2] = (byte) (value >>> 8);
    bytes[position + 3] = (byte) value;
  }

  void fixedLong(long value) {
    fixedInt((int) (value >>> 32));
    fixedInt((int) value);
  }

  static int intAt(byte[] bytes, int position) {
    return (bytes[position] & 0xFF) << 24
        | (bytes[position + 1] & 0xFF) << 16
        | (bytes[position + 2] & 0xFF) << 8
        | (bytes[position + 3] & 0xFF);
  }

  static long longAt(byte[] bytes, int position) {
    return (long) intAt(bytes, position) << 32 | (intAt(bytes, position + 4) & 0xFFFFFFFFL);
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

  void lengthPrefixed(byte[] data, int from, int length) {
    varLong(length);
    room(length);
    System.arraycopy(data, from, bytes, size, length);
    size += length;
  }

  private void room(int more) {
    if (size + more > bytes.length) bytes = Arrays.copyOf(bytes, Math.max(bytes.length * 2, size + more));
  }
}
