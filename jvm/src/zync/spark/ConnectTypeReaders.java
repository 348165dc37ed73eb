package zync.spark;

import java.io.IOException;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.time.LocalTime;
import java.time.OffsetDateTime;
import java.time.format.DateTimeParseException;
import org.apache.avro.Schema;
import org.apache.avro.io.BinaryDecoder;
import org.apache.spark.types.variant.VariantBuilder;

/**
 * Readers for Kafka Connect's and Debezium's semantic types, which an Avro converter marks with
 * the schema property {@code connect.name} instead of (or besides) an Avro logical type. Each
 * becomes the variant value a user means, not its wire encoding:
 *
 * <ul>
 *   <li>{@code io.debezium.time.ZonedTimestamp} (ISO-8601 string with offset) → TIMESTAMP (UTC);
 *       a value that is not such a string ({@code infinity}) stays a string;
 *   <li>{@code io.debezium.time.Timestamp} / {@code MicroTimestamp} / {@code NanoTimestamp}
 *       (epoch milli/micro/nanoseconds of a time zone-less timestamp) → TIMESTAMP_NTZ;
 *   <li>{@code io.debezium.time.Date} (epoch days) → DATE;
 *   <li>{@code io.debezium.time.Time} / {@code MicroTime} / {@code NanoTime} and Connect's {@code
 *       Time} (time of day) →
 *       the string {@code HH:mm:ss[.ffffff]}: a variant has no TIME type;
 *   <li>{@code io.debezium.data.VariableScaleDecimal} (a record of scale and unscaled bytes) →
 *       DECIMAL, or its exact string when it has more than 38 digits;
 *   <li>{@code io.debezium.data.Json} (JSON text) → the JSON's own variant value.
 * </ul>
 *
 * Strings such as {@code io.debezium.data.Uuid} and {@code io.debezium.data.Enum} stay strings.
 */
final class ConnectTypeReaders {
  private ConnectTypeReaders() {}

  static final String PROPERTY = "connect.name";
  private static final int VARIANT_DECIMAL_DIGITS = 38;

  /** The reader of `schema`'s semantic type, or null when it has none zync knows. */
  static AvroVariantReader of(Schema schema) {
    String name = schema.getProp(PROPERTY);
    if (name == null) return null;
    Schema.Type type = schema.getType();
    switch (name) {
      case "io.debezium.time.ZonedTimestamp":
        return type == Schema.Type.STRING ? ConnectTypeReaders::zonedTimestamp : null;
      case "io.debezium.time.Timestamp":
        return type == Schema.Type.LONG ? (in, out) -> out.appendTimestampNtz(Math.multiplyExact(in.readLong(), 1000L)) : null;
      case "io.debezium.time.MicroTimestamp":
        return type == Schema.Type.LONG ? (in, out) -> out.appendTimestampNtz(in.readLong()) : null;
      case "io.debezium.time.NanoTimestamp":
        return type == Schema.Type.LONG ? (in, out) -> out.appendTimestampNtz(Math.floorDiv(in.readLong(), 1000L)) : null;
      case "io.debezium.time.Date":
        return type == Schema.Type.INT ? (in, out) -> out.appendDate(in.readInt()) : null;
      case "io.debezium.time.Time", "org.apache.kafka.connect.data.Time":
        return type == Schema.Type.INT ? (in, out) -> time(out, in.readInt() * 1_000_000L) : null;
      case "io.debezium.time.MicroTime":
        return type == Schema.Type.LONG ? (in, out) -> time(out, Math.multiplyExact(in.readLong(), 1000L)) : null;
      case "io.debezium.time.NanoTime":
        return type == Schema.Type.LONG ? (in, out) -> time(out, in.readLong()) : null;
      case "io.debezium.data.VariableScaleDecimal":
        return variableScaleDecimal(schema);
      case "io.debezium.data.Json":
        return type == Schema.Type.STRING ? ConnectTypeReaders::json : null;
      default:
        return null;
    }
  }

  private static void zonedTimestamp(BinaryDecoder in, VariantBuilder out) throws IOException {
    zonedTimestamp(in.readString(), out);
  }

  static void zonedTimestamp(String text, VariantBuilder out) {
    try {
      OffsetDateTime at = OffsetDateTime.parse(text);
      long seconds = at.toEpochSecond();
      out.appendTimestamp(Math.addExact(Math.multiplyExact(seconds, 1_000_000L), at.getNano() / 1000));
    } catch (DateTimeParseException e) {
      out.appendString(text); // PostgreSQL's 'infinity' and the like
    }
  }

  static void time(VariantBuilder out, long nanosOfDay) {
    // PostgreSQL's 24:00:00 is one past the last LocalTime: say it as PostgreSQL does.
    out.appendString(nanosOfDay >= 86_400_000_000_000L ? "24:00:00" : LocalTime.ofNanoOfDay(nanosOfDay).toString());
  }

  private static void json(BinaryDecoder in, VariantBuilder out) throws IOException {
    json(in.readString(), out);
  }

  static void json(String text, VariantBuilder out) {
    try {
      out.appendVariant(VariantBuilder.parseJson(text, false));
    } catch (IOException | RuntimeException e) {
      out.appendString(text); // not JSON after all: keep the text, lose nothing
    }
  }

  /** A record {scale: int, value: bytes}; only that exact shape is read this way. */
  private static AvroVariantReader variableScaleDecimal(Schema schema) {
    if (schema.getType() != Schema.Type.RECORD || schema.getFields().size() != 2) return null;
    Schema scale = schema.getField("scale") == null ? null : schema.getField("scale").schema();
    Schema value = schema.getField("value") == null ? null : schema.getField("value").schema();
    if (scale == null || value == null || scale.getType() != Schema.Type.INT || value.getType() != Schema.Type.BYTES) {
      return null;
    }
    boolean scaleFirst = schema.getField("scale").pos() == 0;
    return (in, out) -> {
      int s;
      byte[] unscaled;
      if (scaleFirst) {
        s = in.readInt();
        unscaled = in.readBytes(null).array();
      } else {
        unscaled = in.readBytes(null).array();
        s = in.readInt();
      }
      decimal(new BigDecimal(new BigInteger(unscaled), s), out);
    };
  }

  /** A decimal a variant can hold as one; else its exact digits as a string. */
  static void decimal(BigDecimal number, VariantBuilder out) {
    if (number.scale() < 0) number = number.setScale(0);
    if (number.precision() <= VARIANT_DECIMAL_DIGITS && number.scale() <= VARIANT_DECIMAL_DIGITS) {
      out.appendDecimal(number);
    } else {
      out.appendString(number.toPlainString());
    }
  }
}
