package io.pymq.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Pattern;
import java.util.regex.PatternSyntaxException;

/**
 * The batch read options of {@code format("pymq-jvm")}: the names, defaults and checks of
 * {@code format("pymq")}'s (connector/spark/options.py), so a read moves between the two by
 * its format name alone. Spark hands options over lower-cased; an unknown name is refused
 * naming the closest known one.
 */
public final class ReadOptions implements Serializable {
  private static final long serialVersionUID = 1L;
  private static final ObjectMapper JSON = new ObjectMapper();

  // the option names, from the file format("pymq")'s options.py loads too
  // (connector/spark/options.json, copied into the jar by `make jar`)
  private static final JsonNode NAMES = names();
  static final List<String> READ = list("read");
  static final List<String> WRITE = list("write");
  static final List<String> SPARK = list("spark");

  private static JsonNode names() {
    try (java.io.InputStream in = ReadOptions.class.getResourceAsStream("options.json")) {
      if (in == null) {
        throw new IllegalStateException("options.json is missing from the pymq jar: run make jar");
      }
      return JSON.readTree(in);
    } catch (java.io.IOException e) {
      throw new IllegalStateException("options.json in the pymq jar cannot be read", e);
    }
  }

  private static List<String> list(String kind) {
    List<String> out = new ArrayList<>();
    for (JsonNode n : NAMES.get(kind)) {
      out.add(n.asText());
    }
    return Collections.unmodifiableList(out);
  }

  final String namesrv;
  final Signer signer; // requests signed with accessKey / secretKey, or null
  final Tls tls; // options tls / tlsCaFile, or null: plaintext
  final List<String> topics; // empty when pattern or assign says what to read
  final String pattern; // subscribePattern (java.util.regex, whole topic name)
  final Map<String, Map<String, Set<Integer>>> assign; // topic -> broker -> queue ids
  final Object starting; // "earliest" | "latest" | JSON offsets (topic -> broker -> queue -> n)
  final Object ending;
  final Long startingTimestamp;
  final Map<String, Map<String, Map<Integer, Long>>> startingByTimestamp;
  final boolean startLatestPastEnd; // startingOffsetsByTimestampStrategy=latest
  final Long endingTimestamp;
  final Map<String, Map<String, Map<Integer, Long>>> endingByTimestamp;
  final String tags;
  final boolean failOnDataLoss;
  final int pullBatchSize;
  final int minPartitions;
  final Long maxRecordsPerPartition;
  final String consumerGroup;

  private final Map<String, String> given;

  ReadOptions(Map<String, String> options) {
    given = new TreeMap<>(String.CASE_INSENSITIVE_ORDER);
    given.putAll(options);
    checkNames();
    List<String> what = new ArrayList<>();
    for (String n : List.of("topic", "subscribePattern", "assign")) {
      if (get(n) != null) {
        what.add(n);
      }
    }
    if (what.size() != 1) {
      throw bad("give exactly one of the options topic, subscribePattern, assign ("
          + (what.isEmpty() ? "none" : String.join(" and ", what)) + " given)");
    }
    String accessKey = get("accessKey");
    String secretKey = get("secretKey");
    if ((accessKey == null || accessKey.isEmpty()) != (secretKey == null || secretKey.isEmpty())) {
      throw bad("options accessKey and secretKey go together: give both or neither");
    }
    signer = accessKey == null || accessKey.isEmpty() ? null : new Signer(accessKey, secretKey);
    String caFile = get("tlsCaFile");
    boolean useTls = bool("tls", false);
    if (caFile != null && !caFile.isEmpty() && !useTls) {
      throw bad("option tlsCaFile is set but tls is not: set tls to true too");
    }
    tls = useTls ? new Tls(caFile) : null;
    String ns = get("namesrv");
    if (ns == null || ns.isBlank()) {
      ns = System.getenv("PYMQ_NAMESRV");
    }
    if (ns == null || ns.isBlank()) {
      throw bad("option namesrv is required (or set PYMQ_NAMESRV)");
    }
    namesrv = ns;
    topics = topicList();
    pattern = patternOption();
    assign = assignOption();
    starting = offsets("startingOffsets", "earliest");
    ending = offsets("endingOffsets", "latest");
    startingTimestamp = msOrNull("startingTimestamp");
    startingByTimestamp = perQueueMs("startingOffsetsByTimestamp");
    String strategy = get("startingOffsetsByTimestampStrategy");
    strategy = strategy == null ? "error" : strategy.toLowerCase(Locale.ROOT);
    if (!strategy.equals("error") && !strategy.equals("latest")) {
      throw bad("option startingOffsetsByTimestampStrategy: error or latest, not '" + strategy + "'");
    }
    startLatestPastEnd = strategy.equals("latest");
    endingTimestamp = msOrNull("endingTimestamp");
    endingByTimestamp = perQueueMs("endingOffsetsByTimestamp");
    tags = get("tags");
    failOnDataLoss = bool("failOnDataLoss", true);
    pullBatchSize = (int) integer("pullBatchSize", 5000, 1, Integer.MAX_VALUE);
    minPartitions = (int) integer("minPartitions", 1, 1, Integer.MAX_VALUE);
    maxRecordsPerPartition =
        get("maxRecordsPerPartition") == null ? null : integer("maxRecordsPerPartition", 1, 1, Long.MAX_VALUE);
    consumerGroup = get("consumerGroup");
    if (consumerGroup != null) {
      Names.check("group", consumerGroup);
    }
    // stream-only options are checked as format("pymq") checks them, then unused by a batch
    for (String n : List.of("maxMessagesPerTrigger", "maxOffsetsPerTrigger", "minMessagesPerTrigger",
        "minOffsetsPerTrigger", "maxBytesPerTrigger")) {
      integer(n, 1, 1, Long.MAX_VALUE);
    }
    oneOf("maxMessagesPerTrigger", "maxOffsetsPerTrigger");
    oneOf("minMessagesPerTrigger", "minOffsetsPerTrigger");
    String delay = get("maxTriggerDelay");
    if (delay != null && !DURATION.matcher(delay.toLowerCase(Locale.ROOT)).matches()) {
      throw bad("option maxTriggerDelay: '" + delay + "' is not a duration like 500ms, 30s, 15m, 1h");
    }
  }

