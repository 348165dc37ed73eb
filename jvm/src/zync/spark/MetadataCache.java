package zync.spark;

import java.util.Arrays;

/**
 * A few entries keyed by a VARIANT metadata dictionary's bytes. The rows of one shape carry equal
 * dictionaries (often the very same array), so a handful of entries serve a whole task; the
 * oldest is dropped when a new one comes. Not thread-safe: one per writer, and a writer serves
 * one task.
 */
final class MetadataCache<T> {
  private static final int SIZE = 8;
  private final byte[][] keys = new byte[SIZE][];
  private final Object[] values = new Object[SIZE];
  private int next;

  @SuppressWarnings("unchecked")
  T get(byte[] metadata) {
    for (int i = 0; i < SIZE; i++) {
      if (keys[i] == metadata) return (T) values[i];
    }
    for (int i = 0; i < SIZE; i++) {
      if (keys[i] != null && Arrays.equals(keys[i], metadata)) {
        keys[i] = metadata; // the next row likely shares this array, or one equal to it
        return (T) values[i];
      }
    }
    return null;
  }

  void put(byte[] metadata, T value) {
    for (int i = 0; i < SIZE; i++) {
      if (keys[i] == metadata || (keys[i] != null && Arrays.equals(keys[i], metadata))) {
        values[i] = value;
        return;
      }
    }
    keys[next] = metadata;
    values[next] = value;
    next = (next + 1) % SIZE;
  }
}
