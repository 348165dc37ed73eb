package zync.spark;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.time.LocalTime;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.time.format.DateTimeParseException;
import java.util.Arrays;
import java.util.List;
import org.apache.avro.LogicalTypes;
import org.apache.avro.Schema;
import org.apache.spark.types.variant.Variant;
import org.apache.spark.types.variant.VariantUtil;
import org.apache.spark.types.variant.VariantUtil.Type;

/**
 * Writers for the schemas a source declares, not zync's own: a mirror's output takes its source
 * topic's row schema (tokafka/declared.py), so a JDBC sink makes the source's column types. Each
 * writes the variant value ingest stored for a semantic type (ConnectTypeReaders) back in that
 * type's wire form, exactly, or fails naming the field:
 *
 * <ul>
 *   <li>{@code io.debezium.data.Json}: any value → its JSON text;
 *   <li>{@code io.debezium.time.Date} (int): DATE → epoch days;
 *   <li>{@code io.debezium.time.Time} / Connect's {@code Time} (int), {@code MicroTime}, {@code
 *       NanoTime} (long): the string {@code HH:mm:ss[.ffffff]} → milli/micro/nanoseconds of the day;
 *   <li>{@code io.debezium.time.Timestamp} / {@code MicroTimestamp} / {@code NanoTimestamp}
 *       (long): TIMESTAMP_NTZ → epoch milli/micro/nanoseconds;
 *   <li>{@code io.debezium.data.VariableScaleDecimal} (record): DECIMAL, an integer or the digits
 *       of a longer one → {scale, value};
 *   <li>int (int32, and Connect's int8/int16): an integer in range; float: a FLOAT; an Avro enum:
 *       a string among its symbols.
 * </ul>
 */
final class DeclaredAvroWriters {
  private DeclaredAvroWriters() {}

  private static final long DAY_NANOS = 86_400_000_000_000L;
  static final String ZONED_TIMESTAMP = "io.debezium.time.ZonedTimestamp";

  /**
   * A TIMESTAMP's µs as Debezium writes a ZonedTimestamp: ISO-8601 in UTC with the fraction's
   * trailing zeros dropped, e.g. 2026-11-25T04:20:04.62084Z.
   */
  static String utcText(long micros) {
    Instant at = Instant.ofEpochSecond(Math.floorDiv(micros, 1_000_000L), Math.floorMod(micros, 1_000_000L) * 1000L);
    return OffsetDateTime.ofInstant(at, ZoneOffset.UTC).format(DateTimeFormatter.ISO_OFFSET_DATE_TIME);
  }

  /** The writer of {@code schema}'s declared type, or null when zync's own writers cover it. */
  static VariantAvroWriter of(Schema schema, String path) {
    String name = schema.getProp("connect.name");
    Schema.Type type = schema.getType();
    if (name != null) {
      VariantAvroWriter semantic = semantic(name, type, schema, path);
      if (semantic != null) return semantic;
    }
    var logical = schema.getLogicalType();
    return switch (type) {
      case INT -> {
        if (logical instanceof LogicalTypes.Date) yield new Epoch(path, "date", Type.DATE, 1);
        if (logical instanceof LogicalTypes.TimeMillis) yield new TimeOfDay(path, 1_000_000L);
        yield logical == null ? new Int(path, bounds(schema.getProp("connect.type"))) : null;
      }
      case LONG -> logical instanceof LogicalTypes.TimeMicros ? new TimeOfDay(path, 1_000L) : null;
      case FLOAT -> new Float(path);
      case ENUM -> new Symbol(path, schema.getEnumSymbols());
      default -> null;
    };
  }

