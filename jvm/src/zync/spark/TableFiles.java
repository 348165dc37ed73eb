package zync.spark;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
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
import org.apache.spark.HashPartitioner;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.api.java.function.Function2;
import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.classic.Dataset;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat;
import org.apache.spark.sql.execution.datasources.parquet.ParquetOutputWriter;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.util.SerializableConfiguration;
import scala.Tuple2;

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

  /**
   * One file written: its output's index, whether it holds change-feed rows, its path under
   * the table's root, bytes and rows.
   */
  public static final class Written implements Serializable {
    private static final long serialVersionUID = 1L;
    public final int output;
    public final boolean change;
    public final String path;
    public final long size;
    public final long rows;
    public final long modified;

    Written(int output, boolean change, String path, long size, long rows, long modified) {
      this.output = output;
      this.change = change;
      this.path = path;
      this.size = size;
      this.rows = rows;
      this.modified = modified;
    }
  }

  /**
   * Writes output {@code i}'s rows ({@code frames[i]}) as Parquet files under {@code roots[i]},
   * named {@code names[i]}-(partition).parquet, in one Spark job; returns every file written (a
   * partition without rows writes none). With a {@code changes[i]} folder ("": none), a row whose
   * last column (Delta's {@code _change_type}) is set goes to a file of that folder, and the
   * others, less that column, to the root: a table's new version and its change feed, from one
   * computation of its rows.
   */
  public static List<Written> write(
      SparkSession spark, List<Dataset<Row>> frames, List<String> roots, List<String> changes,
      List<String> names) {
    if (frames.isEmpty()) return new ArrayList<>();
    Configuration base = spark.sessionState().newHadoopConf();
    JavaSparkContext context = JavaSparkContext.fromSparkContext(spark.sparkContext());
    Broadcast<SerializableConfiguration> shared =
        context.broadcast(new SerializableConfiguration(base));
    List<JavaRDD<List<Written>>> outputs = new ArrayList<>();
    for (int i = 0; i < frames.size(); i++) {
      Dataset<Row> frame = frames.get(i);
      StructType schema = frame.schema();
      boolean split = !changes.get(i).isEmpty();
      StructType data =
          split ? new StructType(Arrays.copyOf(schema.fields(), schema.size() - 1)) : schema;
      DataType[] columns = new DataType[data.size()];
      for (int c = 0; c < columns.length; c++) columns[c] = data.fields()[c].dataType();
      Task task = new Task(i, shared, parquetConf(spark, base, data),
          split ? parquetConf(spark, base, schema) : Map.of(), columns, roots.get(i),
          changes.get(i), names.get(i));
      // Each output writes in a shuffle stage of its own, whose tasks carry its own plan
      // only: written in the job's final stage, every task would carry every table's plan
      // (a pass over 60 tables spent minutes deserializing them).
      JavaRDD<List<Written>> written =
          frame.queryExecution().toRdd().toJavaRDD().mapPartitionsWithIndex(task, false)
              .mapToPair(files -> new Tuple2<>(0, files))
              .partitionBy(new HashPartitioner(1))
              .values();
      outputs.add(written);
    }
    @SuppressWarnings("unchecked")
    JavaRDD<List<Written>> all = context.union(outputs.toArray(new JavaRDD[0]));
    List<Written> found = new ArrayList<>();
    for (List<Written> files : all.coalesce(1).collect()) found.addAll(files);
    shared.destroy();
    return found;
  }

  /**
   * What Parquet's writer needs set for {@code frame}'s rows beyond the session's own Hadoop
   * configuration (the schema, above all): prepared as Spark's Parquet source prepares a write,
   * and shipped as these few entries instead of a configuration per table.
   */
  private static Map<String, String> parquetConf(
      SparkSession spark, Configuration base, StructType schema) {
    Job job;
    try {
      job = Job.getInstance(new Configuration(base));
    } catch (java.io.IOException e) {
      throw new IllegalStateException("zync tables: cannot prepare a Parquet write: " + e, e);
    }
    new ParquetFileFormat()
        .prepareWrite(spark, job, scala.collection.immutable.Map$.MODULE$.empty(), schema);
    Map<String, String> changed = new HashMap<>();
    for (Map.Entry<String, String> entry : job.getConfiguration()) {
      String before = base.get(entry.getKey());
      if (!entry.getValue().equals(before)) changed.put(entry.getKey(), entry.getValue());
    }
    return changed;
  }

  /** One task: its partition's rows into a file of its output (and one of its change feed). */
  private static final class Task
      implements Function2<Integer, Iterator<InternalRow>, Iterator<List<Written>>> {
    private static final long serialVersionUID = 1L;
    private final int output;
    private final Broadcast<SerializableConfiguration> shared;
    private final HashMap<String, String> conf;
    private final HashMap<String, String> changeConf;
    private final DataType[] columns;
    private final String root;
    private final String changes;
    private final String name;

    Task(
        int output, Broadcast<SerializableConfiguration> shared, Map<String, String> conf,
        Map<String, String> changeConf, DataType[] columns, String root, String changes,
        String name) {
      this.output = output;
      this.shared = shared;
      this.conf = new HashMap<>(conf);
      this.changeConf = new HashMap<>(changeConf);
      this.columns = columns;
      this.root = root;
      this.changes = changes;
      this.name = name;
    }

    @Override
    public Iterator<List<Written>> call(Integer partition, Iterator<InternalRow> rows)
        throws Exception {
      String file = name + "-" + partition + ".snappy.parquet";
      File data = new File(false, "", file, conf, partition);
      File change = changes.isEmpty() ? null : new File(true, changes, file, changeConf, partition);
      while (rows.hasNext()) {
        InternalRow row = rows.next();
        if (change != null && !row.isNullAt(columns.length)) {
          change.write(row);
        } else if (change != null) {
          Object[] values = new Object[columns.length]; // the row less its _change_type
          for (int c = 0; c < columns.length; c++) {
            values[c] = row.isNullAt(c) ? null : row.get(c, columns[c]);
          }
          data.write(new GenericInternalRow(values));
        } else {
          data.write(row);
        }
      }
      List<Written> files = new ArrayList<>();
      data.close(files);
      if (change != null) change.close(files);
      return List.of(files).iterator();
    }

    /** A file of the task's, opened at its first row. */
    private final class File {
      private final boolean change;
      private final String relative;
      private final Map<String, String> settings;
      private final int partition;
      private Configuration opened;
      private ParquetOutputWriter writer;
      private long count;

      File(boolean change, String folder, String name, Map<String, String> settings,
          int partition) {
        this.change = change;
        this.relative = folder.isEmpty() ? name : folder + "/" + name;
        this.settings = settings;
        this.partition = partition;
      }

      private Path path() {
        return new Path(root + "/" + relative);
      }

      void write(InternalRow row) {
        if (writer == null) {
          opened = new Configuration(shared.value().value());
          settings.forEach(opened::set);
          var attempt =
              new TaskAttemptID(new TaskID(new JobID("zync", 0), TaskType.MAP, partition), 0);
          writer = new ParquetOutputWriter(
              path().toString(), new TaskAttemptContextImpl(opened, attempt));
        }
        writer.write(row);
        count++;
      }

      void close(List<Written> files) throws java.io.IOException {
        if (writer == null) return;
        writer.close();
        FileStatus status = path().getFileSystem(opened).getFileStatus(path());
        files.add(new Written(output, change, relative, status.getLen(), count,
            status.getModificationTime()));
      }
    }
  }
}
