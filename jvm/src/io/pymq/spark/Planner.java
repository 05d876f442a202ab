package io.pymq.spark;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Pattern;

/**
 * Every queue a batch read covers, with its start and end offset, decided once on the driver:
 * the same decisions as format("pymq")'s (connector/spark/source.py resolve_ranges and
 * connector/spark/queues.py), asked of the NameServer and brokers over remoting.
 */
final class Planner {
  static final int GET_ROUTEINFO_BY_TOPIC = 105;
  static final int GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206;
  static final int GET_MAX_OFFSET = 30;
  static final int GET_MIN_OFFSET = 31;
  static final int SEARCH_OFFSET_BY_TIMESTAMP = 29;
  static final int SUCCESS = 0;
  static final int TOPIC_NOT_EXIST = 17;
  static final int PERM_READ = 1 << 2;
  static final int TIMEOUT_MS = 3000;

  /** A queue and the addresses of its broker: the master's first, then its slaves'. */
  record Queue(String topic, String broker, int id, String[] addrs) {
    String name() {
      return topic + ":" + broker + ":" + id;
    }
  }

  private final ReadOptions opts;

  Planner(ReadOptions opts) {
    this.opts = opts;
  }

  List<QueueRange> ranges() {
    try {
      return plan();
    } catch (IOException e) {
      throw new UncheckedIOException(e.getMessage(), e);
    }
  }

  private List<QueueRange> plan() throws IOException {
    List<Queue> queues = new ArrayList<>();
    Set<String> gone = new TreeSet<>();
    for (String topic : topics()) {
      JsonNode route = route(topic);
      if (route == null) {
        if (opts.pattern == null) {
          gone.add(topic);
        }
        continue;
      }
      Map<String, String[]> brokers = new HashMap<>(); // broker name -> its addresses, by id
      for (JsonNode b : route.path("brokerDatas")) {
        TreeMap<Integer, String> byId = new TreeMap<>();
        for (Map.Entry<String, JsonNode> e : b.path("brokerAddrs").properties()) {
          String addr = e.getValue().asText("");
          if (!addr.isEmpty() && e.getKey().matches("\\d{1,9}")) {
            byId.put(Integer.parseInt(e.getKey()), addr);
          }
        }
        if (!byId.isEmpty()) {
          brokers.put(b.path("brokerName").asText(), byId.values().toArray(new String[0]));
        }
      }
      List<JsonNode> datas = new ArrayList<>();
      route.path("queueDatas").forEach(datas::add);
      datas.sort(Comparator.comparing(q -> q.path("brokerName").asText()));
      for (JsonNode q : datas) {
        String broker = q.path("brokerName").asText();
        if ((q.path("perm").asInt() & PERM_READ) == 0 || !brokers.containsKey(broker)) {
          continue;
        }
        for (int i = 0; i < q.path("readQueueNums").asInt(); i++) {
          if (opts.assign == null || opts.assign.get(topic).getOrDefault(broker, Set.of()).contains(i)) {
            queues.add(new Queue(topic, broker, i, brokers.get(broker)));
          }
        }
      }
    }
    if (!gone.isEmpty()) {
      throw new IllegalStateException("No route info of this topic: " + String.join(", ", gone));
    }
    Map<String, long[]> bounds = new TreeMap<>();
    Map<String, Queue> byName = new TreeMap<>();
    for (Queue q : queues) {
      bounds.put(q.name(), new long[] {queueCall(q, GET_MIN_OFFSET, null), queueCall(q, GET_MAX_OFFSET, null)});
      byName.put(q.name(), q);
    }
    checkAssigned(byName.keySet());
    Map<String, Long> starts = starts(byName, bounds);
    Map<String, Long> ends = ends(byName, bounds);
    List<QueueRange> ranges = new ArrayList<>();
    for (Queue q : byName.values()) { // each queue once, if a topic was named twice
      long s = starts.get(q.name());
      long e = ends.get(q.name());
      if (e > s) {
        ranges.add(new QueueRange(q.topic, q.broker, q.id, s, e, q.addrs));
      }
    }
    return split(ranges, opts.minPartitions, opts.maxRecordsPerPartition);
  }

