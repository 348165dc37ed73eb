package zync.spark;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.classic.Dataset;

/**
 * {@link StagingFetch}'s job for several topics of one staging pool at once (a mirror's pool
 * has one per source table): one Spark job over their output records (columns topic index,
 * offset, key, value: INT, BIGINT, VARIANT, VARIANT) that, for each topic, counts the offsets
 * from its start on and Avro-encodes them with its own schemas. A pass that touched dozens of
 * topics then pays one job and one read of the pool, not one each.
 *
 * <p>A task whose packed records pass its share of {@code budget} bytes (all topics together)
 * drops them and only counts: those topics' results overflow, and the caller fetches them
 * topic by topic in windows.
 */
public final class StagingFetchMany {
  private StagingFetchMany() {}

  /**
   * Runs the job; result {@code i} is topic index {@code i}'s, as {@link StagingFetch#run} gives
   * it with {@code low = start} and no upper bound. {@code keySchemas} / {@code valueSchemas} /
   * {@code starts} hold one entry per topic index; a record its topic's schemas do not fit fails
   * the job with "zync to-kafka: ...".
   */
  public static StagingFetch.Result[] run(
      Dataset<Row> outputs,
      List<byte[]> keySchemas,
      List<byte[]> valueSchemas,
      List<? extends Number> starts,
      long budget) {
    var rows = outputs.queryExecution().executedPlan().execute().toJavaRDD();
    long share = Math.max(budget / Math.max(rows.getNumPartitions(), 1), 1);
    long[] from = new long[starts.size()];
    for (int t = 0; t < from.length; t++) from[t] = starts.get(t).longValue();
    List<StagingFetch.Part[]> tasks =
        rows.mapPartitions(new Encode(new ArrayList<>(keySchemas), new ArrayList<>(valueSchemas), from, share))
            .collect();
    StagingFetch.Result[] results = new StagingFetch.Result[from.length];
    for (int t = 0; t < from.length; t++) {
      List<StagingFetch.Part> parts = new ArrayList<>();
      for (StagingFetch.Part[] task : tasks) parts.add(task[t]);
      results[t] = new StagingFetch.Result(parts);
    }
    return results;
  }

  /** One task: for each row, its topic's span; and its encoded record, packed per topic. */
  private static final class Encode
      implements FlatMapFunction<Iterator<InternalRow>, StagingFetch.Part[]> {
    private static final long serialVersionUID = 1L;
    private final ArrayList<byte[]> keySchemas;
    private final ArrayList<byte[]> valueSchemas;
    private final long[] starts;
    private final long budget;

    Encode(ArrayList<byte[]> keySchemas, ArrayList<byte[]> valueSchemas, long[] starts, long budget) {
      this.keySchemas = keySchemas;
      this.valueSchemas = valueSchemas;
      this.starts = starts;
      this.budget = budget;
    }

    @Override
    public Iterator<StagingFetch.Part[]> call(Iterator<InternalRow> rows) {
      int topics = starts.length;
      VariantToAvro.Encoders[] keys = new VariantToAvro.Encoders[topics];
      VariantToAvro.Encoders[] values = new VariantToAvro.Encoders[topics];
      StagingFetch.Part[] parts = new StagingFetch.Part[topics];
      AvroOut[] outs = new AvroOut[topics];
      for (int t = 0; t < topics; t++) parts[t] = new StagingFetch.Part();
      long packed = 0;
      boolean packing = true;
      while (rows.hasNext()) {
        InternalRow row = rows.next();
        int t = row.getInt(0);
        long offset = row.getLong(1);
        StagingFetch.Part part = parts[t];
        part.span.add(offset, starts[t]);
        if (!packing || offset < starts[t]) continue;
        if (outs[t] == null) {  // a topic's schemas are parsed once it has a record here
          outs[t] = new AvroOut();
          keys[t] = VariantToAvro.Encoders.parse(keySchemas.get(t));
          values[t] = VariantToAvro.Encoders.parse(valueSchemas.get(t));
        }
        AvroOut out = outs[t];
        int before = out.size();
        EncodedBatch.appendOffset(out, offset);
        StagingFetch.pack(row, 2, keys[t], out);
        StagingFetch.pack(row, 3, values[t], out);
        part.records++;
        packed += out.size() - before;
        if (packed > budget) {
          packing = false; // only spans from here on: the caller fetches topic by topic
          for (int u = 0; u < topics; u++) {
            parts[u].packedBytes = outs[u] == null ? 0 : outs[u].size();
            outs[u] = null;
          }
        }
      }
      for (int t = 0; t < topics; t++) {
        if (!packing) continue; // packed stays null: over budget
        AvroOut out = outs[t];
        parts[t].packed = out == null ? new byte[0] : java.util.Arrays.copyOf(out.buffer(), out.size());
        parts[t].packedBytes = out == null ? 0 : out.size();
      }
      List<StagingFetch.Part[]> one = new ArrayList<>();
      one.add(parts);
      return one.iterator();
    }
  }
}
