package zync.spark;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.classic.Dataset;

/**
 * to-kafka's transactional producer, in Spark's driver JVM: encoded records go from Spark's
 * result straight to Kafka without crossing into Python (which cost more than the encoding).
 *
 * <p>The transactional id is fixed per (pool, topic) by the caller, so the constructor's {@code
 * initTransactions} fences any older producer and aborts what it left open. Each record carries
 * the headers {@code zync.pool} and {@code zync.offset} (its staging offset), from which the next
 * run finds where the topic stands.
 */
public final class KafkaSender implements AutoCloseable {
  private static final String POOL_HEADER = "zync.pool";
  private static final String OFFSET_HEADER = "zync.offset";

  private final KafkaProducer<byte[], byte[]> producer;
  private final String topic;
  private final byte[] pool;

  public KafkaSender(Map<String, String> config, String topic, String pool) {
    Properties properties = new Properties();
    properties.putAll(config);
    properties.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
    this.producer =
        new KafkaProducer<>(properties, new ByteArraySerializer(), new ByteArraySerializer());
    this.topic = topic;
    this.pool = pool.getBytes(StandardCharsets.UTF_8);
    try {
      producer.initTransactions();
    } catch (RuntimeException e) {
      producer.close(Duration.ZERO);
      throw e;
    }
  }

  /**
   * Records {@code [from, to)} of {@code batch} in one transaction. If any of them fails, the
   * transaction is aborted (when the producer still can) and the failure is thrown.
   */
  public void sendTransaction(Batch batch, int from, int to) {
    producer.beginTransaction();
    FirstFailure failure = new FirstFailure();
    try {
      for (int i = from; i < to; i++) {
        RecordHeaders headers = new RecordHeaders();
        headers.add(POOL_HEADER, pool);
        headers.add(OFFSET_HEADER, Long.toString(batch.first + i).getBytes(StandardCharsets.US_ASCII));
        producer.send(
            new ProducerRecord<>(topic, null, null, batch.keys[i], batch.values[i], headers), failure);
      }
      producer.commitTransaction(); // flushes; throws if a send failed
    } catch (RuntimeException e) {
      abortQuietly();
      throw failure.first != null ? failure.first : e;
    }
  }

  private void abortQuietly() {
    try {
      producer.abortTransaction();
    } catch (RuntimeException e) {
      // A fenced or failed producer cannot abort; the next run's initTransactions aborts for it.
    }
  }

  @Override
  public void close() {
    producer.close(Duration.ofSeconds(5));
  }

  /** Keeps the first send failure: commitTransaction's own error only says the state is bad. */
  private static final class FirstFailure implements Callback {
    volatile RuntimeException first;

    @Override
    public void onCompletion(RecordMetadata metadata, Exception exception) {
      if (exception != null && first == null) {
        first =
            exception instanceof RuntimeException runtime
                ? runtime
                : new IllegalStateException(exception.getMessage(), exception);
      }
    }
  }

  /**
   * Encoded records with the consecutive staging offsets {@code first, first + 1, ...}, collected
   * from Spark into the driver and put in offset order (Spark returns them in file order).
   */
  public static final class Batch {
    final long first;
    final byte[][] keys;
    final byte[][] values;
    private final long bytes;

    private Batch(long first, byte[][] keys, byte[][] values, long bytes) {
      this.first = first;
      this.keys = keys;
      this.values = values;
      this.bytes = bytes;
    }

    /**
     * Collects {@code encoded} (columns offset, key, value: BIGINT, BINARY, BINARY), which must
     * hold exactly the offsets {@code [low, high)}; an IllegalStateException says otherwise.
     */
    public static Batch collect(Dataset<Row> encoded, long low, long high) {
      int count = Math.toIntExact(high - low);
      // Spark's internal rows: collectAsList would convert each into a Row first.
      InternalRow[] rows = encoded.queryExecution().executedPlan().executeCollect();
      byte[][] keys = new byte[count][];
      byte[][] values = new byte[count][];
      boolean[] seen = new boolean[count];
      long bytes = 0;
      for (InternalRow row : rows) {
        long at = row.getLong(0) - low;
        if (at < 0 || at >= count || seen[(int) at]) {
          throw changed(low, high);
        }
        seen[(int) at] = true;
        keys[(int) at] = row.isNullAt(1) ? null : row.getBinary(1);
        values[(int) at] = row.isNullAt(2) ? null : row.getBinary(2);
        bytes += length(keys[(int) at]) + length(values[(int) at]);
      }
      if (rows.length != count) throw changed(low, high);
      return new Batch(low, keys, values, bytes);
    }

    private static IllegalStateException changed(long low, long high) {
      return new IllegalStateException(
          "staging offsets " + low + ".." + (high - 1) + " changed while sending; run again");
    }

    private static int length(byte[] data) {
      return data == null ? 0 : data.length;
    }

    public long first() {
      return first;
    }

    public int size() {
      return keys.length;
    }

    /** Bytes of keys and values, to size the next fetch. */
    public long bytes() {
      return bytes;
    }
  }
}
