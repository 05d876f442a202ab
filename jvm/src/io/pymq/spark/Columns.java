package io.pymq.spark;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Set;
import java.util.zip.CRC32;
import java.util.zip.InflaterInputStream;
import org.apache.spark.sql.execution.vectorized.ConstantColumnVector;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * A pull answer's stored records (RocketMQ's CommitLog layout, connector/protocol/record.py)
 * written straight into column vectors of the read schema, or of the columns a query keeps,
 * with the same values as format("pymq")'s (connector/spark/columnar.py): {@code tags}/{@code
 * keys} are the TAGS/KEYS properties (null when absent or empty), {@code msgId} the producer's
 * UNIQ_KEY or else the offset msgId, {@code properties} every stored property (a name given
 * twice: its first place, the last value; bytes that are not UTF-8: replacement characters).
 *
 * <p>The vectors are the reader's, reused page after page (Spark is done with a batch before it
 * asks for the next): no object per row. Text and bodies are copied from the answer once, into
 * the vectors; Spark's column-to-row step copies them once more into its rows.
 */
final class Columns implements AutoCloseable {
  static final int MAGIC = 0xDAA320A7;
  static final int COMPRESSED = 0x1;
  static final int BORNHOST_V6 = 0x10;
  static final int STOREHOST_V6 = 0x20;
  static final long MAX_INFLATED_BYTES = 64L * 16 * (1 << 20);
  static final int HEADER_MIN = 88;
  private static final String[] NAMES = {
    "topic", "brokerName", "queueId", "queueOffset", "msgId", "tags", "keys", "body",
    "properties", "bornTimestamp", "storeTimestamp"
  };
  private static final byte[] HEX = "0123456789ABCDEF".getBytes(StandardCharsets.US_ASCII);
  private static final byte[] UNIQ_KEY = "UNIQ_KEY".getBytes(StandardCharsets.US_ASCII);
  private static final byte[] TAGS = "TAGS".getBytes(StandardCharsets.US_ASCII);
  private static final byte[] KEYS = "KEYS".getBytes(StandardCharsets.US_ASCII);

  private final int[] kind; // per output column: its index in NAMES
  private final ColumnVector[] vectors;
  private final WritableColumnVector[] writable; // null where the column is constant
  private final boolean wantsProperties;
  private final Set<String> tags; // null: every tag
  private final CRC32 crc = new CRC32();
  private int capacity;
  // one record's property pairs: start and length of name and value (reused)
  private int[] pairs = new int[64];
  private byte[] scratch = new byte[32];

  Columns(StructType schema, QueueRange range, Set<String> tags, int capacity) {
    StructField[] fields = schema.fields();
    kind = new int[fields.length];
    vectors = new ColumnVector[fields.length];
    writable = new WritableColumnVector[fields.length];
    this.capacity = Math.max(capacity, 1);
    boolean props = false;
    for (int i = 0; i < fields.length; i++) {
      kind[i] = java.util.Arrays.asList(NAMES).indexOf(fields[i].name());
      if (kind[i] < 0) {
        throw new IllegalArgumentException("column " + fields[i].name() + " is not in pymq's read schema");
      }
      DataType type = fields[i].dataType();
      if (kind[i] <= 2) { // topic, brokerName, queueId: one value for the whole range
        ConstantColumnVector c = new ConstantColumnVector(this.capacity, type);
        if (kind[i] == 2) {
          c.setInt(range.queueId);
        } else {
          c.setUtf8String(UTF8String.fromString(kind[i] == 0 ? range.topic : range.brokerName));
        }
        vectors[i] = c;
      } else {
        writable[i] = new OnHeapColumnVector(this.capacity, type);
        vectors[i] = writable[i];
      }
      props |= kind[i] == 8;
    }
    wantsProperties = props;
    this.tags = tags;
  }

  /** "A || B" -> {A, B}; null, "" and "*" mean every tag. */
  static Set<String> parseTags(String expression) {
    if (expression == null) {
      return null;
    }
    Set<String> out = new java.util.HashSet<>();
    for (String t : expression.split("\\|\\|")) {
      if (!t.isBlank()) {
        out.add(t.trim());
      }
    }
    return out.isEmpty() || out.contains("*") ? null : out;
  }

