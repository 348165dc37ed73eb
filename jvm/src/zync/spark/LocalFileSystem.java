package zync.spark;

import org.apache.hadoop.fs.RawLocalFileSystem;

/**
 * Hadoop's local file system (checksums and all) over {@link ShelllessRawLocalFileSystem}: the
 * {@code fs.file.impl} of zync's Spark sessions (zync_assets/spark/spark-defaults.conf).
 */
public class LocalFileSystem extends org.apache.hadoop.fs.LocalFileSystem {
  public LocalFileSystem() {
    super(new ShelllessRawLocalFileSystem());
  }

  /** For {@link LocalFs}: the raw layer it delegates to. */
  static RawLocalFileSystem raw() {
    return new ShelllessRawLocalFileSystem();
  }
}
