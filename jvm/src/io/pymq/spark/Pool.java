package io.pymq.spark;

import java.io.IOException;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.TimeUnit;

/**
 * Connections kept per executor JVM, by address, so that the next task (and the next read)
 * does not connect again: as Kafka's connector keeps its consumers. A connection idle for
 * longer than {@link #IDLE_NS} is closed instead of reused (its server may have dropped it);
 * one that broke or still owes an answer is never given back.
 */
final class Pool {
  static final long IDLE_NS = TimeUnit.SECONDS.toNanos(30);
  private static final int KEEP_PER_ADDR = 4;
  private static final Map<String, ConcurrentLinkedDeque<Remoting>> IDLE = new ConcurrentHashMap<>();

  private Pool() {}

  /** Connections are kept apart by address and by the TLS trust they were checked with. */
  private static String key(String addr, Tls tls) {
    return tls == null ? addr : tls.key() + addr;
  }

  /**
   * One request and its answer on a kept connection; if that fails (its server closed it
   * meanwhile, e.g. restarted on the same address), once more on a new one.
   */
  static Remoting.Response call(
      String addr, int timeoutMs, int code, Map<String, String> ext, Signer signer, Tls tls)
      throws IOException {
    Remoting c = take(addr, timeoutMs, false, tls);
    boolean kept = c.idleSince != 0;
    try {
      return c.call(code, ext, signer);
    } catch (IOException e) {
      if (!kept) {
        throw e;
      }
      c.close();
      c = take(addr, timeoutMs, true, tls);
      return c.call(code, ext, signer);
    } finally {
      give(c);
    }
  }

  /**
   * A connection to {@code addr} (over TLS when {@code tls} is not null); {@code fresh}: a new
   * one even if one is kept.
   */
  static Remoting take(String addr, int timeoutMs, boolean fresh, Tls tls) throws IOException {
    ConcurrentLinkedDeque<Remoting> kept = IDLE.get(key(addr, tls));
    if (!fresh && kept != null) {
      Remoting c;
      while ((c = kept.pollFirst()) != null) {
        if (System.nanoTime() - c.idleSince < IDLE_NS) {
          try {
            c.timeout(timeoutMs); // a planner's short calls and a reader's pages share connections
            return c;
          } catch (IOException e) {
            c.close(); // its socket is gone: the next kept one, or a new one
            continue;
          }
        }
        c.close();
      }
    }
    return new Remoting(addr, timeoutMs, tls);
  }

  /** Keep {@code c} for the next user if it can be reused, else close it. */
  static void give(Remoting c) {
    if (!c.reusable()) {
      c.close();
      return;
    }
    c.idleSince = System.nanoTime();
    ConcurrentLinkedDeque<Remoting> kept =
        IDLE.computeIfAbsent(key(c.addr, c.tls), a -> new ConcurrentLinkedDeque<>());
    kept.addFirst(c);
    while (kept.size() > KEEP_PER_ADDR) {
      Remoting extra = kept.pollLast();
      if (extra == null) {
        break;
      }
      extra.close();
    }
  }
}
