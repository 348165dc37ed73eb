package zync.connect.sink;

import java.io.IOException;
import java.sql.SQLException;
import java.sql.SQLRecoverableException;
import java.sql.SQLTransientException;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Deque;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Set;

/** What a write failure says: whether the warehouse was away, and its reason in one line. */
final class Failures {
  private Failures() {}

  private static final int MAX_CAUSES = 32;

  /**
   * Whether {@code failure} is the warehouse being unreachable or going away rather than a record
   * it refuses: a lost or refused connection (SQL state class 08), the server shutting down or
   * restarting (57P01-57P03), too few resources (53), a serialization failure or deadlock (40), a
   * socket or I/O error, or a transient JDBC exception, anywhere in its causes.
   */
  static boolean isTransient(Throwable failure) {
    for (Throwable cause : causes(failure)) {
      if (cause instanceof SQLTransientException || cause instanceof SQLRecoverableException) return true;
      if (cause instanceof SQLException sql && transientState(sql.getSQLState())) return true;
      if (cause instanceof IOException) return true;
      if (cause.getClass().getSimpleName().equals("JDBCConnectionException")) return true; // Hibernate's
    }
    return false;
  }

  static boolean transientState(String state) {
    if (state == null || state.length() != 5) return false;
    return state.startsWith("08") || state.startsWith("53") || state.startsWith("40")
        || state.equals("57P01") || state.equals("57P02") || state.equals("57P03");
  }

  /** The deepest cause's message (the database's own words), on one line. */
  static String reason(Throwable failure) {
    Throwable deepest = failure;
    for (Throwable cause : causes(failure)) {
      if (cause.getMessage() != null && !cause.getMessage().isBlank()) deepest = cause;
    }
    String message = deepest.getMessage() == null ? deepest.getClass().getName() : deepest.getMessage();
    return message.replaceAll("\\s+", " ").trim();
  }

  /** {@code failure} and its causes, a SQL exception's next exceptions among them (a batch's). */
  private static List<Throwable> causes(Throwable failure) {
    List<Throwable> chain = new ArrayList<>();
    Set<Throwable> seen = Collections.newSetFromMap(new IdentityHashMap<>());
    Deque<Throwable> todo = new ArrayDeque<>();
    todo.add(failure);
    while (!todo.isEmpty() && chain.size() < MAX_CAUSES) {
      Throwable t = todo.poll();
      if (!seen.add(t)) continue;
      chain.add(t);
      if (t.getCause() != null) todo.add(t.getCause());
      if (t instanceof SQLException sql && sql.getNextException() != null) todo.add(sql.getNextException());
    }
    return chain;
  }
}
