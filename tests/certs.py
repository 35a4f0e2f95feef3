"""Certificates made in the test with the openssl command: a CA, and certificates it signs."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Pair:
    cert: Path
    key: Path


def _openssl(*args: str | Path) -> None:
    subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True, timeout=60)


def make_ca(folder: Path, name: str = "test-ca") -> Pair:
    folder.mkdir(parents=True, exist_ok=True)
    ca = Pair(folder / f"{name}.crt", folder / f"{name}.key")
    _openssl(
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
        "-nodes", "-keyout", ca.key, "-out", ca.cert, "-days", "2", "-subj", f"/CN={name}",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
    )  # fmt: skip
    return ca


def issue(ca: Pair, folder: Path, name: str, *, client: bool = False) -> Pair:
    """A certificate for 127.0.0.1 and localhost (a server's), or a client's, signed by `ca`."""
    pair = Pair(folder / f"{name}.crt", folder / f"{name}.key")
    csr = folder / f"{name}.csr"
    ext = folder / f"{name}.ext"
    ext.write_text(
        "basicConstraints=critical,CA:FALSE\n"
        "keyUsage=critical,digitalSignature\n"
        f"extendedKeyUsage={'clientAuth' if client else 'serverAuth'}\n"
        "subjectKeyIdentifier=hash\n"
        "authorityKeyIdentifier=keyid\n"
        + ("" if client else "subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    )
    _openssl(
        "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", pair.key, "-out", csr, "-subj", f"/CN={name}",
    )  # fmt: skip
    _openssl(
        "x509", "-req", "-in", csr, "-CA", ca.cert, "-CAkey", ca.key, "-CAcreateserial",
        "-out", pair.cert, "-days", "2", "-extfile", ext,
    )  # fmt: skip
    return pair
