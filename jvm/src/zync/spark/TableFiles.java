package zync.spark;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.mapreduce.Job;
import org.apache.hadoop.mapreduce.JobID;
import org.apache.hadoop.mapreduce.TaskAttemptID;
import org.apache.hadoop.mapreduce.TaskID;
import org.apache.hadoop.mapreduce.TaskType;
import org.apache.hadoop.mapreduce.task.TaskAttemptContextImpl;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.api.java.function.Function2;
import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.classic.Dataset;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat;
import org.apache.spark.sql.execution.datasources.parquet.ParquetOutputWriter;
import org.apache.spark.util.SerializableConfiguration;

/**
 * The files of many Delta tables' new versions, written by one Spark job: each output is a frame
 * (its rows in the table's schema, already planned into the partitions it should have: one file
 * per partition) and the folder it goes to. The frames' plans run together in the one job (their
 * shuffles are its stages), so a pass over sixty tables launches one job, not sixty.
 *
 * <p>Nothing here touches a table's log: the caller commits each table's files with {@link
 * TableCommit}. A file no commit names (its pass was killed before the commit) is an orphan that
 * {@link TableCommit#orphans} finds and the next pass deletes.
 *
 * <p>Plan the frames with adaptive execution off: an adaptive plan runs its stages as jobs of
 * their own while the RDD is being made.
 */
public final class TableFiles {
  private TableFiles() {}

  /** One file written: its output's index, its path under the table's root, bytes and rows. */
  public static final class Written implements Serializable {
    private static final long serialVersionUID = 1L;
    public final int output;
    public final String path;
    public final long size;
    public final long rows;
    public final long modified;

    Written(int output, String path, long size, long rows, long modified) {
      this.output = output;
      this.path = path;
      this.size = size;
      this.rows = rows;
      this.modified = modified;
    }
  }

  /**
   * Writes output {@code i}'s rows ({@code frames[i]}) as Parquet files under {@code roots[i]} +
   * "/" + {@code folders[i]} ("" for the root itself), named {@code names[i]}-(partition).parquet,
   * in one Spark job; returns every file written (a partition without rows writes none).
   */
  public static List<Written> write(
      SparkSession spark, List<Dataset<Row>> frames, List<String> roots, List<String> folders,
      List<String> names) {
    if (frames.isEmpty()) return new ArrayList<>();
    Configuration base = spark.sessionState().newHadoopConf();
    List<JavaRDD<InternalRow>> rdds = new ArrayList<>();
    List<Map<String, String>> confs = new ArrayList<>();
    List<Integer> outputOf = new ArrayList<>(); // the output of each partition of the union
    for (int i = 0; i < frames.size(); i++) {
      Dataset<Row> frame = frames.get(i);
      confs.add(parquetConf(spark, base, frame));
      JavaRDD<InternalRow> rdd = frame.queryExecution().toRdd().toJavaRDD();
      for (int p = 0; p < rdd.getNumPartitions(); p++) outputOf.add(i);
      rdds.add(rdd);
    }
    JavaSparkContext context = JavaSparkContext.fromSparkContext(spark.sparkContext());
    Broadcast<SerializableConfiguration> shared =
        context.broadcast(new SerializableConfiguration(base));
    @SuppressWarnings("unchecked")
    JavaRDD<InternalRow> all = context.union(rdds.toArray(new JavaRDD[0]));
    Task task = new Task(shared, confs, outputOf, roots, folders, names);
    List<Written> written = new ArrayList<>();
    for (List<Written> files : all.mapPartitionsWithIndex(task, false).collect()) {
      written.addAll(files);
    }
    shared.destroy();
    return written;
  }

  /**
   * What Parquet's writer needs set for {@code frame}'s rows beyond the session's own Hadoop
   * configuration (the schema, above all): prepared as Spark's Parquet source prepares a write,
   * and shipped as these few entries instead of a configuration per table.
   */
  private static Map<String, String> parquetConf(
      SparkSession spark, Configuration base, Dataset<Row> frame) {
    Job job;
    try {
      job = Job.getInstance(new Configuration(base));
    } catch (java.io.IOException e) {
      throw new IllegalStateException("zync tables: cannot prepare a Parquet write: " + e, e);
    }
    new ParquetFileFormat()
        .prepareWrite(spark, job, scala.collection.immutable.Map$.MODULE$.empty(), frame.schema());
    Map<String, String> changed = new HashMap<>();
    for (Map.Entry<String, String> entry : job.getConfiguration()) {
      String before = base.get(entry.getKey());
      if (!entry.getValue().equals(before)) changed.put(entry.getKey(), entry.getValue());
    }
    return changed;
  }

  /** One task: its partition's rows into one file of its output's folder. */
  private static final class Task
      implements Function2<Integer, Iterator<InternalRow>, Iterator<List<Written>>> {
    private static final long serialVersionUID = 1L;
    private final Broadcast<SerializableConfiguration> shared;
    private final ArrayList<Map<String, String>> confs;
    private final ArrayList<Integer> outputOf;
    private final ArrayList<String> roots;
    private final ArrayList<String> folders;
    private final ArrayList<String> names;

    Task(
        Broadcast<SerializableConfiguration> shared, List<Map<String, String>> confs,
        List<Integer> outputOf, List<String> roots, List<String> folders, List<String> names) {
      this.shared = shared;
      this.confs = new ArrayList<>(confs);
      this.outputOf = new ArrayList<>(outputOf);
      this.roots = new ArrayList<>(roots);
      this.folders = new ArrayList<>(folders);
      this.names = new ArrayList<>(names);
    }

    @Override
    public Iterator<List<Written>> call(Integer partition, Iterator<InternalRow> rows)
        throws Exception {
      List<Written> files = new ArrayList<>();
      if (!rows.hasNext()) return List.of(files).iterator();
      int output = outputOf.get(partition);
      Configuration conf = new Configuration(shared.value().value());
      confs.get(output).forEach(conf::set);
      String folder = folders.get(output);
      String file = names.get(output) + "-" + partition + ".snappy.parquet";
      String relative = folder.isEmpty() ? file : folder + "/" + file;
      Path path = new Path(roots.get(output) + "/" + relative);
      var attempt = new TaskAttemptID(new TaskID(new JobID("zync", 0), TaskType.MAP, partition), 0);
      var writer = new ParquetOutputWriter(path.toString(), new TaskAttemptContextImpl(conf, attempt));
      long count = 0;
      try {
        while (rows.hasNext()) {
          writer.write(rows.next());
          count++;
        }
      } finally {
        writer.close();
      }
      FileStatus status = path.getFileSystem(conf).getFileStatus(path);
      files.add(new Written(output, relative, status.getLen(), count, status.getModificationTime()));
      return List.of(files).iterator();
    }
  }
}
