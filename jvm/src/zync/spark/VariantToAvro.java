package zync.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.avro.Schema;
import org.apache.spark.sql.api.java.UDF2;
import org.apache.spark.types.variant.VariantUtil;
import org.apache.spark.types.variant.VariantUtil.Type;
import org.apache.spark.unsafe.types.VariantVal;

/**
 * {@code zync_variant_avro(v, schemas)}: a VARIANT value as Confluent-framed Avro (magic byte 0,
 * the 4-byte schema id, the Avro body), or as Kafka Connect's JSON envelope when the schema list
 * says so ({@link Encoder}); NULL for SQL NULL and for a variant null (a tombstone).
 *
 * <p>{@code schemas} is UTF-8 JSON (a BINARY literal) naming the registered schema for each shape the survey found:
 * {@code {"objects": {"a,b": [id, "<avro>"], ...}, "other": [id, "<avro>"]}}. An object's shape is
 * its sorted top-level field names joined by ","; "other" serves every non-object value (and
 * every value, when "objects" is absent, as for keys). It is parsed once per task.
 */
public final class VariantToAvro implements UDF2<VariantVal, byte[], byte[]> {
  private static final long serialVersionUID = 1L;
  private static final ObjectMapper JSON = new ObjectMapper();

  // The schemas argument is a literal: the same bytes on every row of a task (though not the
  // same array), so each is parsed once and then only compared (a vectorised Arrays.equals).
  // One instance serves every call in a query (keys and values), hence a few entries.
  private transient List<byte[]> seenSchemas;
  private transient List<Encoders> seenEncoders;
  private transient AvroOut out;

  @Override
  public byte[] call(VariantVal value, byte[] schemas) {
    if (value == null) return null;
    byte[] variant = value.getValue();
    if (VariantUtil.getType(variant, 0) == Type.NULL) return null;
    if (out == null) out = new AvroOut();
    out.reset();
    encoders(schemas).write(variant, value.getMetadata(), out);
    return out.toByteArray();
  }

  private Encoders encoders(byte[] schemas) {
    if (seenSchemas == null) {
      seenSchemas = new ArrayList<>();
      seenEncoders = new ArrayList<>();
    }
    for (int i = 0; i < seenSchemas.size(); i++) {
      if (Arrays.equals(schemas, seenSchemas.get(i))) return seenEncoders.get(i);
    }
    if (seenSchemas.size() >= 8) { // never more than a query's two columns in practice
      seenSchemas.clear();
      seenEncoders.clear();
    }
    Encoders parsed = Encoders.parse(schemas);
    seenSchemas.add(schemas.clone());
    seenEncoders.add(parsed);
    return parsed;
  }

  /** Writes one value's bytes (Avro body, or JSON payload) at a position of its variant. */
  interface BodyWriter {
    void write(byte[] value, int pos, byte[] metadata, AvroOut out);
  }

  /**
   * One shape's encoding: {@code frame}, the body, {@code end}. Avro: [id, "<avro schema>"] gives
   * the Confluent header and the Avro body. Connect JSON: ["json", "<connect schema>"] gives
   * {@code {"schema":<schema>,"payload":} + the payload + {@code }}.
   */
  record Encoder(byte[] frame, BodyWriter writer, byte[] end) {
    private static final byte[] NOTHING = {};

    static Encoder parse(JsonNode idAndSchema) {
      if ("json".equals(idAndSchema.get(0).asText())) {
        String schema = idAndSchema.get(1).asText();
        byte[] frame = ("{\"schema\":" + schema + ",\"payload\":").getBytes(StandardCharsets.UTF_8);
        VariantJsonWriter json = new VariantJsonWriter(readJson(schema));
        return new Encoder(frame, json::write, new byte[] {'}'});
      }
      int id = idAndSchema.get(0).asInt();
      Schema schema = new Schema.Parser().parse(idAndSchema.get(1).asText());
      byte[] frame = {0, (byte) (id >>> 24), (byte) (id >>> 16), (byte) (id >>> 8), (byte) id};
      return new Encoder(frame, VariantAvroWriter.of(schema)::write, NOTHING);
    }

