"""A test CA and a server certificate for 127.0.0.1 / localhost, made with the openssl
command (part of every Debian and of the CI image), valid for two days."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

_EXT = (
    "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n"
    "keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n"
)


@dataclass(frozen=True)
class TlsFiles:
    ca: Path
    cert: Path
    key: Path
    other_ca: Path  # a CA that signed nothing here: trusting it must fail


def make_tls_files(where: Path) -> TlsFiles:
    openssl = shutil.which("openssl")
    assert openssl is not None, "the openssl command is needed to make test certificates"
    where.mkdir(parents=True, exist_ok=True)

    def run(*args: str) -> None:
        subprocess.run([openssl, *args], cwd=where, check=True, capture_output=True, timeout=60)

    for name in ("ca", "other-ca"):
        run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
            "-out", f"{name}.pem", "-days", "2", "-subj", f"/CN=pymq test {name}")  # fmt: skip
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
        "-subj", "/CN=localhost")  # fmt: skip
    (where / "ext.cnf").write_text(_EXT)
    run("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "ext.cnf")  # fmt: skip
    return TlsFiles(where / "ca.pem", where / "server.pem", where / "server.key",
                    where / "other-ca.pem")  # fmt: skip


def tls_env(files: TlsFiles) -> dict[str, str]:
    """Servers' settings: both listeners TLS; brokers reach the NameServers over TLS."""
    return {
        "PYMQ_TLS_CERT_FILE": str(files.cert),
        "PYMQ_TLS_KEY_FILE": str(files.key),
        "PYMQ_TLS_CA_FILE": str(files.ca),
    }
