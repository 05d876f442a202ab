package io.pymq.spark;

import java.io.IOException;
import java.io.InputStream;
import java.io.Serializable;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Paths;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLHandshakeException;
import javax.net.ssl.SSLParameters;
import javax.net.ssl.SSLSocket;
import javax.net.ssl.SSLSocketFactory;
import javax.net.ssl.TrustManagerFactory;

/**
 * TLS to servers that serve it (options tls / tlsCaFile): the server's certificate checked
 * against the PEM CA file (else the JVM's CAs) and against the address connected to, as pymq's
 * Python client does. One socket factory per CA file and JVM.
 */
final class Tls implements Serializable {
  private static final long serialVersionUID = 1L;
  private static final Map<String, SSLSocketFactory> FACTORIES = new ConcurrentHashMap<>();

  private final String caFile; // null: the JVM's CAs

  Tls(String caFile) {
    this.caFile = caFile == null || caFile.isBlank() ? null : caFile;
  }

  /** What connections checked with this trust are kept under (with their address). */
  String key() {
    return "tls:" + (caFile == null ? "" : caFile) + "|";
  }

  /** {@code plain} (connected to {@code host:port}) wrapped in TLS, the handshake done. */
  Socket wrap(Socket plain, String host, int port, String addr) throws IOException {
    SSLSocket s = (SSLSocket) factory().createSocket(plain, host, port, true);
    SSLParameters params = s.getSSLParameters();
    params.setEndpointIdentificationAlgorithm("HTTPS"); // the certificate names this host/IP
    s.setSSLParameters(params);
    try {
      s.startHandshake();
    } catch (SSLHandshakeException e) {
      s.close();
      throw new IOException("TLS to " + addr + ": the server's certificate is not trusted or "
          + "does not name it (" + rootMessage(e) + ")", e);
    } catch (IOException e) {
      s.close();
      throw new IOException("TLS to " + addr + " failed (" + rootMessage(e)
          + "): is it a TLS port?", e);
    }
    return s;
  }

  private SSLSocketFactory factory() throws IOException {
    String key = caFile == null ? "" : caFile;
    SSLSocketFactory f = FACTORIES.get(key);
    if (f == null) {
      f = build();
      FACTORIES.putIfAbsent(key, f);
    }
    return f;
  }

  private SSLSocketFactory build() throws IOException {
    try {
      if (caFile == null) {
        return SSLContext.getDefault().getSocketFactory();
      }
      KeyStore trusted = KeyStore.getInstance(KeyStore.getDefaultType());
      trusted.load(null, null);
      int i = 0;
      try (InputStream in = Files.newInputStream(Paths.get(caFile))) {
        for (Certificate cert : CertificateFactory.getInstance("X.509").generateCertificates(in)) {
          trusted.setCertificateEntry("ca-" + i++, cert);
        }
      }
      if (i == 0) {
        throw new IOException("option tlsCaFile: " + caFile + " holds no PEM certificate");
      }
      TrustManagerFactory tmf =
          TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
      tmf.init(trusted);
      SSLContext ctx = SSLContext.getInstance("TLS");
      ctx.init(null, tmf.getTrustManagers(), null);
      return ctx.getSocketFactory();
    } catch (NoSuchFileException e) {
      throw new IOException("option tlsCaFile: " + caFile + " does not exist", e);
    } catch (GeneralSecurityException e) {
      throw new IOException("option tlsCaFile: cannot use " + caFile + ": " + e.getMessage(), e);
    }
  }

  private static String rootMessage(Throwable e) {
    Throwable t = e;
    while (t.getCause() != null && t.getCause() != t) {
      t = t.getCause();
    }
    return String.valueOf(t.getMessage());
  }
}
