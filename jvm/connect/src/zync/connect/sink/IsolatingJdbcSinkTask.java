package zync.connect.sink;

import io.debezium.connector.jdbc.JdbcSinkConnectorTask;
import java.sql.SQLException;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.connect.errors.ConnectException;
import org.apache.kafka.connect.errors.DataException;
import org.apache.kafka.connect.errors.RetriableException;
import org.apache.kafka.connect.sink.ErrantRecordReporter;
import org.apache.kafka.connect.sink.SinkRecord;
import org.apache.kafka.connect.sink.SinkTask;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Debezium's JDBC sink task, wrapped so that a record the warehouse refuses goes to the
 * connector's dead-letter topic and every other record keeps flowing.
 *
 * <p>Debezium's task (3.6.0) never hands a write failure to Connect: its {@code put} keeps the
 * error ({@code getLastProcessingException}) and the next {@code put} fails the task, which stops
 * every table the connector writes. This task checks after each {@code put}: on a failure it
 * starts a fresh delegate (a stopped one cannot start again, and its saved error only clears on
 * stop) and writes the batch again one record at a time; a record that fails alone is sent to
 * Connect's errant-record reporter with the warehouse's reason, as Debezium's own fix does from
 * 3.7 on (PR #7716). A failure that is the warehouse being away (a lost connection, a server
 * shutting down: {@link Failures#isTransient}) never dead-letters a record: the batch is handed
 * back to Connect as retriable, which delivers it again. The rewrites are safe only with
 * {@code insert.mode=upsert}, the stack's setting.
 *
 * <p>It depends on 3.6.0's task (its public {@code getLastProcessingException}): the stack pins
 * that version.
 */
public class IsolatingJdbcSinkTask extends SinkTask {
  private static final Logger LOG = LoggerFactory.getLogger(IsolatingJdbcSinkTask.class);
  static final long REPORT_TIMEOUT_S = 60; // the dead-letter topic taking a record

  private Map<String, String> config;
  private final Set<TopicPartition> assigned = new HashSet<>();
  private JdbcSinkConnectorTask delegate; // null: to start again before the next write
  private ErrantRecordReporter reporter;

  @Override
  public String version() {
    return new JdbcSinkConnectorTask().version();
  }

  @Override
  public void start(Map<String, String> props) {
    config = new HashMap<>(props);
    reporter = context.errantRecordReporter(); // null unless a dead-letter topic is set
    try {
      delegate = started();
    } catch (RetriableException e) { // a task that fails to start stays FAILED: wait instead
      LOG.warn("{}; the writer starts with the first batch", e.getMessage());
    }
  }

  @Override
  public void put(Collection<SinkRecord> records) {
    Throwable failure = written(records);
    if (failure == null) return;
    if (reporter == null) {
      throw new ConnectException("the warehouse refused a record and this sink has no dead-letter topic to send"
          + " it to: set errors.tolerance=all and errors.deadletterqueue.topic.name, then restart the task; "
          + Failures.reason(failure), failure);
    }
    LOG.warn("A batch of {} records failed ({}); writing them one at a time to find the ones the warehouse"
        + " refuses", records.size(), Failures.reason(failure));
    int refused = 0;
    for (SinkRecord record : records) {
      Throwable alone = written(List.of(record));
      if (alone == null) continue;
      refused++;
      LOG.warn("The warehouse refused the record at {}-{} offset {}: it goes to the dead-letter topic: {}",
          record.topic(), record.kafkaPartition(), record.kafkaOffset(), Failures.reason(alone));
      await(reporter.report(record, new DataException("the warehouse refused the record: "
          + Failures.reason(alone), alone)), record);
    }
    LOG.info("Wrote the batch of {} records one at a time: {} refused, {} written", records.size(), refused,
        records.size() - refused);
  }

  /**
   * Writes {@code records} with the delegate: null when written, else the data error that
   * refused them (the delegate is then started anew). A transient failure (or a delegate that
   * cannot start) is thrown as retriable: Connect delivers the same batch again.
   */
  private Throwable written(Collection<SinkRecord> records) {
    if (delegate == null) delegate = started();
    delegate.put(records);
    Throwable failure = delegate.getLastProcessingException();
    if (failure == null) return null;
    stopDelegate();
    if (Failures.isTransient(failure)) {
      throw new RetriableException("the warehouse is not reachable; the batch will be written again: "
          + Failures.reason(failure), failure);
    }
    return failure;
  }

  private JdbcSinkConnectorTask started() {
    JdbcSinkConnectorTask task = new JdbcSinkConnectorTask();
    task.initialize(context);
    try {
      task.start(config);
    } catch (RuntimeException e) {
      try {
        task.stop();
      } catch (RuntimeException ignored) {
        // a half-started task: what it opened is closed as far as it goes
      }
      // Hibernate says "Unable to determine Dialect without JDBC metadata" whether the
      // warehouse is down or the configuration is wrong, without the cause: ask the database.
      SQLException refused = WarehouseProbe.connect(config);
      Throwable why = refused != null ? refused : e;
      if (Failures.isTransient(why)) {
        throw new RetriableException("the warehouse is not reachable to start the sink's writer; will try again: "
            + Failures.reason(why), e);
      }
      throw new ConnectException("the sink's writer could not start: " + Failures.reason(why), e);
    }
    if (!assigned.isEmpty()) task.open(new HashSet<>(assigned));
    return task;
  }

  private void stopDelegate() {
    JdbcSinkConnectorTask old = delegate;
    delegate = null;
    try {
      old.stop();
    } catch (RuntimeException e) {
      LOG.warn("Stopping the failed writer: {}", Failures.reason(e));
    }
  }

  private static void await(Future<Void> reported, SinkRecord record) {
    String which = record.topic() + "-" + record.kafkaPartition() + " offset " + record.kafkaOffset();
    try {
      reported.get(REPORT_TIMEOUT_S, TimeUnit.SECONDS);
    } catch (TimeoutException e) {
      throw new RetriableException("the dead-letter topic did not take the refused record at " + which + " within "
          + REPORT_TIMEOUT_S + " s; the batch will be written again", e);
    } catch (ExecutionException e) {
      throw new ConnectException("the refused record at " + which + " could not be sent to the dead-letter topic: "
          + Failures.reason(e.getCause()), e.getCause());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new ConnectException("interrupted while sending the refused record at " + which
          + " to the dead-letter topic", e);
    }
  }

  @Override
  public void open(Collection<TopicPartition> partitions) {
    assigned.addAll(partitions);
    if (delegate != null) delegate.open(partitions);
  }

  @Override
  public void close(Collection<TopicPartition> partitions) {
    assigned.removeAll(partitions);
    if (delegate != null) delegate.close(partitions);
  }

  @Override
  public Map<TopicPartition, OffsetAndMetadata> preCommit(Map<TopicPartition, OffsetAndMetadata> currentOffsets) {
    // Connect's offsets are those of the batches put() returned from, every record of which
    // is written or dead-lettered; a delegate's own are never past them.
    return delegate == null ? currentOffsets : delegate.preCommit(currentOffsets);
  }

  @Override
  public void stop() {
    if (delegate != null) stopDelegate();
  }
}