  private static VariantAvroWriter semantic(String name, Schema.Type type, Schema schema, String path) {
    return switch (name) {
      case "io.debezium.data.Json" -> type == Schema.Type.STRING ? new Json(path) : null;
      case "io.debezium.time.Date", "org.apache.kafka.connect.data.Date" ->
          type == Schema.Type.INT ? new Epoch(path, "date", Type.DATE, 1) : null;
      case "io.debezium.time.Time", "org.apache.kafka.connect.data.Time" ->
          type == Schema.Type.INT ? new TimeOfDay(path, 1_000_000L) : null;
      case "io.debezium.time.MicroTime" -> type == Schema.Type.LONG ? new TimeOfDay(path, 1_000L) : null;
      case "io.debezium.time.NanoTime" -> type == Schema.Type.LONG ? new TimeOfDay(path, 1L) : null;
      case "io.debezium.time.Timestamp" ->
          type == Schema.Type.LONG ? new Epoch(path, name, Type.TIMESTAMP_NTZ, -1000) : null;
      case "io.debezium.time.MicroTimestamp" ->
          type == Schema.Type.LONG ? new Epoch(path, name, Type.TIMESTAMP_NTZ, 1) : null;
      case "io.debezium.time.NanoTimestamp" ->
          type == Schema.Type.LONG ? new Epoch(path, name, Type.TIMESTAMP_NTZ, 1000) : null;
      case ZONED_TIMESTAMP -> type == Schema.Type.STRING ? new Zoned(path) : null;
      case "io.debezium.data.VariableScaleDecimal" -> VariableScale.fits(schema) ? new VariableScale(schema, path) : null;
      default -> null;
    };
  }

  private static long[] bounds(String connectType) {
    if ("int8".equals(connectType)) return new long[] {Byte.MIN_VALUE, Byte.MAX_VALUE};
    if ("int16".equals(connectType)) return new long[] {Short.MIN_VALUE, Short.MAX_VALUE};
    return new long[] {Integer.MIN_VALUE, Integer.MAX_VALUE};
  }

  private static Type typeAt(byte[] v, int pos) {
    return VariantAvroWriter.isNull(v, pos) ? Type.NULL : VariantUtil.getType(v, pos);
  }

  /** An integer column of 32 bits or fewer (Avro int): ingest stored it as a variant integer. */
  private static final class Int extends VariantAvroWriter {
    private final long[] range;

    Int(String path, long[] range) {
      super(path);
      this.range = range;
    }

    @Override
    void write(byte[] v, int pos, byte[] metadata, AvroOut out) {
      if (typeAt(v, pos) != Type.LONG) throw mismatch(v, pos, "int");
      long n = VariantUtil.getLong(v, pos);
      if (n < range[0] || n > range[1]) throw mismatch(v, pos, "an int of " + range[0] + ".." + range[1] + ", not " + n);
      out.varLong(n);
    }
  }

  private static final class Float extends VariantAvroWriter {
    Float(String path) {
      super(path);
    }

    @Override
    void write(byte[] v, int pos, byte[] metadata, AvroOut out) {
      if (typeAt(v, pos) != Type.FLOAT) throw mismatch(v, pos, "float");
      int bits = java.lang.Float.floatToRawIntBits(VariantUtil.getFloat(v, pos));
      out.raw(new byte[] {(byte) bits, (byte) (bits >>> 8), (byte) (bits >>> 16), (byte) (bits >>> 24)});
    }
  }

  private static final class Symbol extends VariantAvroWriter {
    private final List<String> symbols;

    Symbol(String path, List<String> symbols) {
      super(path);
      this.symbols = symbols;
    }

    @Override
    void write(byte[] v, int pos, byte[] metadata, AvroOut out) {
      int index = typeAt(v, pos) == Type.STRING ? symbols.indexOf(VariantUtil.getString(v, pos)) : -1;
      if (index < 0) throw mismatch(v, pos, "one of the enum's symbols " + symbols);
      out.varLong(index);
    }
  }

  /** A JSON column: the document ingest parsed, as JSON text again. */
  private static final class Json extends VariantAvroWriter {
    Json(String path) {
      super(path);
    }

    @Override
    boolean writesVariantNull() {
      return true; // the document null; its column's SQL NULL is an absent field
    }

    @Override
    void write(byte[] v, int pos, byte[] metadata, AvroOut out) {
      if (pos == ABSENT) throw mismatch(v, pos, "a JSON document"); // a JSON null is a document
      byte[] slice = Arrays.copyOfRange(v, pos, pos + VariantUtil.valueSize(v, pos));
      String text = new Variant(slice, metadata).toJson(ZoneOffset.UTC);
      out.lengthPrefixed(text.getBytes(StandardCharsets.UTF_8));
    }
  }

  /** Epoch days or an epoch count in the declared unit, from a DATE or TIMESTAMP_NTZ in µs. */
  private static final class Epoch extends VariantAvroWriter {
    private final String what;
    private final Type accepts;
    private final int scale; // > 0: multiply by it; < 0: divide by -scale, exactly

