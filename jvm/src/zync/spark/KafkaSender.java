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
import org.apache.kafka.clients.producer.internals.BuiltInPartitioner;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * to-kafka's transactional producer, in Spark's driver JVM: the records {@link StagingFetch}
 * encoded go straight to Kafka without crossing into Python (which cost more than the encoding).
 *
 * <p>The transactional id is fixed per (pool, topic) by the caller, or per pool when the pool's
 * topics are sent together, so the constructor's {@code initTransactions} fences any older
 * producer and aborts what it left open.
 *
 * <p>The next run finds where the topic stands from the last committed record of each partition,
 * which must carry the headers {@code zync.pool} and {@code zync.offset} (its staging offset). So
 * the last record a transaction writes to each partition carries them, and records without a key
 * (whose partition the producer picks) do; the others go without: two headers per record cost a
 * quarter of the send time. To know each partition's last record, keyed records are partitioned
 * here, the way Kafka's default partitioner (and librdkafka's murmur2_random) does.
 */
public final class KafkaSender implements AutoCloseable {
  private static final String POOL_HEADER = "zync.pool";
  private static final String OFFSET_HEADER = "zync.offset";
  private static final int COMMIT_TRIES = 2;

  private final KafkaProducer<byte[], byte[]> producer;
  private final String topic; // sendTransaction's; null when the pool's topics go together
  private final Header poolHeader; // the same on every record: built once
  private FirstFailure failure = new FirstFailure(); // the open transaction's

  public KafkaSender(Map<String, String> config, String topic, String pool) {
    Properties properties = new Properties();
    properties.putAll(config);
    properties.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
    this.producer =
        new KafkaProducer<>(properties, new ByteArraySerializer(), new ByteArraySerializer());
    this.topic = topic;
    this.poolHeader = new RecordHeader(POOL_HEADER, pool.getBytes(StandardCharsets.UTF_8));
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
  public void sendTransaction(EncodedBatch batch, int from, int to) {
    beginTransaction();
    try {
      sendPart(batch, topic, from, to);
    } catch (RuntimeException e) {
      abortQuietly();
      throw failure.first != null ? failure.first : e;
    }
    commitTransaction();
  }

  /**
   * Opens a transaction of several parts ({@link #sendPart}, one per topic), ended by {@link
   * #commitTransaction} or {@link #abortTransaction}: a source transaction's outputs to several
   * topics go in one Kafka transaction.
   */
  public void beginTransaction() {
    producer.beginTransaction();
    failure = new FirstFailure();
  }

  /** Records {@code [from, to)} of {@code batch} to {@code topic}, in the open transaction. */
  public void sendPart(EncodedBatch batch, String topic, int from, int to) {
    Partitions partitions = Partitions.of(batch, from, to, producer.partitionsFor(topic).size());
    for (int i = from; i < to; i++) {
      Integer partition = partitions.of(i);
      RecordHeaders headers = null;
      if (partition == null || partitions.isLast(i)) {
        byte[] offset = Long.toString(batch.first + i).getBytes(StandardCharsets.US_ASCII);
        Header[] both = {poolHeader, new RecordHeader(OFFSET_HEADER, offset)};
        headers = new RecordHeaders(both);
      }
      producer.send(
          new ProducerRecord<>(topic, partition, null, batch.key(i), batch.value(i), headers),
          failure);
    }
  }

  /**
   * Commits the open transaction; if a send failed, aborts it and throws that failure. A commit
   * that timed out is tried once more, as Kafka's producer allows (an abort is not allowed while a
   * commit is pending): a JVM that was paused past the timeout (a long GC, a stopped process)
   * finds the coordinator's answer waiting, e.g. that another producer fenced this one.
   */
  public void commitTransaction() {
    for (int tried = 1; ; tried++) {
      try {
        producer.commitTransaction(); // flushes; throws if a send failed
        return;
      } catch (TimeoutException e) {
        if (failure.first == null && tried < COMMIT_TRIES) {
          continue;
        }
        throw failure.first != null ? failure.first : e;
      } catch (RuntimeException e) {
        abortQuietly();
        throw failure.first != null ? failure.first : e;
      }
    }
  }

  /** Aborts the open transaction, after a {@link #sendPart} threw. */
  public void abortTransaction() {
    abortQuietly();
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

  /**
   * Where the records {@code [from, to)} go: by key hash (null for no key: the producer picks),
   * and which record is the last one of its partition.
   */
  private static final class Partitions {
    private final int from;
    private final int[] partition; // per record; -1: no key
    private final boolean[] last;

    private Partitions(int from, int[] partition, boolean[] last) {
      this.from = from;
      this.partition = partition;
      this.last = last;
    }

    static Partitions of(EncodedBatch batch, int from, int to, int count) {
      int[] partition = new int[to - from];
      boolean[] last = new boolean[to - from];
      if (count == 1) {
        if (to > from) last[to - from - 1] = true; // all go to partition 0, keyed or not
        return new Partitions(from, partition, last);
      }
      int[] lastOf = new int[count];
      java.util.Arrays.fill(lastOf, -1);
      for (int i = from; i < to; i++) {
        byte[] key = batch.key(i);
        int p = key == null ? -1 : BuiltInPartitioner.partitionForKey(key, count);
        partition[i - from] = p;
        if (p >= 0) lastOf[p] = i - from;
      }
      for (int index : lastOf) if (index >= 0) last[index] = true;
      return new Partitions(from, partition, last);
    }

    Integer of(int i) {
      int p = partition[i - from];
      return p < 0 ? null : p;
    }

    boolean isLast(int i) {
      return last[i - from];
    }
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
}
