package zync.spark;

import java.io.IOException;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.avro.LogicalTypes;
import org.apache.avro.Schema;
import org.apache.avro.io.BinaryDecoder;
import org.apache.avro.util.Utf8;
import org.apache.spark.types.variant.VariantBuilder;
import org.apache.spark.types.variant.VariantBuilder.FieldEntry;

/**
 * Reads one Avro datum (binary encoding, writer schema) straight into a {@link VariantBuilder}.
 *
 * <p>It yields the variant Spark's {@code to_variant_object(from_avro(bytes, schema))} yields
 * (equal in meaning; a map's fields may be laid out in another order), without the Spark struct
 * in between:
 *
 * <ul>
 *   <li>records and maps become objects;
 *   <li>int and long become integers, float stays float, enum and string become strings,
 *       bytes and fixed become binary;
 *   <li>decimal (bytes or fixed) becomes a decimal with the schema's scale; a value with more
 *       digits than the schema's precision does not decode (Spark refuses it too);
 *   <li>date, timestamp-millis/micros and local-timestamp-millis/micros keep their types; other
 *       logical types are read as their base type, as Spark reads time-millis;
 *   <li>a union of null and one type is that type or null; a union of int and long, or of float
 *       and double, widens to long or double; any other union is an object with fields
 *       member0..memberN (the non-null branches in order), all null but the one present.
 * </ul>
 *
 * <p>Kafka Connect's and Debezium's semantic types ({@code connect.name}) become the values
 * they stand for: see {@link ConnectTypeReaders}.
 *
 * <p>It also decodes what Spark cannot: recursive records (nested objects), null-typed fields
 * (variant nulls), time-micros (Spark's TIME type does not convert to a variant; here it is its
 * long), and decimals declared wider than 38 digits whose values fit a variant decimal
 * (Confluent's Avro converter declares 64 for a Connect decimal without a precision).
 */
interface AvroVariantReader {
  void read(BinaryDecoder in, VariantBuilder out) throws IOException;

  static AvroVariantReader of(Schema schema) {
    return AvroVariantReaders.of(schema, new HashMap<>());
  }
}

/** The reader for each Avro type. */
final class AvroVariantReaders {
  private AvroVariantReaders() {}

  static AvroVariantReader of(Schema schema, Map<String, Record> records) {
    AvroVariantReader semantic = ConnectTypeReaders.of(schema); // Debezium's types first
    if (semantic != null) return semantic;
    var logical = schema.getLogicalType();
    switch (schema.getType()) {
      case NULL:
        return (in, out) -> out.appendNull();
      case BOOLEAN:
        return (in, out) -> out.appendBoolean(in.readBoolean());
      case INT:
        if (logical instanceof LogicalTypes.Date) return (in, out) -> out.appendDate(in.readInt());
        return (in, out) -> out.appendLong(in.readInt()); // time-millis too, as in Spark
      case LONG:
        if (logical instanceof LogicalTypes.TimestampMillis) {
          return (in, out) -> out.appendTimestamp(Math.multiplyExact(in.readLong(), 1000L));
        }
        if (logical instanceof LogicalTypes.TimestampMicros) {
          return (in, out) -> out.appendTimestamp(in.readLong());
        }
        if (logical instanceof LogicalTypes.LocalTimestampMillis) {
          return (in, out) -> out.appendTimestampNtz(Math.multiplyExact(in.readLong(), 1000L));
        }
        if (logical instanceof LogicalTypes.LocalTimestampMicros) {
          return (in, out) -> out.appendTimestampNtz(in.readLong());
        }
        return (in, out) -> out.appendLong(in.readLong()); // time-micros, timestamp-nanos too
      case FLOAT:
        return (in, out) -> out.appendFloat(in.readFloat());
      case DOUBLE:
        return (in, out) -> out.appendDouble(in.readDouble());
      case STRING:
        return new Text();
      case BYTES:
        if (logical instanceof LogicalTypes.Decimal decimal) {
          return (in, out) -> out.appendDecimal(decimal(in.readBytes(null).array(), decimal));
        }
        return (in, out) -> out.appendBinary(in.readBytes(null).array()); // big-decimal too
      case FIXED:
        int size = schema.getFixedSize();
        if (logical instanceof LogicalTypes.Decimal decimal) {
          return (in, out) -> out.appendDecimal(decimal(fixed(in, size), decimal));
        }
        return (in, out) -> out.appendBinary(fixed(in, size)); // duration too
      case ENUM:
        List<String> symbols = schema.getEnumSymbols();
        return (in, out) -> out.appendString(symbols.get(index(in.readEnum(), symbols.size(), "enum symbol")));
      case ARRAY:
        return new Array(of(schema.getElementType(), records));
      case MAP:
        return new MapObject(of(schema.getValueType(), records));
      case RECORD:
        Record seen = records.get(schema.getFullName());
        if (seen != null) return seen; // a record that contains itself: the same reader
        Record record = new Record();
        records.put(schema.getFullName(), record);
        record.define(schema, records);
        return record;
      case UNION:
        return union(schema, records);
      default:
        break;
    }
    throw new IllegalArgumentException("zync ingest: no JVM decoder for Avro type " + schema);
  }

