"""TLS of the API's port and the projector's: the server's SSL context from PEM files.

`METASTORE_TLS_CERT_FILE` and `METASTORE_TLS_KEY_FILE` make a port speak HTTPS only (a
plain-HTTP client fails its handshake); `METASTORE_TLS_CLIENT_CA_FILE` adds mutual TLS.
Each file is read and checked at start, and a problem names the variable of its file.
A renewed certificate is served without a restart (`CertificateReloader`).
"""

from __future__ import annotations

import logging
import os
import ssl
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("metastore.tls")

# How often a handshake looks whether the certificate files changed (two stat calls).
RELOAD_CHECK_S = 5.0


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


class CertificateReloader:
    """Serves the certificate files' current content, read again when they change.

    A Secret mounted by Kubernetes (e.g. one cert-manager renews) changes under the running
    process. At most every RELOAD_CHECK_S, a TLS handshake looks at the files; when they
    changed, a new context is read from them and every later handshake switches to it (the
    SNI callback, which OpenSSL calls for every ClientHello, SNI or not). A context is never
    changed once serving, so threads and the event loop share them safely. Files that do
    not make a valid pair yet (half-renewed) are retried at the next check; the previous
    certificate is served meanwhile.
    """

    def __init__(self, files: TLSFiles, check_every: float = RELOAD_CHECK_S) -> None:
        self.files = files
        self.check_every = check_every
        self._stamp = self._files_stamp()
        self._current: ssl.SSLContext | None = None  # None: the context it is attached to
        self._next_check = time.monotonic() + check_every

    def attach(self, context: ssl.SSLContext) -> ssl.SSLContext:
        context.sni_callback = self._on_client_hello
        return context

    def _files_stamp(self) -> tuple[tuple[int, int, int], ...] | None:
        try:
            stats = [os.stat(p) for p in (self.files.cert_file, self.files.key_file)]
        except OSError:
            return None
        return tuple((st.st_ino, st.st_mtime_ns, st.st_size) for st in stats)

    def _on_client_hello(
        self, connection: ssl.SSLObject | ssl.SSLSocket, server_name: str | None, _: object
    ) -> None:
        now = time.monotonic()
        if now >= self._next_check:
            self._next_check = now + self.check_every
            self._reload_if_changed()
        if self._current is not None:
            connection.context = self._current

    def _reload_if_changed(self) -> None:
        stamp = self._files_stamp()
        if stamp is None or stamp == self._stamp:
            return
        try:
            context = server_context(self.files)
        except TLSFileError as exc:
            log.warning("renewed TLS certificate not loaded yet", extra={"error": str(exc)})
            return
        self._stamp = stamp
        self._current = context
        log.info("TLS certificate reloaded", extra={"file": self.files.cert_file})
