package zync.connect.registry;

import io.apicurio.rest.client.JdkHttpClient;
import io.apicurio.rest.client.auth.Auth;
import io.apicurio.rest.client.error.RestClientErrorHandler;
import io.apicurio.rest.client.spi.ApicurioHttpClient;
import io.apicurio.rest.client.spi.ApicurioHttpClientProvider;
import java.util.Map;

/**
 * Makes Apicurio's JDK HTTP clients, each request of which is bounded in time: by the client's
 * own {@code zync.registry.request.timeout.ms} (Apicurio hands a client its converter's
 * settings), else {@link TimedAvroConverter#DEFAULT_REQUEST_TIMEOUT_MS}. One provider serves
 * the whole plugin (Apicurio's factory keeps one), so each converter's bound is its own.
 */
final class TimedHttpClientProvider implements ApicurioHttpClientProvider {
  @Override
  public ApicurioHttpClient create(String endpoint, Map<String, Object> configs, Auth auth,
      RestClientErrorHandler errorHandler) {
    long timeoutMs = TimedAvroConverter.requestTimeoutMs(configs);
    return new TimedHttpClient(new JdkHttpClient(endpoint, configs, auth, errorHandler), endpoint, timeoutMs);
  }
}
