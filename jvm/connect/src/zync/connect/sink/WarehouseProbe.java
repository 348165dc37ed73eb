package zync.connect.sink;

import java.sql.Connection;
import java.sql.Driver;
import java.sql.SQLException;
import java.util.Map;
import java.util.Properties;
import java.util.ServiceLoader;

/** One connection to the warehouse as the sink's configuration names it: what refuses it. */
final class WarehouseProbe {
  private WarehouseProbe() {}

  static final int LOGIN_TIMEOUT_S = 10;

  /**
   * The database's refusal of a connection with the sink's {@code connection.url}, {@code
   * connection.username} and {@code connection.password} (its SQL state says whether it is an
   * outage); null when it connects, or when no JDBC driver of the plugin takes the URL.
   */
  static SQLException connect(Map<String, String> config) {
    String url = config.get("connection.url");
    if (url == null) return null;
    Properties login = new Properties();
    if (config.get("connection.username") != null) login.setProperty("user", config.get("connection.username"));
    if (config.get("connection.password") != null) login.setProperty("password", config.get("connection.password"));
    login.setProperty("loginTimeout", Integer.toString(LOGIN_TIMEOUT_S)); // PostgreSQL's driver
    login.setProperty("connectTimeout", Integer.toString(LOGIN_TIMEOUT_S));
    for (Driver driver : ServiceLoader.load(Driver.class, WarehouseProbe.class.getClassLoader())) {
      try {
        if (!driver.acceptsURL(url)) continue;
        try (Connection connection = driver.connect(url, login)) {
          return null;
        }
      } catch (SQLException e) {
        return e;
      }
    }
    return null;
  }
}
