package zync.connect.registry;

import io.apicurio.rest.client.request.Request;
import io.apicurio.rest.client.spi.ApicurioHttpClient;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * An Apicurio HTTP client whose every request ends within a bound: the request runs on a call
 * thread of its own, and the caller waits for it at most {@code timeoutMs}; past that the call
 * is interrupted (the JDK's {@code HttpClient.send} then gives up its exchange) and the caller
 * gets {@link RegistryUnreachable}. The next request opens a connection of its own if the timed
 * out one is still held.
 */
final class TimedHttpClient implements ApicurioHttpClient {
  private static final AtomicInteger THREADS = new AtomicInteger();
  private final ApicurioHttpClient delegate;
  private final String endpoint;
  private final long timeoutMs;
  // Apicurio hands a request's extra headers through a thread-local; the call runs on another
  // thread, so they are carried over to it.
  private final ThreadLocal<Map<String, String>> nextHeaders = new ThreadLocal<>();
  private final ExecutorService calls = Executors.newCachedThreadPool(task -> {
    Thread thread = new Thread(task, "zync-registry-call-" + THREADS.incrementAndGet());
    thread.setDaemon(true);
    return thread;
  });

  TimedHttpClient(ApicurioHttpClient delegate, String endpoint, long timeoutMs) {
    this.delegate = delegate;
    this.endpoint = endpoint;
    this.timeoutMs = timeoutMs;
  }

  @Override
  public <T> T sendRequest(Request<T> request) {
    Map<String, String> headers = nextHeaders.get();
    nextHeaders.remove();
    Future<T> call = calls.submit(() -> {
      if (headers != null) delegate.setNextRequestHeaders(headers);
      return delegate.sendRequest(request);
    });
    String what = request.getOperation() + " " + endpoint + request.getRequestPath();
    try {
      return call.get(timeoutMs, TimeUnit.MILLISECONDS);
    } catch (TimeoutException e) {
      call.cancel(true);
      throw new RegistryUnreachable("the schema registry did not answer " + what + " within " + timeoutMs + " ms", e);
    } catch (InterruptedException e) {
      call.cancel(true);
      Thread.currentThread().interrupt();
      throw new RegistryUnreachable("interrupted while waiting for the schema registry: " + what, e);
    } catch (ExecutionException e) {
      Throwable cause = e.getCause();
      if (cause instanceof RuntimeException runtime) throw runtime; // Apicurio's own errors, as they were
      if (cause instanceof Error error) throw error;
      throw new RegistryUnreachable("the schema registry request " + what + " failed: " + cause, cause);
    }
  }

  @Override
  public void setNextRequestHeaders(Map<String, String> headers) {
    nextHeaders.set(headers);
  }

  @Override
  public Map<String, String> getHeaders() {
    return delegate.getHeaders();
  }

  @Override
  public void close() {
    calls.shutdownNow();
    delegate.close();
  }
}
