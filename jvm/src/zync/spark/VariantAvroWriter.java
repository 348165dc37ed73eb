package zync.spark;

import java.math.BigDecimal;
import java.math.RoundingMode;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.avro.LogicalType;
import org.apache.avro.LogicalTypes;
import org.apache.avro.Schema;
import org.apache.spark.types.variant.Variant;
import org.apache.spark.types.variant.VariantUtil.Type;

/**
 * Writes a VARIANT value as Avro binary in a given writer schema, straight from the variant bytes
 * (no Spark struct in between). The schema is one zync registered for the value's shape, so it
 * covers every field: a field the schema lacks, or a value the schema's type cannot hold
 * exactly, is an error, never dropped or rounded.
 *
 * <p>Covers the schemas zync writes (tokafka/shapes.py): records whose fields are all ["null",
 * T], arrays of ["null", T], long, double, boolean, string, bytes, decimal (bytes), date and
 * timestamp-micros / local-timestamp-micros.
 */
abstract class VariantAvroWriter {
  final String path;

  VariantAvroWriter(String path) {
    this.path = path;
  }

  /** Writes {@code value}; null means the field is absent. */
  abstract void write(Variant value, AvroOut out);

  static VariantAvroWriter of(Schema schema) {
    return of(schema, "");
  }

  static boolean isNull(Variant value) {
    return value == null || value.getType() == Type.NULL;
  }

  IllegalArgumentException mismatch(Variant value, String expected) {
    String found = isNull(value) ? "no value" : "a " + value.getType() + " value";
    String where = path.isEmpty() ? "the record" : "field " + path;
    return new IllegalArgumentException(
        "zync to-kafka: " + where + " holds " + found + " where its Avro schema has " + expected);
  }

  private static VariantAvroWriter of(Schema schema, String path) {
    LogicalType logical = schema.getLogicalType();
    switch (schema.getType()) {
      case UNION:
        return new Nullable(schema, path);
      case RECORD:
        return new Record(schema, path);
      case ARRAY:
        return new Array(of(schema.getElementType(), path + "[]"), path);
      case BYTES:
        return logical instanceof LogicalTypes.Decimal decimal
            ? new Decimal(decimal.getScale(), path)
            : new Scalar(path, "bytes", Type.BINARY, (v, out) -> out.lengthPrefixed(v.getBinary()));
      case INT:
        if (logical instanceof LogicalTypes.Date) {
          return new Scalar(path, "date", Type.DATE, (v, out) -> out.varLong(v.getLong()));
        }
        break;
      case LONG:
        if (logical instanceof LogicalTypes.TimestampMicros) {
          return new Scalar(path, "timestamp-micros", Type.TIMESTAMP, (v, out) -> out.varLong(v.getLong()));
        }
        if (logical instanceof LogicalTypes.LocalTimestampMicros) {
          return new Scalar(
              path, "local-timestamp-micros", Type.TIMESTAMP_NTZ, (v, out) -> out.varLong(v.getLong()));
        }
        if (logical == null) {
          return new Scalar(path, "long", Type.LONG, (v, out) -> out.varLong(v.getLong()));
        }
        break;
      case DOUBLE:
        return new Double(path);
      case BOOLEAN:
        return new Scalar(path, "boolean", Type.BOOLEAN, (v, out) -> out.bool(v.getBoolean()));
      case STRING:
        return new Scalar(
            path, "string", Type.STRING,
            (v, out) -> out.lengthPrefixed(v.getString().getBytes(StandardCharsets.UTF_8)));
      default:
        break;
    }
    throw new IllegalArgumentException("zync to-kafka: cannot write Avro type " + schema + " at " + path);
  }

  private static final class Nullable extends VariantAvroWriter {
    private final int nullBranch;
    private final int valueBranch;
    private final VariantAvroWriter value;

    Nullable(Schema union, String path) {
      super(path);
      List<Schema> branches = union.getTypes();
      if (branches.size() != 2 || branches.stream().noneMatch(s -> s.getType() == Schema.Type.NULL)) {
        throw new IllegalArgumentException("zync to-kafka: expected [\"null\", T] at " + path + ": " + union);
      }
      nullBranch = branches.get(0).getType() == Schema.Type.NULL ? 0 : 1;
      valueBranch = 1 - nullBranch;
      value = VariantAvroWriter.of(branches.get(valueBranch), path);
    }

