package zync.spark;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Map;
import org.apache.spark.sql.api.java.UDF1;
import org.apache.spark.types.variant.Variant;
import org.apache.spark.types.variant.VariantBuilder;
import org.apache.spark.types.variant.VariantBuilder.FieldEntry;
import org.apache.spark.unsafe.types.VariantVal;

/**
 * {@code zync_connect_json_variant(bytes)}: a message written by Kafka Connect's JsonConverter,
 * decoded into a VARIANT. With {@code schemas.enable=true} the message is {@code {"schema": ..,
 * "payload": ..}} and the payload is read by its schema, so Connect's and Debezium's semantic
 * types become the values they stand for, exactly as from Avro ({@link ConnectTypeReaders}):
 * a Decimal's base64 bytes become a decimal of its scale, a MicroTimestamp a TIMESTAMP_NTZ, bytes
 * binary. Any other JSON (a converter without schemas) is read as it is.
 *
 * <p>NULL when the bytes are NULL or empty (a tombstone) or not JSON; {@link Error} says why.
 */
public final class ConnectJsonToVariant implements UDF1<byte[], VariantVal> {
  private static final long serialVersionUID = 1L;
  private static final ObjectMapper JSON =
      new ObjectMapper().enable(DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS);

  @Override
  public VariantVal call(byte[] message) {
    try {
      return decode(message);
    } catch (IOException | RuntimeException | StackOverflowError e) {
      return null;
    }
  }

  /** {@code zync_connect_json_error(bytes)}: why the message does not decode; NULL if it does. */
  public static final class Error implements UDF1<byte[], String> {
    private static final long serialVersionUID = 1L;

    @Override
    public String call(byte[] message) {
      try {
        decode(message);
        return null;
      } catch (JsonProcessingException e) {
        return "not JSON: " + e.getOriginalMessage();
      } catch (StackOverflowError e) {
        return "nested too deeply";
      } catch (IOException | RuntimeException e) {
        return e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage();
      }
    }
  }

  static VariantVal decode(byte[] message) throws IOException {
    if (message == null || message.length == 0) return null;
    JsonNode root = JSON.readTree(message);
    if (root == null || root.isMissingNode()) throw new IOException("no JSON value");
    VariantBuilder builder = new VariantBuilder(false);
    if (root.isObject() && root.size() == 2 && root.has("schema") && root.has("payload")) {
      write(root.get("schema"), root.get("payload"), builder, "");
    } else {
      builder.appendVariant(VariantBuilder.parseJson(new String(message, StandardCharsets.UTF_8), false));
    }
    Variant variant = builder.result();
    return new VariantVal(variant.getValue(), variant.getMetadata());
  }

  private static void write(JsonNode schema, JsonNode value, VariantBuilder out, String path) throws IOException {
    if (value == null || value.isNull()) {
      out.appendNull();
      return;
    }
    String type = schema.path("type").asText();
    String name = schema.path("name").asText("");
    if (semantic(name, schema, value, out, path)) return;
    switch (type) {
      case "struct" -> struct(schema, value, out, path);
      case "array" -> array(schema.path("items"), value, out, path);
      case "map" -> map(schema.path("values"), value, out, path);
      case "int8", "int16", "int32", "int64" -> out.appendLong(integer(value, path));
      case "float" -> out.appendFloat((float) value.asDouble());
      case "double" -> out.appendDouble(value.asDouble());
      case "boolean" -> out.appendBoolean(value.asBoolean());
      case "string" -> out.appendString(value.asText());
      case "bytes" -> out.appendBinary(base64(value, path));
      default -> out.appendVariant(VariantBuilder.parseJson(value.toString(), false));
    }
  }

