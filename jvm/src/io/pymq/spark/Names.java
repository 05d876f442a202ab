package io.pymq.spark;

import java.util.Set;
import java.util.regex.Pattern;

/** Topic and group names as connector/protocol/names.py checks them. */
final class Names {
  static final int MAX_LENGTH = 127;
  private static final Pattern NAME = Pattern.compile("[%|a-zA-Z0-9_-]+");
  private static final Set<String> SYSTEM_TOPICS = Set.of(
      "TBW102", "SCHEDULE_TOPIC_XXXX", "BenchmarkTest", "OFFSET_MOVED_EVENT", "SELF_TEST_TOPIC");

  private Names() {}

  static String check(String kind, String name) {
    if (name == null || name.isEmpty()) {
      throw ReadOptions.bad(kind + " name must be a non-empty string");
    }
    if (name.length() > MAX_LENGTH) {
      throw ReadOptions.bad(kind + " name is " + name.length() + " chars, longer than " + MAX_LENGTH);
    }
    if (!NAME.matcher(name).matches()) {
      throw ReadOptions.bad(kind + " name '" + name + "' has characters outside [%|a-zA-Z0-9_-]");
    }
    return name;
  }

  /** Not a broker-managed topic (TBW102, RMQ_SYS_*, schedule, retry and DLQ topics). */
  static boolean isUserTopic(String topic) {
    return !(SYSTEM_TOPICS.contains(topic) || topic.startsWith("RMQ_SYS_") || topic.startsWith("rmq_sys_")
        || topic.startsWith("%RETRY%") || topic.startsWith("%DLQ%") || topic.startsWith("SCHEDULE_TOPIC_"));
  }
}
