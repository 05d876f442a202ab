package io.pymq.spark;

import org.apache.spark.sql.connector.read.InputPartition;

/** Offsets {@code [start, end)} of one queue, and the broker address that serves it. */
final class QueueRange implements InputPartition {
  private static final long serialVersionUID = 1L;
  final String topic;
  final String brokerName;
  final int queueId;
  final long start;
  final long end;
  final String addr;

  QueueRange(String topic, String brokerName, int queueId, long start, long end, String addr) {
    this.topic = topic;
    this.brokerName = brokerName;
    this.queueId = queueId;
    this.start = start;
    this.end = end;
    this.addr = addr;
  }

  String name() {
    return topic + ":" + brokerName + ":" + queueId;
  }
}