  /** Connect's and Debezium's named types; false when `name` is none zync knows. */
  private static boolean semantic(String name, JsonNode schema, JsonNode value, VariantBuilder out, String path)
      throws IOException {
    switch (name) {
      case "org.apache.kafka.connect.data.Decimal" -> {
        int scale = Integer.parseInt(schema.path("parameters").path("scale").asText("0"));
        BigDecimal number = value.isNumber() // decimal.format=NUMERIC writes a number
            ? value.decimalValue().setScale(scale)
            : new BigDecimal(new BigInteger(base64(value, path)), scale);
        ConnectTypeReaders.decimal(number, out);
      }
      case "io.debezium.data.VariableScaleDecimal" -> ConnectTypeReaders.decimal(
          new BigDecimal(new BigInteger(base64(value.path("value"), path)), value.path("scale").asInt()), out);
      case "org.apache.kafka.connect.data.Date", "io.debezium.time.Date" -> out.appendDate((int) integer(value, path));
      case "org.apache.kafka.connect.data.Timestamp" -> out.appendTimestamp(Math.multiplyExact(integer(value, path), 1000L));
      case "org.apache.kafka.connect.data.Time", "io.debezium.time.Time" ->
          ConnectTypeReaders.time(out, integer(value, path) * 1_000_000L);
      case "io.debezium.time.MicroTime" -> ConnectTypeReaders.time(out, Math.multiplyExact(integer(value, path), 1000L));
      case "io.debezium.time.NanoTime" -> ConnectTypeReaders.time(out, integer(value, path));
      case "io.debezium.time.Timestamp" -> out.appendTimestampNtz(Math.multiplyExact(integer(value, path), 1000L));
      case "io.debezium.time.MicroTimestamp" -> out.appendTimestampNtz(integer(value, path));
      case "io.debezium.time.NanoTimestamp" -> out.appendTimestampNtz(Math.floorDiv(integer(value, path), 1000L));
      case "io.debezium.time.ZonedTimestamp" -> ConnectTypeReaders.zonedTimestamp(value.asText(), out);
      case "io.debezium.data.Json" -> ConnectTypeReaders.json(value.asText(), out);
      default -> {
        return false;
      }
    }
    return true;
  }

  private static void struct(JsonNode schema, JsonNode value, VariantBuilder out, String path) throws IOException {
    if (!value.isObject()) throw new IOException(where(path) + "is not an object as its struct schema says");
    int start = out.getWritePos();
    ArrayList<FieldEntry> entries = new ArrayList<>();
    for (JsonNode field : schema.path("fields")) {
      String name = field.path("field").asText();
      JsonNode fieldValue = value.get(name);
      // A JSON column's SQL NULL leaves its field out, as in AvroVariantReader.Record: the
      // document null (the text "null") is a variant null.
      boolean absent = fieldValue == null || fieldValue.isNull();
      if (absent && AvroVariantReaders.JSON.equals(field.path("name").asText(""))) continue;
      entries.add(new FieldEntry(name, out.addKey(name), out.getWritePos() - start));
      write(field, fieldValue, out, path.isEmpty() ? name : path + "." + name);
    }
    out.finishWritingObject(start, entries);
  }

  private static void array(JsonNode items, JsonNode value, VariantBuilder out, String path) throws IOException {
    if (!value.isArray()) throw new IOException(where(path) + "is not an array as its schema says");
    int start = out.getWritePos();
    ArrayList<Integer> offsets = new ArrayList<>();
    for (JsonNode element : value) {
      offsets.add(out.getWritePos() - start);
      write(items, element, out, path + "[]");
    }
    out.finishWritingArray(start, offsets);
  }

  private static void map(JsonNode values, JsonNode value, VariantBuilder out, String path) throws IOException {
    if (!value.isObject()) { // a map with non-string keys: Connect writes [[k, v], ...]
      out.appendVariant(VariantBuilder.parseJson(value.toString(), false));
      return;
    }
    int start = out.getWritePos();
    ArrayList<FieldEntry> entries = new ArrayList<>();
    for (Map.Entry<String, JsonNode> entry : value.properties()) {
      entries.add(new FieldEntry(entry.getKey(), out.addKey(entry.getKey()), out.getWritePos() - start));
      write(values, entry.getValue(), out, path + "." + entry.getKey());
    }
    out.finishWritingObject(start, entries);
  }

  private static long integer(JsonNode value, String path) throws IOException {
    if (!value.canConvertToLong() || !value.isIntegralNumber()) {
      throw new IOException(where(path) + "holds " + value + " where its schema has an integer");
    }
    return value.asLong();
  }

  private static byte[] base64(JsonNode value, String path) throws IOException {
    try {
      return Base64.getDecoder().decode(value.asText());
    } catch (IllegalArgumentException e) {
      throw new IOException(where(path) + "is not base64 as its bytes schema says");
    }
  }

  private static String where(String path) {
    return path.isEmpty() ? "the payload " : "field " + path + " ";
  }
}
