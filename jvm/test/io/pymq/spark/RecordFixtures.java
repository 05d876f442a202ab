package io.pymq.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.File;
import java.util.Base64;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.catalyst.util.MapData;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * Replays record fixtures (tests/spark/fixtures/records.json: pull answers, the stored records
 * byte for byte) through {@link Columns}, without Spark: prints the rows each answer decodes to,
 * as JSON, in the fixtures' form. tests/spark/test_option_fixtures.py compares them, and
 * format("pymq")'s decoding of the same answers, with the rows each case expects.
 *
 * <p>java -cp pymq-spark.jar:test-classes:pyspark/jars/* io.pymq.spark.RecordFixtures FILE
 */
public final class RecordFixtures {
  private static final ObjectMapper JSON = new ObjectMapper();

  private RecordFixtures() {}

  public static void main(String[] args) throws Exception {
    ArrayNode out = JSON.createArrayNode();
    for (JsonNode c : JSON.readTree(new File(args[0]))) {
      String tags = c.get("tags").isNull() ? null : c.get("tags").asText();
      QueueRange range = new QueueRange(c.get("topic").asText(), c.get("brokerName").asText(),
          c.get("queueId").asInt(), 0, c.get("end").asLong(), new String[0]);
      byte[] data = Base64.getDecoder().decode(c.get("records").asText());
      ObjectNode result = out.addObject();
      result.put("name", c.get("name").asText());
      ArrayNode rows = result.putArray("rows");
      try (Columns columns = new Columns(PyMQJvmSource.READ_SCHEMA, range, Columns.parseTags(tags), 4)) {
        ColumnarBatch batch = columns.fill(data, c.get("end").asLong());
        for (int i = 0; i < batch.numRows(); i++) {
          rows.add(row(batch.getRow(i)));
        }
      }
    }
    System.out.println(JSON.writeValueAsString(out));
  }

  private static ObjectNode row(InternalRow r) {
    ObjectNode v = JSON.createObjectNode();
    v.put("topic", r.getUTF8String(0).toString());
    v.put("brokerName", r.getUTF8String(1).toString());
    v.put("queueId", r.getInt(2));
    v.put("queueOffset", r.getLong(3));
    v.put("msgId", r.getUTF8String(4).toString());
    v.put("tags", r.isNullAt(5) ? null : r.getUTF8String(5).toString());
    v.put("keys", r.isNullAt(6) ? null : r.getUTF8String(6).toString());
    v.put("body", Base64.getEncoder().encodeToString(r.getBinary(7)));
    ArrayNode props = v.putArray("properties");
    MapData map = r.getMap(8);
    ArrayData names = map.keyArray();
    ArrayData values = map.valueArray();
    for (int k = 0; k < map.numElements(); k++) {
      ArrayNode pair = props.addArray();
      pair.add(names.getUTF8String(k).toString());
      pair.add(values.getUTF8String(k).toString());
    }
    v.put("bornTimestamp", r.getLong(9));
    v.put("storeTimestamp", r.getLong(10));
    return v;
  }
}
