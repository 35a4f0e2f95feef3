"""TLS of the API's port and the projector's: the server's SSL context from PEM files.

`METASTORE_TLS_CERT_FILE` and `METASTORE_TLS_KEY_FILE` make a port speak HTTPS only (a
plain-HTTP client fails its handshake); `METASTORE_TLS_CLIENT_CA_FILE` adds mutual TLS.
Each file is read and checked at start, and a problem names the variable of its file.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class TLSFiles:
    """Where the server certificate (chain), its key and the clients' CA are."""

    cert_file: str
    key_file: str
    client_ca_file: str | None = None


class TLSFileError(Exception):
    """A TLS file is missing, unreadable or wrong; the message names its variable."""


CERT = "METASTORE_TLS_CERT_FILE"
KEY = "METASTORE_TLS_KEY_FILE"
CLIENT_CA = "METASTORE_TLS_CLIENT_CA_FILE"


def _read(variable: str, path: str) -> str:
    try:
        return Path(path).read_text(encoding="ascii", errors="replace")
    except OSError as exc:
        raise TLSFileError(f"{variable}={path!r} cannot be read: {exc.strerror}") from None


def _check_certificates(variable: str, path: str, text: str) -> None:
    if "-----BEGIN CERTIFICATE-----" not in text:
        raise TLSFileError(f"{variable}={path!r} holds no PEM certificate")
    try:  # parses every certificate in the file
        ssl.create_default_context(cafile=path)
    except ssl.SSLError as exc:
        raise TLSFileError(
            f"{variable}={path!r} holds a broken certificate: {exc.reason}"
        ) from None


def _refuse_password(*_: object) -> str:
    raise TLSFileError(f"{KEY} is encrypted; metastore needs the key without a passphrase")


def server_context(files: TLSFiles) -> ssl.SSLContext:
    """A server context (TLS 1.2 or newer) serving the certificate, checked file by file."""
    _check_certificates(CERT, files.cert_file, _read(CERT, files.cert_file))
    key = _read(KEY, files.key_file)
    if "PRIVATE KEY-----" not in key:
        raise TLSFileError(f"{KEY}={files.key_file!r} holds no PEM private key")
    if "ENCRYPTED" in key:
        _refuse_password()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(files.cert_file, files.key_file, password=_refuse_password)
    except ssl.SSLError as exc:
        raise TLSFileError(
            f"{KEY}={files.key_file!r} is not the private key of {CERT}={files.cert_file!r} "
            f"({exc.reason})"
        ) from None
    if files.client_ca_file:
        ca = files.client_ca_file
        _check_certificates(CLIENT_CA, ca, _read(CLIENT_CA, ca))
        context.load_verify_locations(cafile=ca)
        context.verify_mode = ssl.CERT_REQUIRED
    return context
