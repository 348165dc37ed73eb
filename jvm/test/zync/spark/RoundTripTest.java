package zync.spark;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.math.BigDecimal;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import org.apache.avro.Conversions;
import org.apache.avro.LogicalTypes;
import org.apache.avro.Schema;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericDatumWriter;
import org.apache.avro.generic.GenericRecord;
import org.apache.avro.io.BinaryEncoder;
import org.apache.avro.io.EncoderFactory;
import org.apache.spark.unsafe.types.VariantVal;
import org.junit.jupiter.api.Test;

/**
 * Ingest decodes a message into a VARIANT and to-kafka encodes the VARIANT back: for a value the
 * sink's schema describes, the bytes that come out are the bytes that went in.
 */
class RoundTripTest {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final int SCHEMA_ID = 42;
  private static final String INVOICE =
      "{\"type\":\"record\",\"name\":\"Invoice\",\"fields\":["
          + "{\"name\":\"id\",\"type\":\"long\"},"
          + "{\"name\":\"customer\",\"type\":[\"null\",\"string\"],\"default\":null},"
          + "{\"name\":\"paid\",\"type\":\"boolean\"},"
          + "{\"name\":\"total\",\"type\":{\"type\":\"bytes\",\"logicalType\":\"decimal\",\"precision\":10,\"scale\":2}},"
          + "{\"name\":\"due\",\"type\":{\"type\":\"int\",\"logicalType\":\"date\"}},"
          + "{\"name\":\"lines\",\"type\":{\"type\":\"array\",\"items\":\"string\"}}]}";

  @Test
  void avroRoundTripGivesTheSameBytes() throws IOException {
    Schema schema = new Schema.Parser().parse(INVOICE);
    byte[] framed = framed(schema, invoice(schema, "Ada", "1234.50"));

    VariantVal variant = new AvroToVariant().call(framed, schemaList(schema));
    byte[] encoded = new VariantToAvro().call(variant, encoders(schema));

    assertArrayEquals(framed, encoded);
  }

  @Test
  void avroNullUnionBranchRoundTrips() throws IOException {
    Schema schema = new Schema.Parser().parse(INVOICE);
    byte[] framed = framed(schema, invoice(schema, null, "0.01"));

    VariantVal variant = new AvroToVariant().call(framed, schemaList(schema));

    assertArrayEquals(framed, new VariantToAvro().call(variant, encoders(schema)));
  }

  @Test
  void aTruncatedAvroMessageDecodesToNullAndSaysWhy() throws IOException {
    Schema schema = new Schema.Parser().parse(INVOICE);
    byte[] framed = framed(schema, invoice(schema, "Ada", "1.00"));
    byte[] truncated = Arrays.copyOf(framed, framed.length - 3);

    assertNull(new AvroToVariant().call(truncated, schemaList(schema)));
    assertEquals("the message ends too early", new AvroToVariant.Error().call(truncated, schemaList(schema)));
    assertEquals(SCHEMA_ID, new AvroToVariant.SchemaId().call(framed));
  }

  @Test
  void connectJsonRoundTripGivesTheSameDocument() throws IOException {
    String schema =
        "{\"type\":\"struct\",\"optional\":false,\"fields\":["
            + "{\"field\":\"id\",\"type\":\"int64\",\"optional\":false},"
            + "{\"field\":\"name\",\"type\":\"string\",\"optional\":true},"
            + "{\"field\":\"due\",\"type\":\"int32\",\"optional\":false,\"name\":\"org.apache.kafka.connect.data.Date\",\"version\":1},"
            + "{\"field\":\"total\",\"type\":\"bytes\",\"optional\":false,\"name\":\"org.apache.kafka.connect.data.Decimal\",\"version\":1,\"parameters\":{\"scale\":\"2\"}}]}";
    String payload = "{\"id\":7,\"name\":\"Grace\",\"due\":20000,\"total\":\"AeI=\"}";
    byte[] message = ("{\"schema\":" + schema + ",\"payload\":" + payload + "}").getBytes(StandardCharsets.UTF_8);

    VariantVal variant = ConnectJsonToVariant.decode(message);
    ObjectNode list = JsonNodeFactory.instance.objectNode();
    list.putArray("other").add("json").add(schema);
    byte[] encoded = new VariantToAvro().call(variant, JSON.writeValueAsBytes(list));

    assertEquals(JSON.readTree(message), JSON.readTree(encoded));
  }

  @Test
  void aValueTheSinkSchemaCannotHoldIsAnErrorNotDropped() throws IOException {
    Schema schema = new Schema.Parser().parse(INVOICE);
    byte[] framed = framed(schema, invoice(schema, "Ada", "1.00"));
    VariantVal variant = new AvroToVariant().call(framed, schemaList(schema));
    Schema narrower = new Schema.Parser().parse(INVOICE.replace(",{\"name\":\"paid\",\"type\":\"boolean\"}", ""));

    assertThrows(RuntimeException.class, () -> new VariantToAvro().call(variant, encoders(narrower)));
  }

  private static GenericRecord invoice(Schema schema, String customer, String total) {
    GenericRecord record = new GenericData.Record(schema);
    record.put("id", 1001L);
    record.put("customer", customer);
    record.put("paid", true);
    Schema decimal = schema.getField("total").schema();
    record.put("total", new Conversions.DecimalConversion().toBytes(
        new BigDecimal(total), decimal, LogicalTypes.decimal(10, 2)));
    record.put("due", 20000);
    record.put("lines", Arrays.asList("tea", "scones"));
    return record;
  }

  private static byte[] framed(Schema schema, GenericRecord record) throws IOException {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    bytes.write(ByteBuffer.allocate(5).put((byte) 0).putInt(SCHEMA_ID).array());
    BinaryEncoder encoder = EncoderFactory.get().binaryEncoder(bytes, null);
    new GenericDatumWriter<GenericRecord>(schema).write(record, encoder);
    encoder.flush();
    return bytes.toByteArray();
  }

  private static byte[] schemaList(Schema schema) throws IOException {
    ObjectNode list = JsonNodeFactory.instance.objectNode();
    list.put(Integer.toString(SCHEMA_ID), schema.toString());
    return JSON.writeValueAsBytes(list);
  }

  private static byte[] encoders(Schema schema) throws IOException {
    ObjectNode list = JsonNodeFactory.instance.objectNode();
    list.putArray("other").add(SCHEMA_ID).add(schema.toString());
    return JSON.writeValueAsBytes(list);
  }
}