    private static JsonNode readJson(String text) {
      try {
        return JSON.readTree(text);
      } catch (IOException e) {
        throw new UncheckedIOException("zync to-kafka: unreadable Connect schema " + text, e);
      }
    }
  }

  private record Shape(int[] ids, Encoder encoder) {}

  /** The encoders of one schema list; also used by StagingFetch, without the UDF. */
  record Encoders(Map<String, Encoder> objects, Encoder other, MetadataCache<List<Shape>> shapes) {
    Encoders(Map<String, Encoder> objects, Encoder other) {
      this(objects, other, new MetadataCache<>());
    }

    static Encoders parse(byte[] schemas) {
      return parse(new String(schemas, StandardCharsets.UTF_8));
    }

    static Encoders parse(String text) {
      JsonNode root;
      try {
        root = JSON.readTree(text);
      } catch (IOException e) {
        throw new UncheckedIOException("zync to-kafka: unreadable schema list " + text, e);
      }
      Map<String, Encoder> objects = new HashMap<>();
      JsonNode shapes = root.get("objects");
      if (shapes != null) {
        for (Map.Entry<String, JsonNode> shape : shapes.properties()) {
          objects.put(shape.getKey(), Encoder.parse(shape.getValue()));
        }
      }
      JsonNode other = root.get("other");
      return new Encoders(objects, other == null || other.isNull() ? null : Encoder.parse(other));
    }

    /**
     * Confluent-framed Avro of a non-null variant (its value bytes and key dictionary), appended
     * to {@code out}.
     */
    void write(byte[] value, byte[] metadata, AvroOut out) {
      Encoder encoder = pick(value, metadata);
      out.raw(encoder.frame);
      encoder.writer.write(value, 0, metadata, out);
      out.raw(encoder.end);
    }

    private Encoder pick(byte[] value, byte[] metadata) {
      Encoder encoder = other;
      if (VariantUtil.getType(value, 0) == Type.OBJECT && !objects.isEmpty()) {
        encoder = byShape(value, metadata);
      }
      if (encoder == null) {
        throw new IllegalArgumentException(
            "zync to-kafka: no schema was registered for a value of shape " + shapeOf(value, metadata));
      }
      return encoder;
    }

    /**
     * The encoder of an object's shape. Within one key dictionary, a shape is the list of its
     * fields' dictionary ids: the key names are joined only the first time a task meets it.
     */
    private Encoder byShape(byte[] value, byte[] metadata) {
      int[] ids = fieldIds(value);
      List<Shape> known = shapes.get(metadata);
      if (known == null) {
        known = new ArrayList<>();
        shapes.put(metadata, known);
      }
      for (Shape shape : known) {
        if (Arrays.equals(shape.ids, ids)) return shape.encoder;
      }
      Encoder encoder = objects.get(shapeOf(value, metadata));
      if (encoder != null) known.add(new Shape(ids, encoder));
      return encoder;
    }

    private static int[] fieldIds(byte[] object) {
      return VariantUtil.handleObject(object, 0, (size, idSize, offsetSize, idStart, offsetStart, dataStart) -> {
        int[] ids = new int[size];
        for (int i = 0; i < size; i++) ids[i] = VariantUtil.readUnsigned(object, idStart + idSize * i, idSize);
        return ids;
      });
    }

    /** An object's keys joined by "," (in the variant's order: sorted), else its type. */
    private static String shapeOf(byte[] value, byte[] metadata) {
      Type type = VariantUtil.getType(value, 0);
      if (type != Type.OBJECT) return type.name();
      StringBuilder names = new StringBuilder();
      for (int id : fieldIds(value)) {
        if (names.length() > 0) names.append(',');
        names.append(VariantUtil.getMetadataKey(metadata, id));
      }
      return names.toString();
    }
  }
}
