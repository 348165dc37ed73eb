package zync.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.EOFException;
import java.io.IOException;
import java.io.Serializable;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import org.apache.avro.Schema;
import org.apache.avro.io.BinaryDecoder;
import org.apache.avro.io.DecoderFactory;
import org.apache.spark.sql.api.java.UDF1;
import org.apache.spark.sql.api.java.UDF2;
import org.apache.spark.types.variant.Variant;
import org.apache.spark.types.variant.VariantBuilder;
import org.apache.spark.unsafe.types.VariantVal;

/**
 * {@code zync_avro_variant(bytes, schemas)}: a Confluent-framed Avro message (magic byte 0, the
 * 4-byte schema id, the Avro body) decoded with its own writer schema into a VARIANT, the same
 * variant {@code to_variant_object(from_avro(..))} gives (see {@link AvroVariantReader}), in one
 * pass and without a Spark struct in between.
 *
 * <p>{@code schemas} is UTF-8 JSON (a BINARY literal): {@code {"<id>": "<avro schema>", ...}}.
 * The result is NULL when the bytes are NULL, not framed, name an id not in {@code schemas}, or
 * do not decode; the caller tells these apart (ingest/decode.py), and asks {@link Error} why a
 * listed id's message did not decode.
 */
public final class AvroToVariant implements UDF2<byte[], byte[], VariantVal> {
  private static final long serialVersionUID = 1L;
  private final Decoding decoding = new Decoding();

  @Override
  public VariantVal call(byte[] message, byte[] schemas) {
    try {
      return decoding.decode(message, schemas);
    } catch (IOException | RuntimeException | StackOverflowError corrupt) {
      return null;
    }
  }

  /**
   * {@code zync_avro_error(bytes, schemas)}: why {@code zync_avro_variant} gives NULL for a message
   * of a listed schema id, in a few words; NULL when it decodes.
   */
  public static final class Error implements UDF2<byte[], byte[], String> {
    private static final long serialVersionUID = 1L;
    private final Decoding decoding = new Decoding();

    @Override
    public String call(byte[] message, byte[] schemas) {
      try {
        decoding.decode(message, schemas);
        return null;
      } catch (EOFException e) {
        return "the message ends too early";
      } catch (StackOverflowError e) {
        return "records nested too deeply";
      } catch (IOException | RuntimeException e) {
        return e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage();
      }
    }
  }

  /**
   * {@code zync_schema_id(bytes)}: the schema id of a Confluent-framed message; NULL for NULL or
   * empty bytes (a tombstone), -1 for bytes without the header.
   */
  public static final class SchemaId implements UDF1<byte[], Long> {
    private static final long serialVersionUID = 1L;

    @Override
    public Long call(byte[] message) {
      if (message == null || message.length == 0) return null;
      if (message.length < 5 || message[0] != 0) return -1L;
      return (long) schemaId(message);
    }
  }

  static int schemaId(byte[] framed) {
    return (framed[1] & 0xff) << 24 | (framed[2] & 0xff) << 16 | (framed[3] & 0xff) << 8
        | (framed[4] & 0xff);
  }

  /** The readers for a task's schema list (a literal: parsed on the first row, then compared). */
  private static final class Decoding implements Serializable {
    private static final long serialVersionUID = 1L;
    private static final ObjectMapper JSON = new ObjectMapper();
    private transient byte[] seenSchemas;
    private transient Map<Integer, AvroVariantReader> readers;
    private transient BinaryDecoder decoder;

    VariantVal decode(byte[] message, byte[] schemas) throws IOException {
      if (message == null || message.length < 5 || message[0] != 0) return null;
      AvroVariantReader reader = readers(schemas).get(schemaId(message));
      if (reader == null) return null;
      decoder = DecoderFactory.get().binaryDecoder(message, 5, message.length - 5, decoder);
      VariantBuilder builder = new VariantBuilder(false);
      reader.read(decoder, builder);
      int left = decoder.inputStream().available();
      if (left > 0) throw new IOException(left + " bytes are left after the value");
      Variant variant = builder.result();
      return new VariantVal(variant.getValue(), variant.getMetadata());
    }

    private Map<Integer, AvroVariantReader> readers(byte[] schemas) {
      if (schemas != seenSchemas && !Arrays.equals(schemas, seenSchemas)) {
        readers = parse(new String(schemas, StandardCharsets.UTF_8));
        seenSchemas = schemas;
      }
      return readers;
    }

    private static Map<Integer, AvroVariantReader> parse(String text) {
      JsonNode root;
      try {
        root = JSON.readTree(text);
      } catch (IOException e) {
        throw new UncheckedIOException("zync ingest: unreadable schema list " + text, e);
      }
      Map<Integer, AvroVariantReader> parsed = new HashMap<>();
      for (Map.Entry<String, JsonNode> entry : root.properties()) {
        parsed.put(Integer.parseInt(entry.getKey()), reader(entry.getValue().asText()));
      }
      return parsed;
    }

    /** A schema that cannot be read fails each of its messages (dead letters), not the job. */
    private static AvroVariantReader reader(String schema) {
      try {
        return AvroVariantReader.of(new Schema.Parser().parse(schema));
      } catch (RuntimeException e) {
        String why = "its writer schema cannot be read: " + e.getMessage();
        return (in, out) -> {
          throw new IllegalStateException(why);
        };
      }
    }
  }
}
