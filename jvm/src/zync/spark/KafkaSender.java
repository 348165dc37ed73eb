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
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * to-kafka's transactional producer, in Spark's driver JVM: the records {@link StagingFetch}
 * encoded go straight to Kafka without crossing into Python (which cost more than the encoding).
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
  private final Header poolHeader; // the same on every record: built once

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
    producer.beginTransaction();
    FirstFailure failure = new FirstFailure();
    try {
      for (int i = from; i < to; i++) {
        byte[] offset = Long.toString(batch.first + i).getBytes(StandardCharsets.US_ASCII);
        Header[] headers = {poolHeader, new RecordHeader(OFFSET_HEADER, offset)};
        producer.send(
            new ProducerRecord<>(
                topic, null, null, batch.key(i), batch.value(i), new RecordHeaders(headers)),
            failure);
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
}
