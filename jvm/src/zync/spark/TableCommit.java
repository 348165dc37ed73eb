package zync.spark;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SaveMode;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.delta.DeltaLog;
import org.apache.spark.sql.delta.DeltaOperations;
import org.apache.spark.sql.delta.OptimisticTransaction;
import org.apache.spark.sql.delta.Snapshot;
import org.apache.spark.sql.delta.VersionChecksum;
import org.apache.spark.sql.delta.actions.Action;
import org.apache.spark.sql.delta.actions.AddCDCFile;
import org.apache.spark.sql.delta.actions.AddFile;
import org.apache.spark.sql.delta.actions.Metadata;
import org.apache.spark.sql.delta.actions.SetTransaction;
import scala.Option;
import scala.collection.immutable.Map$;
import scala.jdk.javaapi.CollectionConverters;

/**
 * A lake table's pass committed from the driver with Delta's transaction API: the files {@link
 * TableFiles} wrote, the table's old files removed (a whole new version of a small table), the
 * change feed's files, and the pass's {@code SetTransaction} (app id, run) in one commit. No Spark
 * job: the table's files and transaction versions are read from its checksum file, which Delta
 * keeps for tables of up to 50 files.
 *
 * <p>These are delta-spark internals (4.4, pinned by the package), not a stable API.
 */
public final class TableCommit {
  private TableCommit() {}

  /** The table moved on since the pass read it: another writer committed first. */
  public static final class Conflict extends IllegalStateException {
    private static final long serialVersionUID = 1L;

    Conflict(String message) {
      super(message);
    }
  }

  /**
   * Commits table {@code root}'s pass: the files of output {@code output} among {@code written}
   * (its rows, and its change feed's); with {@code replace}, every file of version {@code
   * readVersion} removed. A table that is no longer at {@code readVersion}
   * (-1: any) raises {@link Conflict}; a table that has {@code run} of {@code appId} already
   * commits nothing (a killed pass's redo). A table without a checkpoint interval of its own
   * gets {@code checkpointInterval} (0: none). Returns the version committed, or -1.
   */
  public static long commit(
      SparkSession spark, String root, long readVersion, List<TableFiles.Written> written,
      int output, boolean replace, String appId, long run, String userMetadata,
      long checkpointInterval) {
    DeltaLog log = DeltaLog.forTable(spark, root);
    Snapshot snapshot = log.update(false, Option.empty(), Option.empty());
    if (readVersion >= 0 && snapshot.version() != readVersion) {
      throw new Conflict(
          "zync tables: table " + root + " is at version " + snapshot.version() + ", not "
              + readVersion + " as this pass read it: another writer committed first");
    }
    // A version the pass read is the proof that no run since is committed; a blind append (a
    // change log's) asks the table's transactions, as Delta's own writes do.
    if (readVersion < 0 && committedRun(snapshot, appId) >= run) return -1;
    OptimisticTransaction txn = log.startTransaction(Option.empty(), Option.apply(snapshot));
    txn.readWholeTable();
    checkpointEvery(txn, snapshot.metadata(), checkpointInterval);
    long now = System.currentTimeMillis();
    List<Action> actions = new ArrayList<>();
    if (replace) {
      for (AddFile old : files(snapshot)) actions.add(old.removeWithTimestamp(now, true));
    }
    for (TableFiles.Written file : written) {
      if (file.output == output) actions.add(file.change ? changed(file) : added(file));
    }
    actions.add(new SetTransaction(appId, run, Option.apply(now)));
    var operation =
        new DeltaOperations.Write(
            replace ? SaveMode.Overwrite : SaveMode.Append, Option.empty(), Option.empty(),
            Option.apply(userMetadata), Option.empty(), Option.empty(), Option.empty(),
            Option.empty(), Option.empty());
    return txn.commit(CollectionConverters.asScala(actions).toList(), operation);
  }

  private static final String CHECKPOINT_INTERVAL = "delta.checkpointInterval";

  /**
   * Gives a table that has no {@code delta.checkpointInterval} of its own {@code interval} (0:
   * none), in the commit's metadata. Delta writes a checkpoint in the commit whose version is a
   * multiple of it (10 by default), with Spark jobs of its own: tables that every pass commits
   * then all checkpoint in the same pass (a 60-table pass took 38 s instead of 12, 183 jobs
   * instead of 3). Intervals that differ per table spread the checkpoints over passes.
   */
  private static void checkpointEvery(
      OptimisticTransaction txn, Metadata metadata, long interval) {
    if (interval <= 0 || metadata.configuration().contains(CHECKPOINT_INTERVAL)) return;
    scala.collection.immutable.Map<String, String> configuration =
        metadata.configuration().updated(CHECKPOINT_INTERVAL, Long.toString(interval));
    txn.updateMetadata(metadata.copy(metadata.id(), metadata.name(), metadata.description(),
        metadata.format(), metadata.schemaString(), metadata.partitionColumns(), configuration,
        metadata.createdTime()), false);
  }

