package io.pymq.spark;

import org.apache.spark.sql.connector.read.InputPartition;

/**
 * Offsets {@code [start, end)} of one queue, and the addresses of the brokers that serve it: its
 * master first, then its slaves (read while the master is down; they hold the same offsets).
 */
final class QueueRange implements InputPartition {
  private static final long serialVersionUID = 1L;
  final String topic;
  final String brokerName;
  final int queueId;
  final long start;
  final long end;
  final String[] addrs;

  QueueRange(String topic, String brokerName, int queueId, long start, long end, String[] addrs) {
    this.topic = topic;
    this.brokerName = brokerName;
    this.queueId = queueId;
    this.start = start;
    this.end = end;
    this.addrs = addrs.clone();
  }

  String name() {
    return topic + ":" + brokerName + ":" + queueId;
  }
}
