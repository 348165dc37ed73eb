package zync.spark;

import java.math.BigDecimal;
import java.math.RoundingMode;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.avro.LogicalType;
import org.apache.avro.LogicalTypes;
import org.apache.avro.Schema;
import org.apache.spark.types.variant.VariantUtil;
import org.apache.spark.types.variant.VariantUtil.Type;

/**
 * Writes a VARIANT value as Avro binary in a given writer schema, straight from the variant bytes
 * (no Spark struct in between, and no Variant object or String per field: a value is its
 * variant bytes and a position in them, read with VariantUtil's static getters). The schema is one zync registered for the value's shape, so it
 * covers every field: a field the schema lacks, or a value the schema's type cannot hold
 * exactly, is an error, never dropped or rounded.
 *
 * <p>Covers the schemas zync writes (tokafka/shapes.py): records whose fields are all ["null",
 * T], arrays of ["null", T], long, double, boolean, string, bytes, decimal (bytes), date and
 * timestamp-micros / local-timestamp-micros; and the types a source declares (Debezium's semantic
 * types, int, float, enums: DeclaredAvroWriters), TIMESTAMP as ZonedTimestamp among them.
 */
abstract class VariantAvroWriter {
  static final int ABSENT = -1; // the position of a field the object does not have

  final String path;

  VariantAvroWriter(String path) {
    this.path = path;
  }

  /**
   * Writes the value at {@code pos} of {@code value} (ABSENT: the field is absent); {@code
   * metadata} is the variant's key dictionary.
   */
  abstract void write(byte[] value, int pos, byte[] metadata, AvroOut out);

  static VariantAvroWriter of(Schema schema) {
    return of(schema, "");
  }

  /**
   * Whether this writer writes a variant null as a value of its own (a JSON column's document
   * {@code null}); then only an absent field is a nullable field's SQL NULL.
   */
  boolean writesVariantNull() {
    return false;
  }

  static boolean isNull(byte[] value, int pos) {
    return pos == ABSENT || VariantUtil.getType(value, pos) == Type.NULL;
  }

  IllegalArgumentException mismatch(byte[] value, int pos, String expected) {
    String found = isNull(value, pos) ? "no value" : "a " + VariantUtil.getType(value, pos) + " value";
    String where = path.isEmpty() ? "the record" : "field " + path;
    return new IllegalArgumentException(
        "zync to-kafka: " + where + " holds " + found + " where its Avro schema has " + expected);
  }