  /**
   * Deletes the files under {@code root} and its {@code folders} named {@code prefix}* that
   * the table's current version does not hold (change-feed files: those of runs other than
   * {@code keep}'s); returns how many. Only a run's own prefix is given here, after that run is
   * committed: a rival pass of the same run fails its commit, so its files are garbage.
   */
  public static int deleteOrphans(
      SparkSession spark, String root, List<String> folders, String prefix, String keep)
      throws IOException {
    DeltaLog log = DeltaLog.forTable(spark, root);
    Snapshot snapshot = log.update(false, Option.empty(), Option.empty());
    java.util.Set<String> held = new java.util.HashSet<>();
    for (AddFile file : files(snapshot)) held.add(file.path());
    int deleted = 0;
    for (String folder : folders) {
      Path glob = new Path(folder.isEmpty() ? root : root + "/" + folder, prefix + "*");
      FileSystem fs = glob.getFileSystem(spark.sessionState().newHadoopConf());
      FileStatus[] found = fs.globStatus(glob);
      if (found == null) continue;
      for (FileStatus status : found) {
        String name = status.getPath().getName();
        String relative = folder.isEmpty() ? name : folder + "/" + name;
        if (held.contains(relative) || name.startsWith(keep)) continue;
        if (fs.delete(status.getPath(), false)) deleted++;
      }
    }
    return deleted;
  }

  /** A table's newest version and, where its checksum lists its files, its rows. */
  public static final class Stored {
    private final long version;
    private final String schema;
    private final Dataset<Row> rows; // null: not listed

    Stored(Snapshot snapshot, Dataset<Row> rows) {
      this.version = snapshot.version();
      this.schema = snapshot.metadata().schemaString();
      this.rows = rows;
    }

    public long version() {
      return version;
    }

    /** The version's schema, as JSON. */
    public String schema() {
      return schema;
    }

    /**
     * The version's rows, read from exactly the files its checksum lists (when {@link #listed}):
     * no listing and no Delta scan planning (whose jobs a Delta read costs per table; a
     * DataFrame of the files' paths cost 10 ms a table).
     */
    public Dataset<Row> rows() {
      return rows;
    }

    /**
     * Whether {@link #rows} are there: the checksum lists the files and none has a deletion
     * vector (those tables are read through Delta).
     */
    public boolean listed() {
      return rows != null;
    }
  }

  /** Table {@code root}'s newest version and, where its checksum lists them, its rows (no job). */
  public static Stored stored(SparkSession spark, String root) {
    Snapshot snapshot = DeltaLog.forTable(spark, root).update(false, Option.empty(), Option.empty());
    Option<VersionChecksum> checksum = snapshot.checksumOpt();
    if (!checksum.isDefined() || !checksum.get().allFiles().isDefined()) {
      return new Stored(snapshot, null);
    }
    for (AddFile file : CollectionConverters.asJava(checksum.get().allFiles().get())) {
      if (file.deletionVector() != null) return new Stored(snapshot, null);
    }
    return new Stored(snapshot, snapshot.deltaLog().createDataFrame(
        snapshot, checksum.get().allFiles().get(), false, Option.empty()));
  }

  /** The run of {@code appId} the table has committed (-1: none). */
  public static long committedRun(Snapshot snapshot, String appId) {
    Option<VersionChecksum> checksum = snapshot.checksumOpt();
    var transactions =
        checksum.isDefined() && checksum.get().setTransactions().isDefined()
            ? checksum.get().setTransactions().get()
            : snapshot.setTransactions();
    for (SetTransaction txn : CollectionConverters.asJava(transactions)) {
      if (txn.appId().equals(appId)) return txn.version();
    }
    return -1;
  }

  /** The table's files, from its checksum when it holds them (no Spark job), else from its log. */
  private static List<AddFile> files(Snapshot snapshot) {
    Option<VersionChecksum> checksum = snapshot.checksumOpt();
    if (checksum.isDefined() && checksum.get().allFiles().isDefined()) {
      return CollectionConverters.asJava(checksum.get().allFiles().get());
    }
    return snapshot.allFiles().collectAsList();
  }

  private static AddFile added(TableFiles.Written file) {
    return new AddFile(
        file.path, Map$.MODULE$.empty(), file.size, file.modified, true,
        "{\"numRecords\":" + file.rows + "}", null, null, Option.empty(), Option.empty(),
        Option.empty(), Option.empty(), Option.empty());
  }

  private static AddCDCFile changed(TableFiles.Written file) {
    return new AddCDCFile(file.path, Map$.MODULE$.empty(), file.size, null, null);
  }
}
