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

  // A Debezium row image as its Avro converter registers it: each semantic type with its
  // connect.name (and parameters), so a mirror's output can carry the source's column types.
  private static final String DEBEZIUM_ROW =
      "{\"type\":\"record\",\"name\":\"Value\",\"namespace\":\"shop.public.typed\",\"fields\":["
          + "{\"name\":\"id\",\"type\":{\"type\":\"int\",\"connect.type\":\"int16\"}},"
          + "{\"name\":\"n32\",\"type\":[\"null\",\"int\"],\"default\":null},"
          + "{\"name\":\"f\",\"type\":[\"null\",\"float\"],\"default\":null},"
          + "{\"name\":\"d\",\"type\":[\"null\",{\"type\":\"int\",\"connect.version\":1,\"connect.name\":\"io.debezium.time.Date\"}],\"default\":null},"
          + "{\"name\":\"t3\",\"type\":[\"null\",{\"type\":\"int\",\"connect.name\":\"io.debezium.time.Time\"}],\"default\":null},"
          + "{\"name\":\"t6\",\"type\":[\"null\",{\"type\":\"long\",\"connect.name\":\"io.debezium.time.MicroTime\"}],\"default\":null},"
          + "{\"name\":\"ts3\",\"type\":[\"null\",{\"type\":\"long\",\"connect.name\":\"io.debezium.time.Timestamp\"}],\"default\":null},"
          + "{\"name\":\"ts6\",\"type\":[\"null\",{\"type\":\"long\",\"connect.name\":\"io.debezium.time.MicroTimestamp\"}],\"default\":null},"
          + "{\"name\":\"tstz\",\"type\":[\"null\",{\"type\":\"string\",\"connect.name\":\"io.debezium.time.ZonedTimestamp\"}],\"default\":null},"
          + "{\"name\":\"inf\",\"type\":[\"null\",{\"type\":\"string\",\"connect.name\":\"io.debezium.time.ZonedTimestamp\"}],\"default\":null},"
          + "{\"name\":\"n\",\"type\":[\"null\",{\"type\":\"bytes\",\"scale\":4,\"precision\":18,\"connect.parameters\":{\"scale\":\"4\",\"connect.decimal.precision\":\"18\"},\"connect.name\":\"org.apache.kafka.connect.data.Decimal\",\"logicalType\":\"decimal\"}],\"default\":null},"
          + "{\"name\":\"nv\",\"type\":[\"null\",{\"type\":\"record\",\"name\":\"VariableScaleDecimal\",\"namespace\":\"io.debezium.data\",\"fields\":[{\"name\":\"scale\",\"type\":\"int\"},{\"name\":\"value\",\"type\":\"bytes\"}],\"connect.name\":\"io.debezium.data.VariableScaleDecimal\"}],\"default\":null},"
          + "{\"name\":\"jb\",\"type\":[\"null\",{\"type\":\"string\",\"connect.name\":\"io.debezium.data.Json\"}],\"default\":null},"
          + "{\"name\":\"u\",\"type\":[\"null\",{\"type\":\"string\",\"connect.name\":\"io.debezium.data.Uuid\"}],\"default\":null},"
          + "{\"name\":\"e\",\"type\":[\"null\",{\"type\":\"string\",\"connect.parameters\":{\"allowed\":\"sad,ok,happy\"},\"connect.name\":\"io.debezium.data.Enum\"}],\"default\":null},"
          + "{\"name\":\"texts\",\"type\":[\"null\",{\"type\":\"array\",\"items\":[\"null\",\"string\"]}],\"default\":null},"
          + "{\"name\":\"gone\",\"type\":[\"null\",\"string\"],\"default\":null}]}";

  @Test
  void aDebeziumRowRoundTripsInItsOwnSchema() throws IOException {
    Schema schema = new Schema.Parser().parse(DEBEZIUM_ROW);
    GenericRecord row = new GenericData.Record(schema);
    row.put("id", 7);
    row.put("n32", -2_000_000_000);
    row.put("f", 1.5f);
    row.put("d", 19_000);
    row.put("t3", 34_200_123);
    row.put("t6", 34_200_123_456L);
    row.put("ts3", 1_714_979_289_123L);
    row.put("ts6", 1_714_979_289_123_456L);
    row.put("tstz", "2024-05-06T05:08:09.5Z");
    row.put("inf", "infinity");
    Schema decimal = schema.getField("n").schema().getTypes().get(1);
    row.put("n", new Conversions.DecimalConversion().toBytes(
        new BigDecimal("1234.5600"), decimal, LogicalTypes.decimal(18, 4)));
    GenericRecord variable = new GenericData.Record(schema.getField("nv").schema().getTypes().get(1));
    variable.put("scale", 14);
    variable.put("value", ByteBuffer.wrap(new BigDecimal("3.14159265358979").unscaledValue().toByteArray()));
    row.put("nv", variable);
    row.put("jb", "{\"a\":[1,2.5,null],\"b\":{\"c\":\"x\"}}");
    row.put("u", "00000000-0000-0000-0000-000000000007");
    row.put("e", "happy");
    row.put("texts", Arrays.asList("a", null, "b c"));
    row.put("gone", null);
    byte[] framed = framed(schema, row);

    VariantVal variant = new AvroToVariant().call(framed, schemaList(schema));

    assertArrayEquals(framed, new VariantToAvro().call(variant, encoders(schema)));
  }

  @Test
  void aJsonNullDocumentAndSqlNullStayApartBothWays() throws IOException {
    Schema schema = new Schema.Parser().parse(DEBEZIUM_ROW);
    GenericRecord document = new GenericData.Record(schema);
    document.put("id", 1);
    document.put("jb", "null"); // 'null'::jsonb
    GenericRecord sqlNull = new GenericData.Record(schema);
    sqlNull.put("id", 2);
    sqlNull.put("jb", null);

    VariantVal fromDocument = new AvroToVariant().call(framed(schema, document), schemaList(schema));
    VariantVal fromSqlNull = new AvroToVariant().call(framed(schema, sqlNull), schemaList(schema));

    assertEquals(org.apache.spark.types.variant.VariantUtil.Type.NULL,
        variant(fromDocument).getFieldByKey("jb").getType());
    assertNull(variant(fromSqlNull).getFieldByKey("jb"));
    assertArrayEquals(framed(schema, document), new VariantToAvro().call(fromDocument, encoders(schema)));
    assertArrayEquals(framed(schema, sqlNull), new VariantToAvro().call(fromSqlNull, encoders(schema)));
  }

  @Test
  void aConnectJsonNullDocumentAndSqlNullStayApartBothWays() throws IOException {
    String schema =
        "{\"type\":\"struct\",\"optional\":false,\"fields\":["
            + "{\"field\":\"id\",\"type\":\"int64\",\"optional\":false},"
            + "{\"field\":\"doc\",\"type\":\"string\",\"optional\":true,\"name\":\"io.debezium.data.Json\",\"version\":1},"
            + "{\"field\":\"none\",\"type\":\"string\",\"optional\":true,\"name\":\"io.debezium.data.Json\",\"version\":1},"
            + "{\"field\":\"nested\",\"type\":\"string\",\"optional\":true,\"name\":\"io.debezium.data.Json\",\"version\":1}]}";
    String payload = "{\"id\":7,\"doc\":\"null\",\"none\":null,\"nested\":\"{\\\"a\\\":null,\\\"b\\\":[null,1]}\"}";
    byte[] message = ("{\"schema\":" + schema + ",\"payload\":" + payload + "}").getBytes(StandardCharsets.UTF_8);

    VariantVal decoded = ConnectJsonToVariant.decode(message);
    ObjectNode list = JsonNodeFactory.instance.objectNode();
    list.putArray("other").add("json").add(schema);
    byte[] encoded = new VariantToAvro().call(decoded, JSON.writeValueAsBytes(list));

    assertEquals(org.apache.spark.types.variant.VariantUtil.Type.NULL, variant(decoded).getFieldByKey("doc").getType());
    assertNull(variant(decoded).getFieldByKey("none"));
    assertEquals(JSON.readTree(message), JSON.readTree(encoded));
  }

  private static org.apache.spark.types.variant.Variant variant(VariantVal value) {
    return new org.apache.spark.types.variant.Variant(value.getValue(), value.getMetadata());
  }

  @Test
  void aValueOutsideItsDeclaredIntegerIsAnError() throws IOException {
    Schema wide = new Schema.Parser().parse(DEBEZIUM_ROW.replace("\"connect.type\":\"int16\"", "\"connect.type\":\"int32\""));
    GenericRecord row = new GenericData.Record(wide);
    row.put("id", 70_000);
    row.put("texts", null);
    VariantVal variant = new AvroToVariant().call(framed(wide, row), schemaList(wide));

    RuntimeException error = assertThrows(RuntimeException.class, () -> new VariantToAvro().call(variant, encoders(
        new Schema.Parser().parse(DEBEZIUM_ROW))));
    assertEquals("zync to-kafka: field id holds a LONG value where its Avro schema has an int of -32768..32767, not 70000",
        error.getMessage());
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
