package zync.connect.registry;

import io.apicurio.registry.utils.converter.AvroConverter;
import io.apicurio.rest.client.spi.ApicurioHttpClientFactory;
import java.util.Map;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.common.header.Headers;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaAndValue;
import org.apache.kafka.connect.errors.RetriableException;

/**
 * Apicurio's Avro converter (2.6) whose schema registry requests cannot wait forever.
 *
 * <p>Apicurio's HTTP client (apicurio-common-rest-client-jdk 0.1.18) sends each request with the
 * JDK's {@code HttpClient.send} and no timeout: a request the registry never answers (a lost
 * request on a kept-alive connection, a paused registry, a network that drops packets) parks
 * the task's thread for good while Connect reports it RUNNING. This converter has Apicurio's
 * clients made by {@link TimedHttpClientProvider}: each request is bounded by {@code
 * zync.registry.request.timeout.ms} (default 10 s) and Apicurio's own retries
 * ({@code apicurio.registry.retry-count}) then apply. A registry still unreachable after them
 * is a {@link RetriableException}: with {@code errors.retry.timeout=-1} Connect converts the
 * record again until the registry answers, and never sends it to the dead-letter topic for that.
 */
public class TimedAvroConverter<T> extends AvroConverter<T> {
  public static final String REQUEST_TIMEOUT_CONFIG = "zync.registry.request.timeout.ms";
  static final long DEFAULT_REQUEST_TIMEOUT_MS = 10_000;

  @Override
  public void configure(Map<String, ?> configs, boolean isKey) {
    requestTimeoutMs(configs); // a bad value fails here, at the connector's start
    // Apicurio's factory keeps one provider for the whole plugin: the first one set wins,
    // and each client it makes reads its own converter's timeout.
    ApicurioHttpClientFactory.setProvider(new TimedHttpClientProvider());
    super.configure(configs, isKey);
  }

  /** The request timeout in `configs` (milliseconds, above 0), else the default. */
  static long requestTimeoutMs(Map<String, ?> configs) {
    Object given = configs.get(REQUEST_TIMEOUT_CONFIG);
    if (given == null) return DEFAULT_REQUEST_TIMEOUT_MS;
    try {
      long timeoutMs = Long.parseLong(given.toString().trim());
      if (timeoutMs > 0) return timeoutMs;
    } catch (NumberFormatException e) {
      // said below
    }
    throw new ConfigException(REQUEST_TIMEOUT_CONFIG, given, "give a number of milliseconds above 0, e.g. 10000");
  }

  @Override
  public SchemaAndValue toConnectData(String topic, byte[] value) {
    try {
      return super.toConnectData(topic, value);
    } catch (RuntimeException e) {
      throw retriableIfUnreachable(e, topic);
    }
  }

  @Override
  public SchemaAndValue toConnectData(String topic, Headers headers, byte[] value) {
    try {
      return super.toConnectData(topic, headers, value);
    } catch (RuntimeException e) {
      throw retriableIfUnreachable(e, topic);
    }
  }

  @Override
  public byte[] fromConnectData(String topic, Schema schema, Object value) {
    try {
      return super.fromConnectData(topic, schema, value);
    } catch (RuntimeException e) {
      throw retriableIfUnreachable(e, topic);
    }
  }

  @Override
  public byte[] fromConnectData(String topic, Headers headers, Schema schema, Object value) {
    try {
      return super.fromConnectData(topic, headers, schema, value);
    } catch (RuntimeException e) {
      throw retriableIfUnreachable(e, topic);
    }
  }

  private static RuntimeException retriableIfUnreachable(RuntimeException e, String topic) {
    RegistryUnreachable unreachable = RegistryUnreachable.in(e);
    if (unreachable == null) return e;
    return new RetriableException("a record of " + topic + " waits for the schema registry: "
        + unreachable.getMessage() + "; Connect tries again", e);
  }
}