  private List<String> topics() throws IOException {
    if (opts.assign != null) {
      return new ArrayList<>(opts.assign.keySet());
    }
    if (opts.pattern == null) {
      return opts.topics;
    }
    Pattern p = Pattern.compile(opts.pattern);
    JsonNode listed = Remoting.json(namesrvCall(GET_ALL_TOPIC_LIST_FROM_NAMESERVER, Map.of()).body);
    Set<String> out = new TreeSet<>();
    for (JsonNode t : listed.path("topicList")) {
      String topic = t.asText();
      if (Names.isUserTopic(topic) && p.matcher(topic).matches()) {
        out.add(topic);
      }
    }
    return new ArrayList<>(out);
  }

  private JsonNode route(String topic) throws IOException {
    Remoting.Response r = namesrvCall(GET_ROUTEINFO_BY_TOPIC, Map.of("topic", topic));
    if (r.code == TOPIC_NOT_EXIST) {
      return null;
    }
    return Remoting.json(r.body);
  }

  /** A NameServer's answer, trying each of the list in turn. */
  private Remoting.Response namesrvCall(int code, Map<String, String> ext) throws IOException {
    IOException last = null;
    for (String addr : opts.namesrv.split(";")) {
      if (addr.isBlank()) {
        continue;
      }
      try {
        Remoting.Response r = Pool.call(addr.trim(), TIMEOUT_MS, code, ext, opts.signer, opts.tls);
        if (r.code != SUCCESS && r.code != TOPIC_NOT_EXIST) {
          throw new IOException("NameServer " + addr + " answered " + r.describe());
        }
        return r;
      } catch (IOException e) {
        last = e;
      }
    }
    throw new IOException("no NameServer answered (" + opts.namesrv + "): "
        + (last == null ? "no address given" : last.getMessage()), last);
  }

  private long queueCall(Queue q, int code, Long timestamp) throws IOException {
    Map<String, String> ext = new HashMap<>();
    ext.put("topic", q.topic);
    ext.put("queueId", Integer.toString(q.id));
    if (timestamp != null) {
      ext.put("timestamp", Long.toString(timestamp));
    }
    IOException down = null;
    for (String addr : q.addrs) { // the master, else a slave (the same offsets)
      Remoting.Response r;
      try {
        r = Pool.call(addr, TIMEOUT_MS, code, ext, opts.signer, opts.tls);
      } catch (IOException e) {
        down = e;
        continue;
      }
      if (r.code != SUCCESS) {
        throw new IOException("broker " + q.broker + " (" + addr + ") answered " + r.describe());
      }
      return r.number("offset");
    }
    throw down != null ? down : new IOException("broker " + q.broker + " has no address");
  }

  private void checkAssigned(Set<String> have) {
    if (opts.assign == null) {
      return;
    }
    List<String> missing = new ArrayList<>();
    opts.assign.forEach((t, bs) -> bs.forEach((b, qs) -> qs.forEach(q -> {
      String name = t + ":" + b + ":" + q;
      if (!have.contains(name)) {
        missing.add(name);
      }
    })));
    if (!missing.isEmpty()) {
      missing.sort(null);
      throw ReadOptions.bad("option assign: no such queue " + String.join(", ", missing));
    }
  }

  /** {@code spec} at a queue: earliest -> lo, latest -> hi, JSON -> its value (-2, -1 as Kafka). */
  @SuppressWarnings("unchecked")
  static long pick(Object spec, Queue q, long lo, long hi) {
    if ("earliest".equals(spec)) {
      return lo;
    }
    if ("latest".equals(spec)) {
      return hi;
    }
    Map<String, Map<String, Map<Integer, Long>>> json = (Map<String, Map<String, Map<Integer, Long>>>) spec;
    Long v = json.getOrDefault(q.topic, Map.of()).getOrDefault(q.broker, Map.of()).get(q.id);
    if (v == null) {
      return lo; // a queue the JSON does not name: from its start (as Kafka's source)
    }
    return v == -2 ? lo : v == -1 ? hi : v;
  }

  /** Per-queue JSON must name exactly the queues read (Kafka's rule). */
  private static Map<String, Long> perQueue(
      Map<String, Map<String, Map<Integer, Long>>> spec, Set<String> keys, String option) {
    Map<String, Long> named = new TreeMap<>();
    spec.forEach((t, bs) -> bs.forEach((b, qs) -> qs.forEach((q, v) -> named.put(t + ":" + b + ":" + q, v))));
    List<String> parts = new ArrayList<>();
    Set<String> missing = new TreeSet<>(keys);
    missing.removeAll(named.keySet());
    Set<String> unknown = new TreeSet<>(named.keySet());
    unknown.removeAll(keys);
    if (!missing.isEmpty()) {
      parts.add("it does not name " + String.join(", ", missing));
    }
    if (!unknown.isEmpty()) {
      parts.add("no such queue is read: " + String.join(", ", unknown));
    }
    if (!parts.isEmpty()) {
      throw ReadOptions.bad("option " + option + ": " + String.join("; ", parts));
    }
    return named;
  }

