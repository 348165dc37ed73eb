package zync.spark;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;
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
import org.apache.spark.TaskContext;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.BoundReference;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.If;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.Literal$;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.variant.IsVariantNull;
import org.apache.spark.sql.catalyst.expressions.variant.VariantGet;
import org.apache.spark.sql.classic.Dataset;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat;
import org.apache.spark.sql.execution.datasources.parquet.ParquetOutputWriter;
import org.apache.spark.sql.internal.ReadOnlySQLConf;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.internal.SQLConf$;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.types.VariantType;
import org.apache.spark.sql.types.VariantType$;
import org.apache.spark.util.SerializableConfiguration;
import scala.Option;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The files of many Delta tables' new versions, written by one Spark job from one frame whose
 * rows are VARIANT objects tagged with their output (zync_assets/tables/rewrite_plan.py): a
 * pass over sixty tables is one job of two stages, whose tasks each carry one plan, not sixty.
 *
 * <p>Nothing here touches a table's log: the caller commits each table's files with {@link
 * TableCommit}. A file no commit names (its pass was killed before the commit) is an orphan that
 * {@link TableCommit#orphans} finds and the next pass deletes.
 *
 * <p>Plan the frame with adaptive execution off: an adaptive plan runs its stages as jobs of
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

  /** The columns of {@link #writeRows}' frame. */
  private static final int OUTPUT = 0, CHANGE = 1, SEQUENCE = 2, ROW = 3;

  /**
   * Writes the rows of many outputs from one frame, in one Spark job whose tasks each carry
   * every output's few settings once (not a plan per output). The frame's columns are
   * (output int, change string, sequence, row variant), its partitions hold each output's rows
   * together (partitioned and sorted by output). Output {@code i} is a table of schema {@code
   * schemas[i]} (Spark's JSON) under {@code roots[i]}, in files named {@code names[i]}-(partition):
   * its column {@code __SEQUENCE} is the frame's sequence, every other column the row's field of
   * that name read as the column's type (absent: NULL; a VARIANT null: NULL too, but in the
   * VARIANT columns named in {@code nulls[i]}, comma-separated, where it is a value). With a {@code changes[i]} folder, a row
   * whose change is set is a change-feed row: written there with the change as its {@code
   * _change_type}.
   */
  public static List<Written> writeRows(
      SparkSession spark, Dataset<Row> frame, List<String> roots, List<String> changes,
      List<String> names, List<String> schemas, List<String> nulls) {
    if (roots.isEmpty()) return new ArrayList<>();
    Configuration base = spark.sessionState().newHadoopConf();
    JavaSparkContext context = JavaSparkContext.fromSparkContext(spark.sparkContext());
    Broadcast<SerializableConfiguration> shared =
        context.broadcast(new SerializableConfiguration(base));
    String zone = spark.sessionState().conf().sessionLocalTimeZone();
    DataType sequence = frame.schema().fields()[SEQUENCE].dataType();
    List<Target> targets = new ArrayList<>();
    for (int i = 0; i < roots.size(); i++) {
      StructType schema = (StructType) DataType.fromJson(schemas.get(i));
      Set<String> values = new HashSet<>(Arrays.asList(nulls.get(i).split(",")));
      Expression[] data = decoders(schema, sequence, zone, values);
      boolean split = !changes.get(i).isEmpty();
      StructType changeSchema = schema.add("_change_type", DataTypes.StringType);
      Expression[] change = Arrays.copyOf(data, data.length + 1);
      change[data.length] = new BoundReference(CHANGE, DataTypes.StringType, true);
      targets.add(new Target(roots.get(i), changes.get(i), names.get(i), data,
          split ? change : null, parquetConf(spark, base, schema),
          split ? parquetConf(spark, base, changeSchema) : Map.of()));
    }
    complete(targets, base);
    Rows task = new Rows(shared, targets);
    List<Written> found = new ArrayList<>();
    JavaRDD<List<Written>> written =
        frame.queryExecution().toRdd().toJavaRDD().mapPartitionsWithIndex(task, false);
    for (List<Written> files : written.collect()) found.addAll(files);
    shared.destroy();
    return found;
  }

  /**
   * Gives every target's settings the same keys (a key another target sets: its base value, or
   * {@link #UNSET}), so that a task can copy the Hadoop configuration once and set each file's
   * settings over it (a copy per file cost a pass over 60 tables half a second).
   */
  private static void complete(List<Target> targets, Configuration base) {
    Set<String> keys = new HashSet<>();
    for (Target t : targets) {
      keys.addAll(t.conf.keySet());
      keys.addAll(t.changeConf.keySet());
    }
    for (Target t : targets) {
      for (String key : keys) {
        String value = base.get(key);
        t.conf.putIfAbsent(key, value == null ? UNSET : value);
        t.changeConf.putIfAbsent(key, value == null ? UNSET : value);
      }
    }
  }

  private static final String UNSET = "\0unset";

  /** Each column of {@code schema} read from a frame row of {@link #writeRows}. */
  private static Expression[] decoders(
      StructType schema, DataType sequence, String zone, Set<String> nullValues) {
    Expression row = new BoundReference(ROW, VariantType$.MODULE$, true);
    Expression[] found = new Expression[schema.size()];
    for (int c = 0; c < found.length; c++) {
      StructField field = schema.fields()[c];
      if (field.name().equals("__SEQUENCE")) {
        found[c] = new BoundReference(SEQUENCE, sequence, true);
      } else {
        Expression path = Literal$.MODULE$.apply("$." + field.name());
        Expression value = new VariantGet(row, path, field.dataType(), true, Option.apply(zone));
        if (field.dataType() instanceof VariantType && !nullValues.contains(field.name())) {
          // is_variant_null is RuntimeReplaceable: neither generated code nor interpreted
          // evaluation takes it (outside the analyzer), only its replacement. As itself it made
          // the projection of a table with a non-JSON VARIANT column (a text[]) fall back to
          // interpreted mode and then fail every shared write holding that table.
          Expression isNull = new IsVariantNull(value).replacement();
          value = new If(isNull, new Literal(null, field.dataType()), value);
        }
        found[c] = value;
      }
    }
    return found;
  }

  /** An output of {@link #writeRows}: where its files go, and how a row becomes its columns. */
  private static final class Target implements Serializable {
    private static final long serialVersionUID = 1L;
    final String root;
    final String changes;
    final String name;
    final Expression[] data;
    final Expression[] change; // null: no change feed
    final HashMap<String, String> conf;
    final HashMap<String, String> changeConf;

    Target(String root, String changes, String name, Expression[] data, Expression[] change,
        Map<String, String> conf, Map<String, String> changeConf) {
      this.root = root;
      this.changes = changes;
      this.name = name;
      this.data = data;
      this.change = change;
      this.conf = new HashMap<>(conf);
      this.changeConf = new HashMap<>(changeConf);
    }
  }

  /** A task of {@link #writeRows}: its partition's outputs, each into its files. */
  private static final class Rows
      implements Function2<Integer, Iterator<InternalRow>, Iterator<List<Written>>> {
    private static final long serialVersionUID = 1L;
    private final Broadcast<SerializableConfiguration> shared;
    private final List<Target> targets;

    Rows(Broadcast<SerializableConfiguration> shared, List<Target> targets) {
      this.shared = shared;
      this.targets = new ArrayList<>(targets);
    }

    @Override
    public Iterator<List<Written>> call(Integer partition, Iterator<InternalRow> rows) {
      // Spark makes a SQLConf for every SQLConf.get in a task that has none set, and reading a
      // VARIANT's value asks for one per value (a Literal's check): one for the whole task.
      SQLConf conf = new ReadOnlySQLConf(TaskContext.get());
      return SQLConf$.MODULE$.withExistingConf(conf, () -> {
        try {
          return write(partition, rows);
        } catch (java.io.IOException e) {
          throw new java.io.UncheckedIOException(e);
        }
      });
    }

    /**
     * The partition's rows into their outputs' files, one output after another (the rows come
     * sorted by output: a file is closed before the next opens, so a task holds two open at
     * most; all of a task's outputs open at once ran a 240-table pass out of a 1 GiB heap).
     */
    private Iterator<List<Written>> write(int partition, Iterator<InternalRow> rows)
        throws java.io.IOException {
      List<Written> files = new ArrayList<>();
      Configuration dataConf = new Configuration(shared.value().value());
      Configuration changeConf = new Configuration(dataConf);
      int current = -1;
      OutputFile data = null, change = null;
      UnsafeProjection toData = null, toChange = null;
      while (rows.hasNext()) {
        InternalRow row = rows.next();
        int output = row.getInt(OUTPUT);
        if (output != current) {
          if (data != null) data.close(files);
          if (change != null) change.close(files);
          Target target = targets.get(output);
          String file = target.name + "-" + partition + ".snappy.parquet";
          data = new OutputFile(dataConf, output, false, target.root, file, target.conf, partition);
          toData = projection(target.data);
          change = target.change == null ? null : new OutputFile(changeConf, output, true,
              target.root, target.changes + "/" + file, target.changeConf, partition);
          toChange = target.change == null ? null : projection(target.change);
          current = output;
        }
        if (change != null && !row.isNullAt(CHANGE)) {
          change.write(toChange.apply(row));
        } else {
          data.write(toData.apply(row));
        }
      }
      if (data != null) data.close(files);
      if (change != null) change.close(files);
      return List.of(files).iterator();
    }

    private static UnsafeProjection projection(Expression[] columns) {
      return UnsafeProjection.create(
          CollectionConverters.asScala(Arrays.asList(columns)).toList());
    }
  }

  /** A Parquet file of a task's, opened at its first row (over the task's configuration). */
  private static final class OutputFile {
    private final Configuration opened;
    private final int output;
    private final boolean change;
    private final String root;
    private final String relative;
    private final Map<String, String> settings;
    private final int partition;
    private ParquetOutputWriter writer;
    private long count;

    OutputFile(Configuration opened, int output, boolean change,
        String root, String relative, Map<String, String> settings, int partition) {
      this.opened = opened;
      this.output = output;
      this.change = change;
      this.root = root;
      this.relative = relative;
      this.settings = settings;
      this.partition = partition;
    }

    private Path path() {
      return new Path(root + "/" + relative);
    }

    void write(InternalRow row) {
      if (writer == null) {
        settings.forEach((key, value) -> {
          if (value.equals(UNSET)) {
            opened.unset(key);
          } else {
            opened.set(key, value);
          }
        });
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
}
