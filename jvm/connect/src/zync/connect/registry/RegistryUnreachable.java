package zync.connect.registry;

import java.io.IOException;

/** The schema registry did not answer in time, or could not be reached at all. */
final class RegistryUnreachable extends RuntimeException {
  RegistryUnreachable(String message, Throwable cause) {
    super(message, cause);
  }

  /**
   * The registry's unreachability among {@code failure}'s causes: a request that timed out here,
   * or a connection that failed (an {@link IOException}, which Apicurio wraps); null when the
   * failure is the registry's answer (an unknown id, a refused schema) or anything else.
   */
  static RegistryUnreachable in(Throwable failure) {
    int depth = 0;
    for (Throwable t = failure; t != null && depth < 32; t = t.getCause(), depth++) {
      if (t instanceof RegistryUnreachable unreachable) return unreachable;
      if (t instanceof IOException io) return new RegistryUnreachable("the schema registry could not be reached: " + io, io);
    }
    return null;
  }
}