  private static VariantAvroWriter of(Schema schema, String path) {
    VariantAvroWriter declared = DeclaredAvroWriters.of(schema, path); // a source's own types
    if (declared != null) return declared;
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
            : new Scalar(path, "bytes", Type.BINARY, (v, p, out) -> out.lengthPrefixed(VariantUtil.getBinary(v, p)));
      case LONG:
        if (logical instanceof LogicalTypes.TimestampMicros) {
          return new Scalar(
              path, "timestamp-micros", Type.TIMESTAMP, (v, p, out) -> out.varLong(VariantUtil.getLong(v, p)));
        }
        if (logical instanceof LogicalTypes.LocalTimestampMicros) {
          return new Scalar(
              path, "local-timestamp-micros", Type.TIMESTAMP_NTZ,
              (v, p, out) -> out.varLong(VariantUtil.getLong(v, p)));
        }
        if (logical == null) {
          return new Scalar(path, "long", Type.LONG, (v, p, out) -> out.varLong(VariantUtil.getLong(v, p)));
        }
        break;
      case DOUBLE:
        return new Double(path);
      case BOOLEAN:
        return new Scalar(path, "boolean", Type.BOOLEAN, (v, p, out) -> out.bool(VariantUtil.getBoolean(v, p)));
      case STRING:
        return new Scalar(path, "string", Type.STRING, VariantAvroWriter::utf8);
      default:
        break;
    }
    throw new IllegalArgumentException("zync to-kafka: cannot write Avro type " + schema + " at " + path);
  }

  /** A variant string as Avro's: its UTF-8 bytes, copied as they are (no String between). */
  private static void utf8(byte[] value, int pos, AvroOut out) {
    int header = value[pos] & 0xFF;
    if ((header & 0x3) == 1) { // a short string: the length is in the header
      out.lengthPrefixed(value, pos + 1, header >>> 2);
    } else { // a long string: a 4-byte little-endian length follows the header
      int length = VariantUtil.readUnsigned(value, pos + 1, 4);
      out.lengthPrefixed(value, pos + 5, length);
    }
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
    void write(byte[] v, int pos, byte[] metadata, AvroOut out) {
      if (pos == ABSENT || (isNull(v, pos) && !value.writesVariantNull())) {
        out.varLong(nullBranch);
      } else {
        out.varLong(valueBranch);
        value.write(v, pos, metadata, out);
      }
    }
  }

  private static final class Record extends VariantAvroWriter {
    private static final int UNKNOWN = -2; // a dictionary id not looked up yet
    private static final int NOT_IN_SCHEMA = -1;
    private final Map<String, Integer> positions = new HashMap<>();
    private final VariantAvroWriter[] fields;
    // Per metadata dictionary, each key's schema position: rows of one shape share their
    // dictionary's bytes, so a key is decoded once per task, not once per row.
    private final MetadataCache<int[]> positionsById = new MetadataCache<>();

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
    void write(byte[] v, int pos, byte[] metadata, AvroOut out) {
      if (isNull(v, pos) || VariantUtil.getType(v, pos) != Type.OBJECT) throw mismatch(v, pos, "a record");
      int[] values = new int[fields.length];
      Arrays.fill(values, ABSENT);
      // One walk over the object's fields, their keys known by dictionary id.
      VariantUtil.handleObject(v, pos, (size, idSize, offsetSize, idStart, offsetStart, dataStart) -> {
        int[] byId = positionsById.get(metadata);
        for (int i = 0; i < size; i++) {
          int id = VariantUtil.readUnsigned(v, idStart + idSize * i, idSize);
          if (byId == null || id >= byId.length || byId[id] == UNKNOWN) byId = resolve(metadata, byId, id);
          if (byId[id] == NOT_IN_SCHEMA) {
            throw new IllegalArgumentException("zync to-kafka: field "
                + join(path, VariantUtil.getMetadataKey(metadata, id)) + " is not in the record's Avro schema");
          }
          values[byId[id]] = dataStart + VariantUtil.readUnsigned(v, offsetStart + offsetSize * i, offsetSize);
        }
        return null;
      });
      for (int i = 0; i < fields.length; i++) fields[i].write(v, values[i], metadata, out);
    }

    /** {@code byId} (null: none yet) with dictionary id {@code id}'s position looked up and kept. */
    private int[] resolve(byte[] metadata, int[] byId, int id) {
      int known = byId == null ? 0 : byId.length;
      int[] grown = byId;
      if (id >= known) {
        grown = byId == null ? new int[id + 1] : Arrays.copyOf(byId, Math.max(id + 1, known * 2));
        Arrays.fill(grown, known, grown.length, UNKNOWN);
      }
      Integer at = positions.get(VariantUtil.getMetadataKey(metadata, id));
      grown[id] = at == null ? NOT_IN_SCHEMA : at;
      positionsById.put(metadata, grown);
      return grown;
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
    void write(byte[] v, int pos, byte[] metadata, AvroOut out) {
      if (isNull(v, pos) || VariantUtil.getType(v, pos) != Type.ARRAY) throw mismatch(v, pos, "an array");
      VariantUtil.handleArray(v, pos, (size, offsetSize, offsetStart, dataStart) -> {
        if (size > 0) {
          out.varLong(size);
          for (int i = 0; i < size; i++) {
            int at = dataStart + VariantUtil.readUnsigned(v, offsetStart + offsetSize * i, offsetSize);
            element.write(v, at, metadata, out);
          }
        }
        return null;
      });
      out.varLong(0);
    }
  }

  private interface Put {
    void put(byte[] value, int pos, AvroOut out);
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
    void write(byte[] v, int pos, byte[] metadata, AvroOut out) {
      if (isNull(v, pos) || VariantUtil.getType(v, pos) != accepts) throw mismatch(v, pos, avro);
      put.put(v, pos, out);
    }
  }

  /** double: any number widens to it (zync widens a field's type, never narrows it). */
  private static final class Double extends VariantAvroWriter {
    Double(String path) {
      super(path);
    }

    @Override
    void write(byte[] v, int pos, byte[] metadata, AvroOut out) {
      Type type = isNull(v, pos) ? Type.NULL : VariantUtil.getType(v, pos);
      switch (type) {
        case DOUBLE -> out.dbl(VariantUtil.getDouble(v, pos));
        case FLOAT -> out.dbl(VariantUtil.getFloat(v, pos));
        case LONG -> out.dbl(VariantUtil.getLong(v, pos));
        case DECIMAL -> out.dbl(VariantUtil.getDecimal(v, pos).doubleValue());
        default -> throw mismatch(v, pos, "double");
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
    void write(byte[] v, int pos, byte[] metadata, AvroOut out) {
      Type type = isNull(v, pos) ? Type.NULL : VariantUtil.getType(v, pos);
      BigDecimal number = switch (type) {
        case LONG -> BigDecimal.valueOf(VariantUtil.getLong(v, pos));
        case DECIMAL -> VariantUtil.getDecimalWithOriginalScale(v, pos);
        default -> throw mismatch(v, pos, "decimal(38," + scale + ")");
      };
      BigDecimal scaled;
      try {
        scaled = number.setScale(scale, RoundingMode.UNNECESSARY);
      } catch (ArithmeticException e) {
        throw mismatch(v, pos, "decimal(38," + scale + "), which cannot hold " + number + " exactly");
      }
      out.lengthPrefixed(scaled.unscaledValue().toByteArray());
    }
  }
}
