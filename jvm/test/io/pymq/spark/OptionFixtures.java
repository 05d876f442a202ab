package io.pymq.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.File;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Replays option fixtures (tests/spark/fixtures/read_options.json) through {@link ReadOptions},
 * without Spark: prints, for every case, what the options parsed to or the error's message, as
 * JSON. tests/spark/test_option_fixtures.py compares that, and format("pymq")'s parse of the
 * same cases, with what each case expects.
 *
 * <p>java -cp pymq-spark.jar:test-classes:pyspark/jars/* io.pymq.spark.OptionFixtures FILE
 */
public final class OptionFixtures {
  private static final ObjectMapper JSON = new ObjectMapper();

  private OptionFixtures() {}

  public static void main(String[] args) throws Exception {
    JsonNode cases = JSON.readTree(new File(args[0]));
    ArrayNode out = JSON.createArrayNode();
    for (JsonNode c : cases) {
      Map<String, String> options = new LinkedHashMap<>();
      for (Map.Entry<String, JsonNode> e : c.get("options").properties()) {
        options.put(e.getKey(), e.getValue().asText());
      }
      ObjectNode result = out.addObject();
      result.put("name", c.get("name").asText());
      try {
        result.set("parsed", view(new ReadOptions(options)));
      } catch (IllegalArgumentException e) {
        result.put("error", e.getMessage());
      }
    }
    System.out.println(JSON.writeValueAsString(out));
  }

  /** The parse, in the shape the fixtures name (format("pymq")'s test builds the same). */
  static ObjectNode view(ReadOptions o) {
    ObjectNode v = JSON.createObjectNode();
    v.put("namesrv", o.namesrv);
    v.set("topics", JSON.valueToTree(o.topics));
    v.put("subscribePattern", o.pattern);
    v.set("assign", JSON.valueToTree(o.assign));
    v.set("startingOffsets", JSON.valueToTree(o.starting));
    v.set("endingOffsets", JSON.valueToTree(o.ending));
    v.set("startingTimestamp", JSON.valueToTree(o.startingTimestamp));
    v.set("startingOffsetsByTimestamp", JSON.valueToTree(o.startingByTimestamp));
    v.put("startingOffsetsByTimestampStrategy", o.startLatestPastEnd ? "latest" : "error");
    v.set("endingTimestamp", JSON.valueToTree(o.endingTimestamp));
    v.set("endingOffsetsByTimestamp", JSON.valueToTree(o.endingByTimestamp));
    v.put("tags", o.tags);
    v.put("failOnDataLoss", o.failOnDataLoss);
    v.put("pullBatchSize", o.pullBatchSize);
    v.put("minPartitions", o.minPartitions);
    v.set("maxRecordsPerPartition", JSON.valueToTree(o.maxRecordsPerPartition));
    v.put("consumerGroup", o.consumerGroup);
    v.put("signed", o.signer != null);
    v.put("tls", o.tls != null);
    return v;
  }
}
