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
import org.apache.spark.types.variant.Variant;
import org.apache.spark.types.variant.VariantUtil.Type;
import org.apache.spark.unsafe.types.VariantVal;

/**
 * {@code zync_variant_avro(v, schemas)}: a VARIANT value as Confluent-framed Avro (magic byte 0,
 * the 4-byte schema id, the Avro body), NULL for SQL NULL and for a variant null (a tombstone).
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
    Variant variant = new Variant(value.getValue(), value.getMetadata());
    if (variant.getType() == Type.NULL) return null;
    Encoder encoder = encoders(schemas).pick(variant);
    if (out == null) out = new AvroOut();
    out.reset();
    out.raw(encoder.frame);
    encoder.writer.write(variant, out);
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
    Encoders parsed = Encoders.parse(new String(schemas, StandardCharsets.UTF_8));
    seenSchemas.add(schemas.clone());
    seenEncoders.add(parsed);
    return parsed;
  }

  private record Encoder(byte[] frame, VariantAvroWriter writer) {
    static Encoder parse(JsonNode idAndSchema) {
      int id = idAndSchema.get(0).asInt();
      Schema schema = new Schema.Parser().parse(idAndSchema.get(1).asText());
      byte[] frame = {0, (byte) (id >>> 24), (byte) (id >>> 16), (byte) (id >>> 8), (byte) id};
      return new Encoder(frame, VariantAvroWriter.of(schema));
    }
  }

  private record Encoders(Map<String, Encoder> objects, Encoder other) {
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

    Encoder pick(Variant variant) {
      Encoder encoder = other;
      if (variant.getType() == Type.OBJECT && !objects.isEmpty()) {
        encoder = objects.get(shapeOf(variant));
      }
      if (encoder == null) {
        throw new IllegalArgumentException(
            "zync to-kafka: no schema was registered for a value of shape " + shapeOf(variant));
      }
      return encoder;
    }

    private static String shapeOf(Variant variant) {
      if (variant.getType() != Type.OBJECT) return variant.getType().name();
      StringBuilder names = new StringBuilder();
      for (int i = 0, n = variant.objectSize(); i < n; i++) {
        if (i > 0) names.append(',');
        names.append(variant.getFieldAtIndex(i).key);
      }
      return names.toString();
    }
  }
}
