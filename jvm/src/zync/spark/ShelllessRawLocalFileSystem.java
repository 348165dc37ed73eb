package zync.spark;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's raw local file system without a child process per call.
 *
 * <p>Without Hadoop's native library (PySpark ships none), RawLocalFileSystem runs {@code chmod}
 * for the permission of every file and folder it creates, and {@code readlink} twice for every
 * rename through a FileContext (Delta's log store: each commit). A process started by a JVM of
 * a few GiB costs about 30 ms on two cores: a lake table's pass spent over a second of its 2.3
 * in them (1,500 processes for 36 table passes, measured with Java Flight Recorder). Here both
 * are Java calls; what they do is unchanged.
 */
public class ShelllessRawLocalFileSystem extends RawLocalFileSystem {
  private static final PosixFilePermission[] BITS = {
    PosixFilePermission.OTHERS_EXECUTE, PosixFilePermission.OTHERS_WRITE,
    PosixFilePermission.OTHERS_READ, PosixFilePermission.GROUP_EXECUTE,
    PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_READ,
    PosixFilePermission.OWNER_EXECUTE, PosixFilePermission.OWNER_WRITE,
    PosixFilePermission.OWNER_READ,
  };

  @Override
  public void setPermission(Path p, FsPermission permission) throws IOException {
    short mode = permission.toShort();
    if ((mode & ~0777) != 0) { // a sticky bit: only chmod sets it
      super.setPermission(p, permission);
      return;
    }
    Set<PosixFilePermission> wanted = EnumSet.noneOf(PosixFilePermission.class);
    for (int bit = 0; bit < BITS.length; bit++) {
      if ((mode & (1 << bit)) != 0) wanted.add(BITS[bit]);
    }
    try {
      Files.setPosixFilePermissions(pathToFile(p).toPath(), wanted);
    } catch (NoSuchFileException e) {
      throw new FileNotFoundException("File " + p + " does not exist");
    }
  }

  /**
   * A path that is no symbolic link: its status, as Hadoop's own (whose {@code readlink} of a
   * qualified path's text finds no link either). A link: Hadoop's own.
   */
  @Override
  public FileStatus getFileLinkStatus(Path f) throws IOException {
    if (Files.isSymbolicLink(pathToFile(f).toPath())) return super.getFileLinkStatus(f);
    return getFileStatus(f);
  }
}
