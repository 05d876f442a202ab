package io.pymq.spark;

import java.io.Serializable;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.util.Base64;
import java.util.Map;
import java.util.TreeMap;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * Signs remoting requests with an account (options accessKey / secretKey), as RocketMQ ACL 1.0
 * checks them: {@code Signature} = Base64(HMAC-SHA1(secretKey, the values of every other ext
 * field in key order, then the body)). As pymq's Python client, it also signs the time and a
 * number rising on each request of a connection ({@code pymqSignTime}, {@code pymqSignSeq}), so
 * a captured request cannot be sent again. The secret never appears in {@link #toString}.
 */
final class Signer implements Serializable {
  private static final long serialVersionUID = 1L;

  private final String accessKey;
  private final String secretKey;

  Signer(String accessKey, String secretKey) {
    this.accessKey = accessKey;
    this.secretKey = secretKey;
  }

  /** Adds AccessKey, the time, {@code seq} and Signature to {@code ext} (a request with no body). */
  void sign(Map<String, String> ext, String seq) {
    ext.put("AccessKey", accessKey);
    ext.put("pymqSignTime", Long.toString(System.currentTimeMillis()));
    ext.put("pymqSignSeq", seq);
    ext.remove("Signature");
    StringBuilder content = new StringBuilder();
    for (String value : new TreeMap<>(ext).values()) {
      content.append(value);
    }
    ext.put("Signature", signature(content.toString().getBytes(StandardCharsets.UTF_8)));
  }

  private String signature(byte[] content) {
    try {
      Mac mac = Mac.getInstance("HmacSHA1");
      mac.init(new SecretKeySpec(secretKey.getBytes(StandardCharsets.UTF_8), "HmacSHA1"));
      return Base64.getEncoder().encodeToString(mac.doFinal(content));
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException("HmacSHA1 is not available: " + e.getMessage(), e);
    }
  }

  @Override
  public String toString() {
    return "Signer(" + accessKey + ")";
  }
}