  /** The records of {@code data} whose queue offset is below {@code end}, as one batch. */
  ColumnarBatch fill(byte[] data, long end) throws IOException {
    int records = count(data);
    if (records > capacity) {
      capacity = records;
      for (WritableColumnVector w : writable) {
        if (w != null) {
          w.reserve(capacity);
        }
      }
    }
    for (WritableColumnVector w : writable) {
      if (w != null) {
        w.reset();
      }
    }
    ByteBuffer buf = ByteBuffer.wrap(data);
    int row = 0;
    int pairsOut = 0; // map entries written so far (properties)
    int p = 0;
    while (p < data.length) {
      int total = buf.getInt(p);
      long queueOffset = buf.getLong(p + 20);
      if (queueOffset >= end) {
        break; // offsets ascend within a queue
      }
      int sysFlag = buf.getInt(p + 36);
      int bornHostLen = (sysFlag & BORNHOST_V6) != 0 ? 20 : 8;
      int storeHostLen = (sysFlag & STOREHOST_V6) != 0 ? 20 : 8;
      long born = buf.getLong(p + 40);
      int at = p + 48 + bornHostLen;
      long stored = buf.getLong(at);
      int storeHostAt = at + 8;
      at = storeHostAt + storeHostLen + 4 + 8; // store host, reconsume times, prepared tx offset
      int bodyLen = buf.getInt(at);
      int bodyAt = at + 4;
      int topicAt = bodyAt + bodyLen;
      if (bodyLen < 0 || topicAt + 1 > p + total) {
        throw corrupt(p, "body length " + bodyLen + " does not fit");
      }
      int propsLenAt = topicAt + 1 + (data[topicAt] & 0xFF);
      if (propsLenAt + 2 > p + total) {
        throw corrupt(p, "topic length does not fit");
      }
      int propsAt = propsLenAt + 2;
      int propsEnd = propsAt + (buf.getShort(propsLenAt) & 0xFFFF);
      if (propsEnd > p + total) {
        throw corrupt(p, "properties length does not fit");
      }
      crc.reset();
      crc.update(data, bodyAt, bodyLen);
      if (((int) crc.getValue() & 0x7FFFFFFF) != buf.getInt(p + 8)) {
        throw new IOException("body CRC mismatch at byte " + p + " of a pull answer");
      }
      int n = pairs(data, propsAt, propsEnd);
      int uniq = find(data, n, UNIQ_KEY);
      int tag = find(data, n, TAGS);
      int keys = find(data, n, KEYS);
      if (tags != null && (tag < 0 || !tags.contains(text(data, tag)))) {
        p += total;
        continue; // the broker filters by tag hash: a tag that shares a hash is dropped here
      }
      for (int i = 0; i < kind.length; i++) {
        WritableColumnVector v = writable[i];
        switch (kind[i]) {
          case 3: v.putLong(row, queueOffset); break;
          case 4:
            if (uniq >= 0) {
              putValue(v, row, data, uniq);
            } else {
              putOffsetMsgId(v, row, data, storeHostAt, storeHostLen, buf.getLong(p + 28));
            }
            break;
          case 5: putValueOrNull(v, row, data, tag); break;
          case 6: putValueOrNull(v, row, data, keys); break;
          case 7: putBody(v, row, data, bodyAt, bodyLen, sysFlag, p); break;
          case 8:
            v.putArray(row, pairsOut, n);
            WritableColumnVector names = v.getChild(0);
            WritableColumnVector values = v.getChild(1);
            names.reserve(pairsOut + n);
            values.reserve(pairsOut + n);
            for (int k = 0; k < n; k++) {
              putText(names, pairsOut + k, data, pairs[4 * k], pairs[4 * k + 1]);
              putText(values, pairsOut + k, data, pairs[4 * k + 2], pairs[4 * k + 3]);
            }
            pairsOut += n;
            break;
          case 9: v.putLong(row, born * 1000); break;
          case 10: v.putLong(row, stored * 1000); break;
          default: break; // constant columns
        }
      }
      row++;
      p += total;
    }
    return new ColumnarBatch(vectors, row);
  }

  /** How many records {@code data} holds, each header checked to fit. */
  private static int count(byte[] data) throws IOException {
    ByteBuffer buf = ByteBuffer.wrap(data);
    int n = 0;
    int p = 0;
    while (p < data.length) {
      if (data.length - p < HEADER_MIN) {
        throw corrupt(p, "a record header is cut short");
      }
      int total = buf.getInt(p);
      if (total < HEADER_MIN || total > data.length - p) {
        throw corrupt(p, "record size " + total + " does not fit");
      }
      if (buf.getInt(p + 4) != MAGIC) {
        throw corrupt(p, "not a message record");
      }
      n++;
      p += total;
    }
    return n;
  }