  private static final Pattern DURATION = Pattern.compile("\\s*(\\d+)\\s*(ms|s|m|min|h|d)?\\s*");

  /** A name and its Kafka alias are the same option: giving both is an error. */
  private void oneOf(String name, String alias) {
    if (get(name) != null && get(alias) != null) {
      throw bad("options " + name + " and " + alias + " are the same; give one");
    }
  }

  String group() {
    return consumerGroup == null ? "pymq-spark-reader" : consumerGroup;
  }

  static IllegalArgumentException bad(String message) {
    return new IllegalArgumentException(message);
  }

  private String get(String name) {
    return given.get(name);
  }

  private void checkNames() {
    Map<String, String> known = new LinkedHashMap<>();
    for (List<String> names : List.of(READ, WRITE, SPARK)) {
      for (String n : names) {
        known.putIfAbsent(n.toLowerCase(Locale.ROOT), n);
      }
    }
    for (String key : given.keySet()) {
      String name = known.get(key.toLowerCase(Locale.ROOT));
      if (name == null) {
        String close = closest(key.toLowerCase(Locale.ROOT), known.keySet());
        throw bad("option " + key + " is not a pymq read option"
            + (close == null ? "" : "; did you mean " + known.get(close) + "?"));
      }
    }
  }

  /** The known name most like {@code key} (at least 0.6 alike, as Python's difflib), or null. */
  static String closest(String key, Iterable<String> known) {
    String best = null;
    double bestScore = 0.6;
    for (String k : known) {
      int d = distance(key, k);
      double score = 1.0 - (double) d / Math.max(key.length(), k.length());
      if (score >= bestScore) {
        best = k;
        bestScore = score;
      }
    }
    return best;
  }

  private static int distance(String a, String b) {
    int[] prev = new int[b.length() + 1];
    int[] cur = new int[b.length() + 1];
    for (int j = 0; j <= b.length(); j++) {
      prev[j] = j;
    }
    for (int i = 1; i <= a.length(); i++) {
      cur[0] = i;
      for (int j = 1; j <= b.length(); j++) {
        int cost = a.charAt(i - 1) == b.charAt(j - 1) ? 0 : 1;
        cur[j] = Math.min(Math.min(cur[j - 1] + 1, prev[j] + 1), prev[j - 1] + cost);
      }
      int[] t = prev;
      prev = cur;
      cur = t;
    }
    return prev[b.length()];
  }

  private boolean bool(String name, boolean dflt) {
    String raw = get(name);
    if (raw == null) {
      return dflt;
    }
    switch (raw.toLowerCase(Locale.ROOT)) {
      case "true": case "1": case "yes":
        return true;
      case "false": case "0": case "no":
        return false;
      default:
        throw bad("option " + name + ": '" + raw + "' is not true or false");
    }
  }

  private long integer(String name, long dflt, long low, long high) {
    String raw = get(name);
    if (raw == null) {
      return dflt;
    }
    long v;
    try {
      v = Long.parseLong(raw.trim());
    } catch (NumberFormatException e) {
      throw bad("option " + name + ": '" + raw + "' is not an integer");
    }
    if (v < low) {
      throw bad("option " + name + " must be >= " + low);
    }
    if (v > high) {
      throw bad("option " + name + " must be <= " + high);
    }
    return v;
  }

  private Long msOrNull(String name) {
    return get(name) == null ? null : integer(name, 0, 0, Long.MAX_VALUE);
  }

