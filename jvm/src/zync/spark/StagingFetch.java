package zync.spark;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.classic.Dataset;
import org.apache.spark.types.variant.VariantUtil;
import org.apache.spark.types.variant.VariantUtil.Type;
import org.apache.spark.unsafe.types.VariantVal;

/**
 * to-kafka's read of a staging pool: one Spark job over one topic's output records (columns
 * offset, key, value: BIGINT, VARIANT, VARIANT) that both
 *
 * <ul>
 *   <li>counts the offsets from {@code start} on (the {@link Span} the caller checks for gaps
 *       before anything is sent), and
 *   <li>Avro-encodes the records of offsets {@code [low, high)} on the executors, each task into
 *       one packed byte array (no Spark rows, no compressed result blocks, one array to serialize).
 * </ul>
 *
 * <p>So the steady state of a sync reads the pool once: the records of a small sync arrive with
 * its offset check. A task whose packed records pass its share of {@code budget} bytes drops them
 * and only counts ({@link Result#overflowed}); the caller then fetches bounded windows.
 */
public final class StagingFetch {
  private StagingFetch() {}

  /**
   * Runs the job. {@code keySchemas} / {@code valueSchemas} are zync_variant_avro's schema lists
   * (UTF-8 JSON); a record they do not fit fails the job with "zync to-kafka: ...".
   */
  public static Result run(
      Dataset<Row> outputs,
      byte[] keySchemas,
      byte[] valueSchemas,
      long start,
      long low,
      long high,
      long budget) {
    var rows = outputs.queryExecution().executedPlan().execute().toJavaRDD();
    long share = Math.max(budget / Math.max(rows.getNumPartitions(), 1), 1);
    Encode encode = new Encode(keySchemas, valueSchemas, start, low, high, share);
    return new Result(rows.mapPartitions(encode).collect());
  }

  /** The offsets from a start offset on: how many, the lowest, the highest, and start - 1. */
  public static final class Span implements Serializable {
    private static final long serialVersionUID = 1L;
    private long count;
    private long low = Long.MAX_VALUE;
    private long high = Long.MIN_VALUE;
    private boolean previous;

    void add(long offset, long start) {
      if (offset >= start) {
        count++;
        low = Math.min(low, offset);
        high = Math.max(high, offset);
      } else if (offset == start - 1) {
        previous = true;
      }
    }

    void merge(Span other) {
      count += other.count;
      low = Math.min(low, other.low);
      high = Math.max(high, other.high);
      previous |= other.previous;
    }

    public long count() {
      return count;
    }

    /** The lowest offset; meaningless when count() is 0. */
    public long low() {
      return low;
    }

    public long high() {
      return high;
    }

    public boolean previous() {
      return previous;
    }
  }

  /** What one task sends back: its span, and its records packed (null when over budget). */
  static final class Part implements Serializable {
    private static final long serialVersionUID = 1L;
    final Span span = new Span();
    byte[] packed;
    int records;
    long packedBytes; // before an overflow dropped them: to size the windows that follow
  }

  /** The job's outcome: the span of every task, and the records when no task overflowed. */
  public static final class Result {
    private final List<Part> parts;
    private final Span span = new Span();

    Result(List<Part> parts) {
      this.parts = parts;
      for (Part part : parts) span.merge(part.span);
    }

    public Span span() {
      return span;
    }

    public boolean overflowed() {
      return parts.stream().anyMatch(p -> p.packed == null);
    }

    /** Bytes of key and value per record (with 16 bytes of packing), as far as encoded. */
    public double bytesPerRecord() {
      long bytes = 0;
      long records = 0;
      for (Part part : parts) {
        bytes += part.packedBytes;
        records += part.records;
      }
      return records == 0 ? 0 : (double) bytes / records;
    }

    /**
     * The records of offsets {@code [low, high)}, which must all be there, once each; an
     * IllegalStateException says otherwise (staging changed between the span and this job).
     */
    public EncodedBatch batch(long low, long high) {
      List<byte[]> buffers = new ArrayList<>();
      for (Part part : parts) {
        if (part.packed == null) throw new IllegalStateException("the records were over budget");
        buffers.add(part.packed);
      }
      return EncodedBatch.of(low, high, buffers);
    }
  }

  /** One task: span every row, encode and pack (EncodedBatch's layout) the rows of [low, high). */
  private static final class Encode implements FlatMapFunction<Iterator<InternalRow>, Part> {
    private static final long serialVersionUID = 1L;
    private final byte[] keySchemas;
    private final byte[] valueSchemas;
    private final long start;
    private final long low;
    private final long high;
    private final long budget;

    Encode(byte[] keySchemas, byte[] valueSchemas, long start, long low, long high, long budget) {
      this.keySchemas = keySchemas;
      this.valueSchemas = valueSchemas;
      this.start = start;
      this.low = low;
      this.high = high;
      this.budget = budget;
    }

    @Override
    public Iterator<Part> call(Iterator<InternalRow> rows) {
      VariantToAvro.Encoders keys = VariantToAvro.Encoders.parse(keySchemas);
      VariantToAvro.Encoders values = VariantToAvro.Encoders.parse(valueSchemas);
      Part part = new Part();
      AvroOut out = new AvroOut();
      boolean packing = true;
      while (rows.hasNext()) {
        InternalRow row = rows.next();
        long offset = row.getLong(0);
        part.span.add(offset, start);
        if (!packing || offset < low || offset >= high) continue;
        EncodedBatch.appendOffset(out, offset);
        pack(row, 1, keys, out);
        pack(row, 2, values, out);
        part.records++;
        if (out.size() > budget) {
          packing = false; // only span from here on: the caller fetches in windows
          part.packedBytes = out.size();
          out = null;
        }
      }
      if (packing) {
        part.packed = java.util.Arrays.copyOf(out.buffer(), out.size());
        part.packedBytes = out.size();
      }
      return List.of(part).iterator();
    }
  }

  /** The Avro of a column; none for SQL NULL and for a variant null (a tombstone). */
  static void pack(InternalRow row, int column, VariantToAvro.Encoders encoders, AvroOut out) {
    VariantVal variant = row.isNullAt(column) ? null : row.getVariant(column);
    byte[] value = variant == null ? null : variant.getValue();
    if (value == null || VariantUtil.getType(value, 0) == Type.NULL) {
      EncodedBatch.appendNull(out);
      return;
    }
    int at = EncodedBatch.beginBytes(out);
    encoders.write(value, variant.getMetadata(), out);
    EncodedBatch.endBytes(out, at);
  }
}