  /**
   * The record's property pairs ({@code name \x01 value \x02}; one without {@code \x01} or
   * with an empty name is skipped) into {@code pairs}; a name given again keeps its first
   * place and takes the new value. Returns how many.
   */
  private int pairs(byte[] data, int from, int stop) {
    int n = 0;
    int q = from;
    while (q < stop) {
      int sep = -1;
      int end = q;
      while (end < stop && data[end] != 2) {
        if (sep < 0 && data[end] == 1) {
          sep = end;
        }
        end++;
      }
      if (sep > q) {
        int slot = n;
        for (int k = 0; k < n; k++) {
          if (same(data, pairs[4 * k], pairs[4 * k + 1], data, q, sep - q)) {
            slot = k;
            break;
          }
        }
        if (slot == n) {
          if (4 * n + 4 > pairs.length) {
            pairs = java.util.Arrays.copyOf(pairs, 2 * pairs.length);
          }
          pairs[4 * n] = q;
          pairs[4 * n + 1] = sep - q;
          n++;
        }
        pairs[4 * slot + 2] = sep + 1;
        pairs[4 * slot + 3] = end - sep - 1;
      }
      q = end + 1;
    }
    return n;
  }

  /** The index of the pair named {@code name} with a non-empty value, or -1. */
  private int find(byte[] data, int n, byte[] name) {
    for (int k = 0; k < n; k++) {
      if (same(data, pairs[4 * k], pairs[4 * k + 1], name, 0, name.length)) {
        return pairs[4 * k + 3] > 0 ? k : -1;
      }
    }
    return -1;
  }

  private static boolean same(byte[] a, int at, int len, byte[] b, int bt, int blen) {
    return len == blen && java.util.Arrays.equals(a, at, at + len, b, bt, bt + blen);
  }

  private String text(byte[] data, int pair) {
    return new String(data, pairs[4 * pair + 2], pairs[4 * pair + 3], StandardCharsets.UTF_8);
  }

  private void putValue(WritableColumnVector v, int row, byte[] data, int pair) {
    putText(v, row, data, pairs[4 * pair + 2], pairs[4 * pair + 3]);
  }

  private void putValueOrNull(WritableColumnVector v, int row, byte[] data, int pair) {
    if (pair < 0) {
      v.putNull(row);
    } else {
      putValue(v, row, data, pair);
    }
  }

  /** UTF-8 text; bytes that are not UTF-8 become replacement characters (as Python decodes). */
  private static void putText(WritableColumnVector v, int row, byte[] data, int at, int len) {
    for (int i = at; i < at + len; i++) {
      if (data[i] < 0) {
        byte[] clean = new String(data, at, len, StandardCharsets.UTF_8).getBytes(StandardCharsets.UTF_8);
        v.putByteArray(row, clean, 0, clean.length);
        return;
      }
    }
    v.putByteArray(row, data, at, len);
  }

  private void putOffsetMsgId(WritableColumnVector v, int row, byte[] data, int hostAt, int hostLen, long physical) {
    int len = 2 * (hostLen + 8);
    if (scratch.length < len) {
      scratch = new byte[len];
    }
    int k = 0;
    for (int i = hostAt; i < hostAt + hostLen; i++) {
      scratch[k++] = HEX[(data[i] >> 4) & 15];
      scratch[k++] = HEX[data[i] & 15];
    }
    for (int shift = 60; shift >= 0; shift -= 4) {
      scratch[k++] = HEX[(int) (physical >>> shift) & 15];
    }
    v.putByteArray(row, scratch, 0, len);
  }

  private static void putBody(WritableColumnVector v, int row, byte[] data, int at, int len, int sysFlag, int recordAt)
      throws IOException {
    if ((sysFlag & COMPRESSED) == 0) {
      v.putByteArray(row, data, at, len);
      return;
    }
    int type = (sysFlag >> 8) & 0x7;
    InputStream raw = new ByteArrayInputStream(data, at, len);
    InputStream in;
    switch (type) {
      case 0: case 3: in = new InflaterInputStream(raw); break;
      case 1: in = new net.jpountz.lz4.LZ4FrameInputStream(raw); break;
      case 2: in = new com.github.luben.zstd.ZstdInputStream(raw); break;
      default: throw corrupt(recordAt, "unknown compression type " + type + " in SYSFLAG");
    }
    ByteArrayOutputStream out = new ByteArrayOutputStream(Math.max(len * 4, 64));
    byte[] chunk = new byte[8192];
    try (InputStream s = in) {
      int n;
      while ((n = s.read(chunk)) > 0) {
        out.write(chunk, 0, n);
        if (out.size() > MAX_INFLATED_BYTES) {
          throw corrupt(recordAt, "a compressed body inflates past " + MAX_INFLATED_BYTES + " bytes");
        }
      }
    } catch (IOException e) {
      throw corrupt(recordAt, "a compressed body does not inflate: " + e.getMessage());
    }
    byte[] body = out.toByteArray();
    v.putByteArray(row, body, 0, body.length);
  }

  private static IOException corrupt(int at, String why) {
    return new IOException("corrupt record at byte " + at + " of a pull answer: " + why);
  }

  @Override
  public void close() {
    for (ColumnVector v : vectors) {
      v.close();
    }
  }
}