  private List<String> topicList() {
    String raw = get("topic");
    if (raw == null) {
      return List.of();
    }
    List<String> out = new ArrayList<>();
    for (String t : raw.split(",")) {
      if (!t.isBlank()) {
        out.add(Names.check("topic", t.trim()));
      }
    }
    if (out.isEmpty()) {
      throw bad("option topic: a comma-separated list of topics, not empty");
    }
    return Collections.unmodifiableList(out);
  }

  private String patternOption() {
    String raw = get("subscribePattern");
    if (raw == null) {
      return null;
    }
    try {
      Pattern.compile(raw);
    } catch (PatternSyntaxException e) {
      throw bad("option subscribePattern: '" + raw + "' is not a regex (" + e.getDescription() + ")");
    }
    return raw;
  }

  private static JsonNode json(String raw) {
    try {
      return JSON.readTree(raw);
    } catch (Exception e) {
      return null;
    }
  }

  private Map<String, Map<String, Set<Integer>>> assignOption() {
    String raw = get("assign");
    if (raw == null) {
      return null;
    }
    String shape = "option assign: JSON like {\"T\": {\"broker-a\": [0, 1]}}, not '" + raw + "'";
    JsonNode root = json(raw);
    if (root == null || !root.isObject() || root.size() == 0) {
      throw bad(shape);
    }
    Map<String, Map<String, Set<Integer>>> out = new TreeMap<>();
    for (Map.Entry<String, JsonNode> t : iterable(root)) {
      if (!t.getValue().isObject() || t.getValue().size() == 0) {
        throw bad(shape);
      }
      Map<String, Set<Integer>> brokers = new TreeMap<>();
      for (Map.Entry<String, JsonNode> b : iterable(t.getValue())) {
        JsonNode qs = b.getValue();
        if (!qs.isArray() || qs.size() == 0) {
          throw bad(shape);
        }
        Set<Integer> ids = new TreeSet<>();
        for (JsonNode q : qs) {
          if (!q.isIntegralNumber() || q.asLong() < 0 || q.asLong() > Integer.MAX_VALUE) {
            throw bad(shape);
          }
          ids.add(q.asInt());
        }
        brokers.put(b.getKey(), ids);
      }
      out.put(Names.check("topic", t.getKey()), brokers);
    }
    return out;
  }

  /** "earliest" | "latest" | topic -> broker -> queue id -> offset. */
  private Object offsets(String name, String dflt) {
    String raw = get(name);
    raw = (raw == null ? dflt : raw).trim();
    if (raw.equals("earliest") || raw.equals("latest")) {
      return raw;
    }
    JsonNode root = json(raw);
    if (root == null) {
      throw bad("option " + name + ": earliest, latest or JSON offsets, not '" + raw + "'");
    }
    Map<String, Map<String, Map<Integer, Long>>> out = perQueue(name, root, false);
    if (out == null) {
      throw bad("option " + name + ": JSON must look like {\"T\": {\"broker-a\": {\"0\": 42}}}");
    }
    return out;
  }

  private Map<String, Map<String, Map<Integer, Long>>> perQueueMs(String name) {
    String raw = get(name);
    if (raw == null) {
      return null;
    }
    JsonNode root = json(raw.trim());
    Map<String, Map<String, Map<Integer, Long>>> out = root == null ? null : perQueue(name, root, true);
    if (out == null) {
      throw bad("option " + name + ": JSON of timestamps in ms, like {\"T\": {\"broker-a\": {\"0\": 0}}}");
    }
    return out;
  }

  /** topic -> broker -> queue id -> number, or null when {@code root} is not of that shape. */
  private static Map<String, Map<String, Map<Integer, Long>>> perQueue(
      String name, JsonNode root, boolean nonNegative) {
    if (!root.isObject()) {
      return null;
    }
    Map<String, Map<String, Map<Integer, Long>>> out = new TreeMap<>();
    for (Map.Entry<String, JsonNode> t : iterable(root)) {
      if (!t.getValue().isObject()) {
        return null;
      }
      Map<String, Map<Integer, Long>> brokers = new TreeMap<>();
      for (Map.Entry<String, JsonNode> b : iterable(t.getValue())) {
        if (!b.getValue().isObject()) {
          return null;
        }
        Map<Integer, Long> queues = new TreeMap<>();
        for (Map.Entry<String, JsonNode> q : iterable(b.getValue())) {
          JsonNode v = q.getValue();
          if (!v.isIntegralNumber() || (nonNegative && v.asLong() < 0)) {
            return null;
          }
          try {
            queues.put(Integer.parseInt(q.getKey().trim()), v.asLong());
          } catch (NumberFormatException e) {
            return null;
          }
        }
        brokers.put(b.getKey(), queues);
      }
      out.put(t.getKey(), brokers);
    }
    return out;
  }

  private static Iterable<Map.Entry<String, JsonNode>> iterable(JsonNode node) {
    return node.properties();
  }

  /** The read option names, for the test that keeps them equal to format("pymq")'s. */
  public static String readNames() {
    List<String> all = new ArrayList<>(READ);
    Collections.sort(all);
    return String.join(",", all);
  }
}