  private Map<String, Long> starts(Map<String, Queue> queues, Map<String, long[]> bounds) throws IOException {
    Map<String, Long> out = new TreeMap<>();
    if (opts.startingTimestamp == null && opts.startingByTimestamp == null) {
      queues.forEach((k, q) -> out.put(k, pick(opts.starting, q, bounds.get(k)[0], bounds.get(k)[1])));
      return out;
    }
    String option = opts.startingTimestamp != null ? "startingTimestamp" : "startingOffsetsByTimestamp";
    Map<String, Long> times = new TreeMap<>();
    if (opts.startingTimestamp != null) {
      queues.keySet().forEach(k -> times.put(k, opts.startingTimestamp));
    } else {
      times.putAll(perQueue(opts.startingByTimestamp, queues.keySet(), option));
    }
    for (Map.Entry<String, Long> e : times.entrySet()) {
      Queue q = queues.get(e.getKey());
      long offset = queueCall(q, SEARCH_OFFSET_BY_TIMESTAMP, e.getValue());
      // the broker answers the max offset when no message is that new; asked after the
      // search, a max offset still equal to the answer means none was
      boolean pastEnd = offset >= queueCall(q, GET_MAX_OFFSET, null);
      long[] b = bounds.get(e.getKey());
      if (pastEnd && b[1] > b[0] && !opts.startLatestPastEnd) {
        throw new IllegalStateException(option + ": queue " + e.getKey() + " has no message stored at or after "
            + e.getValue() + " ms (it ends at offset " + offset + "); startingOffsetsByTimestampStrategy=latest"
            + " starts such a queue at its end");
      }
      out.put(e.getKey(), offset);
    }
    return out;
  }

  private Map<String, Long> ends(Map<String, Queue> queues, Map<String, long[]> bounds) throws IOException {
    Map<String, Long> out = new TreeMap<>();
    Map<String, Long> times = new TreeMap<>();
    if (opts.endingTimestamp != null) {
      queues.keySet().forEach(k -> times.put(k, opts.endingTimestamp));
    } else if (opts.endingByTimestamp != null) {
      times.putAll(perQueue(opts.endingByTimestamp, queues.keySet(), "endingOffsetsByTimestamp"));
    } else {
      queues.forEach((k, q) -> out.put(k, pick(opts.ending, q, bounds.get(k)[1], bounds.get(k)[1])));
      return out;
    }
    for (Map.Entry<String, Long> e : times.entrySet()) {
      out.put(e.getKey(), queueCall(queues.get(e.getKey()), SEARCH_OFFSET_BY_TIMESTAMP, e.getValue()));
    }
    return out;
  }

  /**
   * Ranges cut into contiguous pieces that cover each exactly (a re-run reads the same rows):
   * with fewer ranges than {@code minPartitions}, each gets pieces in proportion to its size
   * (as Kafka's offset range calculator); no piece holds more than {@code maxRecords}.
   */
  static List<QueueRange> split(List<QueueRange> ranges, int minPartitions, Long maxRecords) {
    long total = 0;
    for (QueueRange r : ranges) {
      total += r.end - r.start;
    }
    List<QueueRange> out = new ArrayList<>();
    for (QueueRange r : ranges) {
      long size = r.end - r.start;
      long parts = 1;
      if (ranges.size() < minPartitions && total > 0) {
        parts = -Math.floorDiv(-size * minPartitions, total); // ceil
      }
      if (maxRecords != null) {
        parts = Math.max(parts, -Math.floorDiv(-size, maxRecords));
      }
      parts = Math.max(1, Math.min(parts, size));
      for (long i = 0; i < parts; i++) {
        out.add(new QueueRange(r.topic, r.brokerName, r.queueId,
            r.start + size * i / parts, r.start + size * (i + 1) / parts, r.addrs));
      }
    }
    out.sort(Comparator.<QueueRange, String>comparing(r -> r.topic)
        .thenComparing(r -> r.brokerName).thenComparingInt(r -> r.queueId).thenComparingLong(r -> r.start));
    return out;
  }
}