    @Override
    void write(Variant v, AvroOut out) {
      if (isNull(v)) {
        out.varLong(nullBranch);
      } else {
        out.varLong(valueBranch);
        value.write(v, out);
      }
    }
  }

  private static final class Record extends VariantAvroWriter {
    private final Map<String, Integer> positions = new HashMap<>();
    private final VariantAvroWriter[] fields;

    Record(Schema schema, String path) {
      super(path);
      List<Schema.Field> schemaFields = schema.getFields();
      fields = new VariantAvroWriter[schemaFields.size()];
      for (int i = 0; i < fields.length; i++) {
        String name = schemaFields.get(i).name();
        positions.put(name, i);
        fields[i] = VariantAvroWriter.of(schemaFields.get(i).schema(), join(path, name));
      }
    }

    @Override
    void write(Variant v, AvroOut out) {
      if (isNull(v) || v.getType() != Type.OBJECT) throw mismatch(v, "a record");
      // One walk over the object's fields (Variant.getFieldByKey would decode keys per probe).
      Variant[] values = new Variant[fields.length];
      for (int i = 0, n = v.objectSize(); i < n; i++) {
        Variant.ObjectField field = v.getFieldAtIndex(i);
        Integer at = positions.get(field.key);
        if (at == null) {
          throw new IllegalArgumentException(
              "zync to-kafka: field " + join(path, field.key) + " is not in the record's Avro schema");
        }
        values[at] = field.value;
      }
      for (int i = 0; i < fields.length; i++) fields[i].write(values[i], out);
    }

    private static String join(String path, String name) {
      return path.isEmpty() ? name : path + "." + name;
    }
  }

  private static final class Array extends VariantAvroWriter {
    private final VariantAvroWriter element;

    Array(VariantAvroWriter element, String path) {
      super(path);
      this.element = element;
    }

    @Override
    void write(Variant v, AvroOut out) {
      if (isNull(v) || v.getType() != Type.ARRAY) throw mismatch(v, "an array");
      int size = v.arraySize();
      if (size > 0) {
        out.varLong(size);
        for (int i = 0; i < size; i++) element.write(v.getElementAtIndex(i), out);
      }
      out.varLong(0);
    }
  }

  private interface Put {
    void put(Variant value, AvroOut out);
  }

  /** A primitive that takes exactly one variant type. */
  private static final class Scalar extends VariantAvroWriter {
    private final String avro;
    private final Type accepts;
    private final Put put;

    Scalar(String path, String avro, Type accepts, Put put) {
      super(path);
      this.avro = avro;
      this.accepts = accepts;
      this.put = put;
    }

    @Override
    void write(Variant v, AvroOut out) {
      if (isNull(v) || v.getType() != accepts) throw mismatch(v, avro);
      put.put(v, out);
    }
  }

  /** double: any number widens to it (zync widens a field's type, never narrows it). */
  private static final class Double extends VariantAvroWriter {
    Double(String path) {
      super(path);
    }

    @Override
    void write(Variant v, AvroOut out) {
      Type type = isNull(v) ? Type.NULL : v.getType();
      switch (type) {
        case DOUBLE -> out.dbl(v.getDouble());
        case FLOAT -> out.dbl(v.getFloat());
        case LONG -> out.dbl(v.getLong());
        case DECIMAL -> out.dbl(v.getDecimal().doubleValue());
        default -> throw mismatch(v, "double");
      }
    }
  }

  /** decimal(38, scale): integers and decimals of up to that scale, exactly. */
  private static final class Decimal extends VariantAvroWriter {
    private final int scale;

    Decimal(int scale, String path) {
      super(path);
      this.scale = scale;
    }

    @Override
    void write(Variant v, AvroOut out) {
      Type type = isNull(v) ? Type.NULL : v.getType();
      BigDecimal number = switch (type) {
        case LONG -> BigDecimal.valueOf(v.getLong());
        case DECIMAL -> v.getDecimalWithOriginalScale();
        default -> throw mismatch(v, "decimal(38," + scale + ")");
      };
      BigDecimal scaled;
      try {
        scaled = number.setScale(scale, RoundingMode.UNNECESSARY);
      } catch (ArithmeticException e) {
        throw mismatch(v, "decimal(38," + scale + "), which cannot hold " + number + " exactly");
      }
      out.lengthPrefixed(scaled.unscaledValue().toByteArray());
    }
  }
}
