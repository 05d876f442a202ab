package io.pymq.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.Closeable;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.util.HashMap;
import java.util.Map;

/**
 * One connection speaking RocketMQ's remoting protocol (see docs/protocol.md): frames of
 * {@code int32 length | int32 (serializeType << 24 | headerLength) | JSON header | body}.
 *
 * <p>Requests may be pipelined: {@link #send} several, then {@link #receive} each answer by
 * its opaque id (an answer for another id that arrives first is kept until asked for). One
 * thread at a time uses a connection (a task's reader); {@link Pool} hands them out.
 */
final class Remoting implements Closeable {
  static final int MAX_FRAME_BYTES = 16 * 1024 * 1024;
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final int FLAG_RESPONSE = 0x1;

  final String addr;
  private final Socket socket;
  final Tls tls; // null: plaintext
  private final DataInputStream in;
  private final DataOutputStream out;
  private final Map<Integer, Response> early = new HashMap<>();
  private int nextOpaque = 1;
  // signed requests: this connection's own numbering (pymqSignSeq), rising as they go out
  private final String instance = Long.toHexString(new java.security.SecureRandom().nextLong());
  private long signed;
  private int inFlight; // requests sent whose answer was not taken yet
  private boolean broken;
  long idleSince; // when it was last given back to the pool (0: never, a new connection)

  /** An answer: its code, remark, ext fields and body. */
  static final class Response {
    final int code;
    final String remark;
    final Map<String, String> ext;
    final byte[] body;

    Response(int code, String remark, Map<String, String> ext, byte[] body) {
      this.code = code;
      this.remark = remark;
      this.ext = ext;
      this.body = body;
    }

    long number(String name) throws IOException {
      String v = ext.get(name);
      if (v == null) {
        throw new IOException("the answer has no field " + name);
      }
      try {
        return Long.parseLong(v.trim());
      } catch (NumberFormatException e) {
        throw new IOException("the answer's field " + name + " is not a number: " + v);
      }
    }

    String describe() {
      return "code " + code + (remark == null ? "" : ": " + remark);
    }
  }

  Remoting(String addr, int timeoutMs, Tls tls) throws IOException {
    this.addr = addr;
    this.tls = tls;
    int colon = addr.lastIndexOf(':');
    if (colon <= 0) {
      throw new IOException("address " + addr + " is not host:port");
    }
    String host = addr.substring(0, colon).replace("[", "").replace("]", "");
    int port;
    try {
      port = Integer.parseInt(addr.substring(colon + 1).trim());
    } catch (NumberFormatException e) {
      throw new IOException("address " + addr + " is not host:port");
    }
    Socket plain = new Socket();
    plain.setTcpNoDelay(true);
    plain.setSoTimeout(timeoutMs);
    plain.connect(new InetSocketAddress(host, port), timeoutMs);
    socket = tls == null ? plain : tls.wrap(plain, host, port, addr);
    in = new DataInputStream(new BufferedInputStream(socket.getInputStream(), 1 << 16));
    out = new DataOutputStream(new BufferedOutputStream(socket.getOutputStream(), 1 << 13));
  }

  /** Send a request (no body), signed by {@code signer} unless it is null; its opaque id. */
  int send(int code, Map<String, String> ext, Signer signer) throws IOException {
    int opaque = nextOpaque++;
    if (signer != null) {
      ext = new java.util.HashMap<>(ext);
      signer.sign(ext, instance + "-" + (++signed)); // numbered in the order they go out
    }
    ObjectNode header = JSON.createObjectNode();
    header.put("code", code);
    header.put("language", "JAVA");
    header.put("version", 0);
    header.put("opaque", opaque);
    header.put("flag", 0);
    header.put("serializeTypeCurrentRPC", "JSON");
    ObjectNode fields = header.putObject("extFields");
    for (Map.Entry<String, String> e : ext.entrySet()) {
      fields.put(e.getKey(), e.getValue());
    }
    byte[] raw = JSON.writeValueAsBytes(header);
    try {
      out.writeInt(4 + raw.length);
      out.writeInt(raw.length); // serializeType 0: JSON
      out.write(raw);
      out.flush();
      inFlight++;
    } catch (IOException e) {
      broken = true;
      throw new IOException("sending to " + addr + " failed: " + e.getMessage(), e);
    }
    return opaque;
  }

  /** The answer to request {@code opaque}. */
  Response receive(int opaque) throws IOException {
    Response kept = early.remove(opaque);
    if (kept != null) {
      inFlight--;
      return kept;
    }
    while (true) {
      int got;
      Response r;
      try {
        int length = in.readInt();
        if (length < 4 || length > MAX_FRAME_BYTES) {
          throw new IOException("frame length " + length + " out of range");
        }
        int mark = in.readInt();
        int headerLen = mark & 0xFFFFFF;
        if ((mark >>> 24) != 0 || headerLen > length - 4) {
          throw new IOException("frame header is not JSON of a fitting length");
        }
        byte[] header = new byte[headerLen];
        in.readFully(header);
        byte[] body = new byte[length - 4 - headerLen];
        in.readFully(body);
        JsonNode h = JSON.readTree(header);
        got = h.path("opaque").asInt();
        if ((h.path("flag").asInt() & FLAG_RESPONSE) == 0) {
          continue; // a request from the server: none is expected on a reader's connection
        }
        Map<String, String> ext = new HashMap<>();
        JsonNode fields = h.path("extFields");
        for (Map.Entry<String, JsonNode> e : fields.properties()) {
          ext.put(e.getKey(), e.getValue().asText());
        }
        JsonNode remark = h.get("remark");
        r = new Response(
            h.path("code").asInt(), remark == null || remark.isNull() ? null : remark.asText(), ext, body);
      } catch (IOException e) {
        broken = true;
        throw new IOException("reading from " + addr + " failed: " + e.getMessage(), e);
      }
      if (got == opaque) {
        inFlight--;
        return r;
      }
      early.put(got, r);
    }
  }

  /** The longest wait for an answer's bytes from now on (each user of a kept connection sets its own). */
  void timeout(int timeoutMs) throws IOException {
    socket.setSoTimeout(timeoutMs);
  }

  Response call(int code, Map<String, String> ext, Signer signer) throws IOException {
    return receive(send(code, ext, signer));
  }

  /** Whether it can be handed to the next user: nothing broke and no answer is owed. */
  boolean reusable() {
    return !broken && inFlight == 0 && !socket.isClosed();
  }

  static JsonNode json(byte[] raw) throws IOException {
    return JSON.readTree(raw);
  }

  @Override
  public void close() {
    try {
      socket.close();
    } catch (IOException ignored) {
      // closing: nothing left to do with it
    }
  }
}