    Epoch(String path, String what, Type accepts, int scale) {
      super(path);
      this.what = what;
      this.accepts = accepts;
      this.scale = scale;
    }

    @Override
    void write(byte[] v, int pos, byte[] metadata, AvroOut out) {
      if (typeAt(v, pos) != accepts) throw mismatch(v, pos, what);
      long n = VariantUtil.getLong(v, pos);
      if (scale > 0) {
        out.varLong(Math.multiplyExact(n, (long) scale));
      } else {
        if (n % -scale != 0) throw mismatch(v, pos, what + ", which cannot hold " + n + " µs exactly");
        out.varLong(n / -scale);
      }
    }
  }

  /** Time of day, stored as HH:mm:ss[.ffffff] (a variant has no TIME), in units of {@code nanosPerUnit}. */
  private static final class TimeOfDay extends VariantAvroWriter {
    private final long nanosPerUnit;

    TimeOfDay(String path, long nanosPerUnit) {
      super(path);
      this.nanosPerUnit = nanosPerUnit;
    }

    @Override
    void write(byte[] v, int pos, byte[] metadata, AvroOut out) {
      if (typeAt(v, pos) != Type.STRING) throw mismatch(v, pos, "a time of day");
      String text = VariantUtil.getString(v, pos);
      long nanos;
      try {
        nanos = "24:00:00".equals(text) ? DAY_NANOS : LocalTime.parse(text).toNanoOfDay();
      } catch (DateTimeParseException e) {
        throw mismatch(v, pos, "a time of day, not " + text);
      }
      if (nanos % nanosPerUnit != 0) throw mismatch(v, pos, "a time of day in coarser units than " + text);
      out.varLong(nanos / nanosPerUnit);
    }
  }

  /** Debezium's ZonedTimestamp: a TIMESTAMP in UTC, or the string ingest kept ('infinity'). */
  private static final class Zoned extends VariantAvroWriter {
    Zoned(String path) {
      super(path);
    }

    @Override
    void write(byte[] v, int pos, byte[] metadata, AvroOut out) {
      Type type = typeAt(v, pos);
      if (type == Type.STRING) {
        out.lengthPrefixed(VariantUtil.getString(v, pos).getBytes(StandardCharsets.UTF_8));
      } else if (type == Type.TIMESTAMP) {
        out.lengthPrefixed(utcText(VariantUtil.getLong(v, pos)).getBytes(StandardCharsets.UTF_8));
      } else {
        throw mismatch(v, pos, "io.debezium.time.ZonedTimestamp");
      }
    }
  }

  /** numeric without a scale: {scale: int, value: bytes}, in the schema's field order. */
  private static final class VariableScale extends VariantAvroWriter {
    private final boolean scaleFirst;

    VariableScale(Schema schema, String path) {
      super(path);
      scaleFirst = schema.getField("scale").pos() == 0;
    }

    static boolean fits(Schema schema) {
      return schema.getType() == Schema.Type.RECORD && schema.getFields().size() == 2
          && schema.getField("scale") != null && schema.getField("scale").schema().getType() == Schema.Type.INT
          && schema.getField("value") != null && schema.getField("value").schema().getType() == Schema.Type.BYTES;
    }

    @Override
    void write(byte[] v, int pos, byte[] metadata, AvroOut out) {
      BigDecimal number = switch (typeAt(v, pos)) {
        case LONG -> BigDecimal.valueOf(VariantUtil.getLong(v, pos));
        case DECIMAL -> VariantUtil.getDecimalWithOriginalScale(v, pos);
        case STRING -> digits(v, pos);
        default -> throw mismatch(v, pos, "io.debezium.data.VariableScaleDecimal");
      };
      BigInteger unscaled = number.unscaledValue();
      if (scaleFirst) out.varLong(number.scale());
      out.lengthPrefixed(unscaled.toByteArray());
      if (!scaleFirst) out.varLong(number.scale());
    }

    private BigDecimal digits(byte[] v, int pos) {
      try {
        return new BigDecimal(VariantUtil.getString(v, pos));
      } catch (NumberFormatException e) {
        throw mismatch(v, pos, "io.debezium.data.VariableScaleDecimal");
      }
    }
  }
}