  private static int index(int index, int count, String what) {
    if (index < 0 || index >= count) {
      throw new IllegalArgumentException(what + " " + index + " does not exist (there are " + count + ")");
    }
    return index;
  }

  private static byte[] fixed(BinaryDecoder in, int size) throws IOException {
    byte[] bytes = new byte[size];
    in.readFixed(bytes);
    return bytes;
  }

  private static final int VARIANT_DECIMAL_DIGITS = 38; // precision and scale of a DECIMAL16

  /** Spark's decimal: the schema's scale, no more digits than its precision, and a variant's. */
  private static BigDecimal decimal(byte[] twosComplement, LogicalTypes.Decimal type) {
    BigDecimal value = new BigDecimal(new BigInteger(twosComplement), type.getScale());
    int digits = Math.min(type.getPrecision(), VARIANT_DECIMAL_DIGITS);
    if (value.precision() > digits || value.scale() > VARIANT_DECIMAL_DIGITS) {
      throw new ArithmeticException("decimal " + value + " has more digits than " + digits);
    }
    return value;
  }

  private static AvroVariantReader union(Schema union, Map<String, Record> records) {
    List<Schema> branches = union.getTypes();
    List<Schema> present = new ArrayList<>(); // the non-null branches, as Spark numbers them
    AvroVariantReader[] readers = new AvroVariantReader[branches.size()];
    int[] member = new int[branches.size()];
    for (int i = 0; i < branches.size(); i++) {
      Schema branch = branches.get(i);
      member[i] = branch.getType() == Schema.Type.NULL ? -1 : present.size();
      if (member[i] >= 0) present.add(branch);
    }
    Set<Schema.Type> types = new HashSet<>();
    for (Schema branch : present) types.add(branch.getType());
    boolean widensToLong = present.size() == 2 && types.equals(Set.of(Schema.Type.INT, Schema.Type.LONG));
    boolean widensToDouble =
        present.size() == 2 && types.equals(Set.of(Schema.Type.FLOAT, Schema.Type.DOUBLE));
    for (int i = 0; i < branches.size(); i++) {
      Schema branch = branches.get(i);
      if (member[i] < 0) {
        readers[i] = (in, out) -> out.appendNull();
      } else if (widensToLong) { // logical types are ignored here, as Spark ignores them
        readers[i] = branch.getType() == Schema.Type.INT
            ? (in, out) -> out.appendLong(in.readInt())
            : (in, out) -> out.appendLong(in.readLong());
      } else if (widensToDouble) {
        readers[i] = branch.getType() == Schema.Type.FLOAT
            ? (in, out) -> out.appendDouble(in.readFloat())
            : (in, out) -> out.appendDouble(in.readDouble());
      } else {
        readers[i] = of(branch, records);
      }
    }
    if (present.size() <= 1 || widensToLong || widensToDouble) {
      return (in, out) -> readers[index(in.readIndex(), readers.length, "union branch")].read(in, out);
    }
    return new Members(readers, member, present.size());
  }

  private static final class Text implements AvroVariantReader {
    private Utf8 scratch;

    @Override
    public void read(BinaryDecoder in, VariantBuilder out) throws IOException {
      scratch = in.readString(scratch);
      out.appendString(new String(scratch.getBytes(), 0, scratch.getByteLength(), StandardCharsets.UTF_8));
    }
  }

  /**
   * A record as an object of its fields. A JSON column's SQL NULL is the one value that leaves its
   * field out: the JSON document {@code null} is a variant null, so the two stay apart ({@code
   * variant_get(after, '$.doc')} is SQL NULL for the one, a variant null for the other).
   */
  static final class Record implements AvroVariantReader {
    private String[] names;
    private AvroVariantReader[] fields;
    private int[] jsonNullBranch; // a nullable JSON column's null branch; -1 for other fields
    private AvroVariantReader[] jsonDocument; // that column's reader of its document

