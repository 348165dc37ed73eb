package zync.connect.sink;

import io.debezium.connector.jdbc.JdbcSinkConnector;
import org.apache.kafka.connect.connector.Task;

/**
 * Debezium's JDBC sink connector (3.6.0) with a task that costs one record, not the warehouse,
 * when the warehouse refuses a record: {@link IsolatingJdbcSinkTask}. Its configuration is
 * Debezium's, unchanged, plus Connect's dead-letter settings ({@code errors.tolerance=all},
 * {@code errors.deadletterqueue.topic.name}).
 */
public class IsolatingJdbcSinkConnector extends JdbcSinkConnector {
  @Override
  public Class<? extends Task> taskClass() {
    return IsolatingJdbcSinkTask.class;
  }
}
