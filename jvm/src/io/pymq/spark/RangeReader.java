package io.pymq.spark;

import java.io.IOException;
import java.util.HashMap;
import java.util.Map;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * Reads one {@link QueueRange} in offset order as column batches ({@link Columns}), one pull a
 * page, the next page asked for
 * before the current one is decoded (the broker serves it meanwhile), on a connection kept by
 * the executor ({@link Pool}). A kept connection that fails (its broker restarted) is replaced
 * once and the page asked for again: a pull changes nothing. A broker's master that does not
 * answer is left for its slave (the range's next address); a node short of the range is waited
 * for (long polls, up to {@code REPLICA_WAIT_MS}).
 */
final class RangeReader implements PartitionReader<ColumnarBatch> {
  static final int PULL_MESSAGE = 11;
  static final int PULL_NOT_FOUND = 19;
  static final int PULL_RETRY_IMMEDIATELY = 20;
  static final int PULL_OFFSET_MOVED = 21;
  private static final int FLAG_SUSPEND = 0x2; // PullSysFlag: the broker may hold the pull
  private static final int FLAG_SUBSCRIPTION = 0x4; // PullSysFlag: the request carries one
  // a broker's node short of the range (a slave behind the node the range was planned on) is
  // waited for this long, in long polls of REPLICA_POLL_MS, before the range is called lost
  static final long REPLICA_WAIT_MS = 15_000;
  static final int REPLICA_POLL_MS = 1000;
  // past a queue's end a broker answers at once instead of holding the pull: the next asks later
  static final long REPLICA_RETRY_MS = 100;
  // a page is never held by the broker (no suspend bit); this bounds a broker that stops answering
  static final int READ_TIMEOUT_MS = 30_000;

  private final QueueRange range;
  private final ReadOptions opts;
  private final Columns columns;
  private Remoting conn;
  private boolean replaced;
  private int at; // which of the range's addresses is read: the master's, else a slave's
  private long offset;
  private int ahead = -1; // opaque of the page asked for ahead, -1 when none
  private long aheadOffset;
  private ColumnarBatch page;
  private int waitMs; // the hold of the next pull: 0, or REPLICA_POLL_MS while the node is short
  private long giveUpAt; // System.nanoTime() past which a short node is no longer waited for

  RangeReader(QueueRange range, ReadOptions opts, StructType schema) {
    this.range = range;
    this.opts = opts;
    this.columns = new Columns(schema, range, Columns.parseTags(opts.tags), opts.pullBatchSize);
    this.offset = range.start;
  }

  @Override
  public boolean next() throws IOException {
    page = null;
    while (page == null || page.numRows() == 0) {
      if (offset >= range.end) {
        return false;
      }
      fill();
    }
    return true;
  }

  @Override
  public ColumnarBatch get() {
    return page;
  }

  private Map<String, String> pull(long from) {
    Map<String, String> ext = new HashMap<>();
    ext.put("consumerGroup", opts.group());
    ext.put("topic", range.topic);
    ext.put("queueId", Integer.toString(range.queueId));
    ext.put("queueOffset", Long.toString(from));
    ext.put("maxMsgNums", Long.toString(Math.min(opts.pullBatchSize, range.end - from)));
    ext.put("sysFlag", Integer.toString(FLAG_SUBSCRIPTION | (waitMs > 0 ? FLAG_SUSPEND : 0)));
    ext.put("commitOffset", "0");
    ext.put("suspendTimeoutMillis", Integer.toString(waitMs));
    ext.put("subscription", opts.tags == null ? "*" : opts.tags);
    ext.put("subVersion", "0");
    ext.put("expressionType", "TAG");
    return ext;
  }

  /** The next page of rows from {@code offset}. */
  private void fill() throws IOException {
    Remoting.Response r;
    while (true) {
      try {
        r = pullHere();
        break;
      } catch (IOException e) {
        if (conn != null) {
          conn.close();
          conn = null;
        }
        ahead = -1;
        if (at + 1 >= range.addrs.length) {
          throw e; // every broker of the queue is down: the task fails
        }
        at++; // the master is down: its slave serves the same offsets
        replaced = false;
      }
    }
    boolean pastEnd = r.code == PULL_OFFSET_MOVED && offset > r.number("maxOffset");
    if ((r.code == PULL_NOT_FOUND || pastEnd) && shortNodeWaited(pastEnd)) {
      return; // no page: next() asks again
    }
    waitMs = 0;
    if (r.code == PULL_OFFSET_MOVED) {
      long min = r.number("minOffset");
      if (min > offset) { // retention removed what this range needs
        String lost = "offsets " + offset + ".." + (min - 1) + " of " + range.name() + " were deleted";
        if (opts.failOnDataLoss) {
          throw new IllegalStateException(lost + "; failOnDataLoss=false skips them");
        }
        offset = Math.min(min, range.end);
        return;
      }
      throw new IllegalStateException("cannot read " + range.name() + " at " + offset + ": " + r.describe());
    }
    if (r.code != 0 && r.code != PULL_NOT_FOUND && r.code != PULL_RETRY_IMMEDIATELY) {
      throw new IOException("broker " + range.brokerName + " (" + range.addrs[at] + ") answered a pull of "
          + range.name() + " with " + r.describe());
    }
    long nextBegin = r.number("nextBeginOffset");
    if (r.code == PULL_NOT_FOUND || nextBegin <= offset) {
      throw new IllegalStateException(range.name() + " ends at " + r.number("maxOffset") + ", before " + range.end);
    }
    // the next page is asked for ahead only if it is a whole one of this range
    if (nextBegin < range.end && range.end - nextBegin >= opts.pullBatchSize) {
      ahead = conn.send(PULL_MESSAGE, pull(nextBegin), opts.signer);
      aheadOffset = nextBegin;
    }
    page = r.code == 0 ? columns.fill(r.body, range.end) : null;
    offset = nextBegin;
  }

  /**
   * The node read has less than the range, which was planned on another node of the broker (a
   * slave read while its master is down, behind it by what it had not got yet): whether to ask
   * again, holding the next pull (the broker answers as soon as the queue grows), for at most
   * {@code REPLICA_WAIT_MS} before the range is called lost.
   */
  private boolean shortNodeWaited(boolean pastEnd) throws IOException {
    long now = System.nanoTime();
    if (waitMs == 0) {
      giveUpAt = now + REPLICA_WAIT_MS * 1_000_000L;
    }
    if (now - giveUpAt >= 0) {
      return false;
    }
    waitMs = REPLICA_POLL_MS;
    if (pastEnd) {
      try {
        Thread.sleep(REPLICA_RETRY_MS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IOException("interrupted waiting for " + range.name(), e);
      }
    }
    return true;
  }

  /** A pull at {@code offset} from the broker at {@code range.addrs[at]}. */
  private Remoting.Response pullHere() throws IOException {
    try {
      if (conn == null) {
        conn = Pool.take(range.addrs[at], READ_TIMEOUT_MS, false, opts.tls);
      }
      int opaque = ahead >= 0 && aheadOffset == offset ? ahead : conn.send(PULL_MESSAGE, pull(offset), opts.signer);
      ahead = -1;
      return conn.receive(opaque);
    } catch (IOException e) {
      if (replaced || conn == null || conn.idleSince == 0) {
        throw e; // a new connection that fails: this broker is down
      }
      replaced = true; // once: a kept connection its broker closed meanwhile
      conn.close();
      conn = Pool.take(range.addrs[at], READ_TIMEOUT_MS, true, opts.tls);
      ahead = -1;
      return conn.call(PULL_MESSAGE, pull(offset), opts.signer);
    }
  }

  @Override
  public void close() {
    columns.close();
    if (conn != null) {
      if (ahead >= 0) {
        try {
          conn.receive(ahead); // an answer owed: taken, so the connection can serve the next task
        } catch (IOException e) {
          conn.close();
          conn = null;
          return;
        }
      }
      Pool.give(conn);
      conn = null;
    }
  }
}
