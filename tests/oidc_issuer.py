"""A local OIDC issuer for the tests: discovery and JWKS over HTTPS (a test CA), signing
keys made with cryptography, JWTs signed with PyJWT, and a count of what was fetched."""

from __future__ import annotations

import ssl
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from tests.certs import issue, make_ca
from tests.json_handler import JsonHandler

AUDIENCE = "metastore"
REALM = "/realms/platform"

SigningKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey


def new_key(kind: str = "RSA") -> SigningKey:
    if kind == "EC":
        return ec.generate_private_key(ec.SECP256R1())
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _jwk(kid: str, key: SigningKey) -> dict[str, Any]:
    if isinstance(key, rsa.RSAPrivateKey):
        jwk = RSAAlgorithm.to_jwk(key.public_key(), as_dict=True)
        jwk["alg"] = "RS256"
    else:
        jwk = ECAlgorithm.to_jwk(key.public_key(), as_dict=True)
        jwk["alg"] = "ES256"
    return {**jwk, "kid": kid, "use": "sig"}


class Issuer:
    """Serves `<url>/.well-known/openid-configuration` and its JWKS; `keys` is what the
    JWKS publishes (kid -> key), changed by `rotate`; `fetched` counts the paths asked."""

    def __init__(self, folder: Path) -> None:
        ca = make_ca(folder, "issuer-ca")
        self.ca_file = ca.cert
        pair = issue(ca, folder, "issuer")
        self.keys: dict[str, SigningKey] = {"key-1": new_key()}
        self.fetched: Counter[str] = Counter()
        self._lock = threading.Lock()
        issuer = self

        class Handler(JsonHandler):
            def do_GET(self) -> None:
                with issuer._lock:
                    issuer.fetched[self.path] += 1
                    keys = dict(issuer.keys)
                if self.path == REALM + "/.well-known/openid-configuration":
                    body: Any = {"issuer": issuer.url, "jwks_uri": issuer.url + "/certs"}
                elif self.path == REALM + "/certs":
                    body = {"keys": [_jwk(kid, key) for kid, key in keys.items()]}
                else:
                    self.send_error(404)
                    return
                self.send_json(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(pair.cert, pair.key)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self.server.server_address[1]}{REALM}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def env(self) -> dict[str, str]:
        """The API's variables for this issuer (as the chart sets them)."""
        return {
            "METASTORE_OIDC_ISSUER": self.url,
            "METASTORE_OIDC_AUDIENCE": AUDIENCE,
            "METASTORE_OIDC_CA_FILE": str(self.ca_file),
        }

    @property
    def jwks_fetches(self) -> int:
        return self.fetched[REALM + "/certs"]

    def rotate(self, kid: str, kind: str = "RSA") -> None:
        """The issuer replaces its keys with a new one."""
        with self._lock:
            self.keys = {kid: new_key(kind)}

    def token(
        self,
        user: str | None = "alice",
        groups: list[str] | None = None,
        *,
        kid: str | None = None,
        key: SigningKey | None = None,
        expires_in: float = 300,
        **claims: Any,
    ) -> str:
        """A JWT of the issuer's current key (or `key`, under `kid`); `claims` override."""
        kid = kid or next(iter(self.keys))
        key = key or self.keys[kid]
        now = int(time.time())
        payload: dict[str, Any] = {
            "iss": self.url,
            "aud": AUDIENCE,
            "iat": now,
            "exp": now + int(expires_in),
            "sub": f"id-of-{user}",
            "preferred_username": user,
        }
        if groups is not None:
            payload["groups"] = groups
        payload.update(claims)
        payload = {k: v for k, v in payload.items() if v is not None}
        algorithm = "RS256" if isinstance(key, rsa.RSAPrivateKey) else "ES256"
        return jwt.encode(payload, key, algorithm=algorithm, headers={"kid": kid})

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=5)


@contextmanager
def running_issuer(folder: Path) -> Iterator[Issuer]:
    issuer = Issuer(folder)
    try:
        yield issuer
    finally:
        issuer.close()