    void define(Schema schema, Map<String, Record> records) {
      List<Schema.Field> schemaFields = schema.getFields();
      names = new String[schemaFields.size()];
      fields = new AvroVariantReader[schemaFields.size()];
      jsonNullBranch = new int[fields.length];
      jsonDocument = new AvroVariantReader[fields.length];
      for (int i = 0; i < fields.length; i++) {
        Schema field = schemaFields.get(i).schema();
        names[i] = schemaFields.get(i).name();
        fields[i] = of(field, records);
        jsonNullBranch[i] = nullableJsonNullBranch(field);
        if (jsonNullBranch[i] >= 0) jsonDocument[i] = of(field.getTypes().get(1 - jsonNullBranch[i]), records);
      }
    }

    @Override
    public void read(BinaryDecoder in, VariantBuilder out) throws IOException {
      int start = out.getWritePos();
      ArrayList<FieldEntry> entries = new ArrayList<>(fields.length);
      for (int i = 0; i < fields.length; i++) {
        AvroVariantReader reader = fields[i];
        if (jsonNullBranch[i] >= 0) {
          int branch = index(in.readIndex(), 2, "union branch");
          if (branch == jsonNullBranch[i]) continue; // SQL NULL: no field
          reader = jsonDocument[i];
        }
        entries.add(new FieldEntry(names[i], out.addKey(names[i]), out.getWritePos() - start));
        reader.read(in, out);
      }
      out.finishWritingObject(start, entries);
    }
  }

  static final String JSON = "io.debezium.data.Json";

  /** The null branch of a union [null, JSON text] (either order); -1 for any other schema. */
  private static int nullableJsonNullBranch(Schema schema) {
    if (schema.getType() != Schema.Type.UNION || schema.getTypes().size() != 2) return -1;
    for (int i = 0; i < 2; i++) {
      Schema branch = schema.getTypes().get(1 - i);
      if (schema.getTypes().get(i).getType() == Schema.Type.NULL
          && branch.getType() == Schema.Type.STRING && JSON.equals(branch.getProp(ConnectTypeReaders.PROPERTY))) {
        return i;
      }
    }
    return -1;
  }

  /** A union of several non-null types: {member0: .., member1: ..}, one of them present. */
  private static final class Members implements AvroVariantReader {
    private final AvroVariantReader[] readers;
    private final int[] member;
    private final String[] names;

    Members(AvroVariantReader[] readers, int[] member, int members) {
      this.readers = readers;
      this.member = member;
      names = new String[members];
      for (int i = 0; i < members; i++) names[i] = "member" + i;
    }

    @Override
    public void read(BinaryDecoder in, VariantBuilder out) throws IOException {
      int branch = index(in.readIndex(), readers.length, "union branch");
      int present = member[branch];
      if (present < 0) {
        out.appendNull();
        return;
      }
      int start = out.getWritePos();
      ArrayList<FieldEntry> entries = new ArrayList<>(names.length);
      for (int i = 0; i < names.length; i++) {
        entries.add(new FieldEntry(names[i], out.addKey(names[i]), out.getWritePos() - start));
        if (i == present) readers[branch].read(in, out);
        else out.appendNull();
      }
      out.finishWritingObject(start, entries);
    }
  }

  private static final class Array implements AvroVariantReader {
    private final AvroVariantReader element;

    Array(AvroVariantReader element) {
      this.element = element;
    }

    @Override
    public void read(BinaryDecoder in, VariantBuilder out) throws IOException {
      int start = out.getWritePos();
      ArrayList<Integer> offsets = new ArrayList<>();
      for (long n = in.readArrayStart(); n != 0; n = in.arrayNext()) {
        for (long i = 0; i < n; i++) {
          offsets.add(out.getWritePos() - start);
          element.read(in, out);
        }
      }
      out.finishWritingArray(start, offsets);
    }
  }

  private static final class MapObject implements AvroVariantReader {
    private final AvroVariantReader value;
    private Utf8 scratch;

    MapObject(AvroVariantReader value) {
      this.value = value;
    }

    @Override
    public void read(BinaryDecoder in, VariantBuilder out) throws IOException {
      int start = out.getWritePos();
      ArrayList<FieldEntry> entries = new ArrayList<>();
      for (long n = in.readMapStart(); n != 0; n = in.mapNext()) {
        for (long i = 0; i < n; i++) {
          scratch = in.readString(scratch);
          String key = new String(scratch.getBytes(), 0, scratch.getByteLength(), StandardCharsets.UTF_8);
          entries.add(new FieldEntry(key, out.addKey(key), out.getWritePos() - start));
          value.read(in, out);
        }
      }
      out.finishWritingObject(start, entries); // a key twice: an error, as in Spark
    }
  }
}
