package zync.spark;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.databind.JsonNode;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.math.BigDecimal;
import java.time.ZoneOffset;
import java.util.Arrays;
import java.util.Base64;
import java.util.HashSet;
import java.util.Set;
import org.apache.spark.types.variant.Variant;
import org.apache.spark.types.variant.VariantUtil.Type;

/**
 * Writes a VARIANT value as the {@code payload} of Kafka Connect's JSON envelope, by the Connect
 * schema zync derived for its shape (tokafka/shapes.py {@code to_connect}): what Connect's
 * JsonConverter writes for the same Connect value, so a sink reading JSON (Debezium's JDBC sink
 * with {@code schemas.enable=true}) gets the same row it would get from Avro. Decimals are base64
 * of their unscaled bytes at the schema's scale, bytes base64, dates epoch days, TIMESTAMP the
 * ISO-8601 string of Debezium's ZonedTimestamp, TIMESTAMP_NTZ the epoch microseconds of
 * MicroTimestamp. As with Avro, a field the schema lacks or a value its type cannot hold exactly
 * is an error, never dropped or rounded.
 */
final class VariantJsonWriter {
  private static final JsonFactory FACTORY = new JsonFactory();
  private final JsonNode schema;
  private final ByteArrayOutputStream buffer = new ByteArrayOutputStream(256);

  VariantJsonWriter(JsonNode schema) {
    this.schema = schema;
  }

  void write(byte[] value, int pos, byte[] metadata, AvroOut out) {
    Variant variant = new Variant(pos == 0 ? value : Arrays.copyOfRange(value, pos, value.length), metadata);
    buffer.reset();
    try (JsonGenerator json = FACTORY.createGenerator(buffer)) {
      write(schema, variant, json, "");
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    out.raw(buffer.toByteArray());
  }

  private static void write(JsonNode schema, Variant v, JsonGenerator json, String path) throws IOException {
    String name = schema.path("name").asText("");
    if (v != null && AvroVariantReaders.JSON.equals(name)) { // a document, null among them
      json.writeString(v.toJson(ZoneOffset.UTC)); // its column's SQL NULL is an absent field
      return;
    }
    Type type = v == null ? Type.NULL : v.getType();
    if (type == Type.NULL) {
      json.writeNull();
      return;
    }
    switch (name) {
      case "org.apache.kafka.connect.data.Decimal" -> {
        int scale = Integer.parseInt(schema.path("parameters").path("scale").asText("0"));
        json.writeString(Base64.getEncoder().encodeToString(decimal(v, scale, path).unscaledValue().toByteArray()));
        return;
      }
      case "org.apache.kafka.connect.data.Date" -> {
        json.writeNumber(expect(v, Type.DATE, path).getLong());
        return;
      }
      case DeclaredAvroWriters.ZONED_TIMESTAMP -> {
        json.writeString(DeclaredAvroWriters.utcText(expect(v, Type.TIMESTAMP, path).getLong()));
        return;
      }
      case "io.debezium.time.MicroTimestamp" -> {
        json.writeNumber(expect(v, Type.TIMESTAMP_NTZ, path).getLong());
        return;
      }
      default -> {}
    }
    switch (schema.path("type").asText()) {
      case "struct" -> struct(schema, expect(v, Type.OBJECT, path), json, path);
      case "array" -> {
        expect(v, Type.ARRAY, path);
        json.writeStartArray();
        for (int i = 0; i < v.arraySize(); i++) write(schema.path("items"), v.getElementAtIndex(i), json, path + "[]");
        json.writeEndArray();
      }
      case "int64" -> json.writeNumber(expect(v, Type.LONG, path).getLong());
      // Connect's JSON schema names its floating types "float" and "double" (JsonSchema).
      case "double", "float" -> json.writeNumber(number(v, path).doubleValue());
      case "boolean" -> json.writeBoolean(expect(v, Type.BOOLEAN, path).getBoolean());
      case "string" -> json.writeString(expect(v, Type.STRING, path).getString());
      case "bytes" -> json.writeString(Base64.getEncoder().encodeToString(expect(v, Type.BINARY, path).getBinary()));
      default -> throw new IllegalArgumentException("zync to-kafka: cannot write Connect type " + schema + " at " + path);
    }
  }

  private static void struct(JsonNode schema, Variant v, JsonGenerator json, String path) throws IOException {
    Set<String> known = new HashSet<>();
    json.writeStartObject();
    for (JsonNode field : schema.path("fields")) {
      String name = field.path("field").asText();
      known.add(name);
      json.writeFieldName(name);
      write(field, v.getFieldByKey(name), json, path.isEmpty() ? name : path + "." + name);
    }
    json.writeEndObject();
    for (int i = 0; i < v.objectSize(); i++) {
      String key = v.getFieldAtIndex(i).key;
      if (!known.contains(key)) {
        throw new IllegalArgumentException("zync to-kafka: field " + (path.isEmpty() ? key : path + "." + key)
            + " is not in the record's Connect schema");
      }
    }
  }

  private static Variant expect(Variant v, Type type, String path) {
    if (v.getType() != type) throw mismatch(v, path, type.name());
    return v;
  }

  private static BigDecimal number(Variant v, String path) {
    return switch (v.getType()) {
      case LONG -> BigDecimal.valueOf(v.getLong());
      case DECIMAL -> v.getDecimalWithOriginalScale();
      case DOUBLE -> BigDecimal.valueOf(v.getDouble());
      case FLOAT -> BigDecimal.valueOf(v.getFloat());
      default -> throw mismatch(v, path, "a number");
    };
  }

  private static BigDecimal decimal(Variant v, int scale, String path) {
    if (v.getType() != Type.LONG && v.getType() != Type.DECIMAL) throw mismatch(v, path, "decimal(38," + scale + ")");
    try {
      return number(v, path).setScale(scale);
    } catch (ArithmeticException e) {
      throw mismatch(v, path, "decimal(38," + scale + "), which cannot hold it exactly");
    }
  }

  private static IllegalArgumentException mismatch(Variant v, String path, String expected) {
    String where = path.isEmpty() ? "the record" : "field " + path;
    return new IllegalArgumentException(
        "zync to-kafka: " + where + " holds a " + v.getType() + " value where its Connect schema has " + expected);
  }
}
