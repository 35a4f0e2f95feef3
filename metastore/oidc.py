"""Users with an OIDC bearer JWT: checked against the issuer's keys, then a principal.

A JWT is a user when its signature verifies with one of the issuer's keys (metastore.jwks;
asymmetric algorithms only, so nobody holding a shared secret can mint one), its `iss` is
the issuer's, its `aud` includes METASTORE_OIDC_AUDIENCE, it has not expired (`exp` is
required; 30 s of clock skew allowed) and it names the user in the principal claim. The
user's groups are the groups claim's strings, when present. A JWT failing a check is
refused with InvalidJwt saying which check, never anything about the keys.

A JWT that passed is remembered (by its digest) for up to a minute, never past its `exp`:
a user's page sends the same JWT many times, and checking one costs PyJWT about 0.1-0.2 ms.
A key the issuer drops stops a remembered JWT within that minute.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import ssl
import time
from collections import OrderedDict

import jwt

from metastore.config import OidcSettings
from metastore.jwks import IssuerUnavailable, SigningKeys
from metastore.principal import Principal

__all__ = ["InvalidJwt", "IssuerUnavailable", "OidcUsers", "looks_like_jwt"]

LEEWAY = 30  # seconds of clock skew between the issuer and us
REMEMBERED = 4096  # JWTs that passed, kept by digest
REMEMBER_SECONDS = 60.0
# The key type each algorithm needs (a JWK without `alg` is matched by its type).
_KEY_TYPE = {
    **{f"{family}{bits}": "RSA" for family in ("RS", "PS") for bits in (256, 384, 512)},
    **{f"ES{bits}": "EC" for bits in (256, 384, 512)},
    "EdDSA": "OKP",
}


class InvalidJwt(Exception):
    """The bearer JWT fails a check; the message says which."""


def looks_like_jwt(token: bytes) -> bool:
    """Three dot-separated parts, the first a base64url JSON object (`{"` is `eyJ`)."""
    return token.count(b".") == 2 and token.startswith(b"eyJ")


def _header(token: bytes) -> dict[str, object]:
    segment = token.split(b".", 1)[0]
    try:
        header = json.loads(base64.urlsafe_b64decode(segment + b"=" * (-len(segment) % 4)))
    except (ValueError, binascii.Error):
        raise InvalidJwt("it is not a well-formed JWT") from None
    if not isinstance(header, dict):
        raise InvalidJwt("it is not a well-formed JWT")
    return header


class OidcUsers:
    def __init__(self, settings: OidcSettings) -> None:
        self.settings = settings
        context = ssl.create_default_context(cafile=settings.ca_file)
        self.keys = SigningKeys(settings.issuer, context)
        # digest -> (until when, on the monotonic clock; the user)
        self._passed: OrderedDict[bytes, tuple[float, Principal]] = OrderedDict()

    async def principal(self, token: bytes) -> Principal:
        """The user the JWT names; InvalidJwt, or IssuerUnavailable when no keys are held."""
        digest = hashlib.sha256(token).digest()
        remembered = self._passed.get(digest)
        if remembered is not None and remembered[0] > time.monotonic():
            self._passed.move_to_end(digest)
            return remembered[1]
        header = _header(token)
        algorithm, kid = header.get("alg"), header.get("kid")
        if not isinstance(algorithm, str) or algorithm not in _KEY_TYPE:
            raise InvalidJwt(
                f"its algorithm (alg) {algorithm!r} is not an asymmetric signature "
                f"({', '.join(_KEY_TYPE)})"
            )
        if kid is not None and not isinstance(kid, str):
            raise InvalidJwt("its key id (kid) is not a string")
        key = await self.keys.key(kid)
        if key is None:
            raise InvalidJwt(f"its key id (kid) {kid!r} is not one of the issuer's keys")
        if key.key_type != _KEY_TYPE[algorithm]:  # no algorithm confusion across key types
            raise InvalidJwt(f"its algorithm (alg) {algorithm!r} does not fit its key")
        claims = self._claims(token, key, algorithm)
        name = claims.get(self.settings.principal_claim)
        if not isinstance(name, str) or not name:
            raise InvalidJwt(f"it has no {self.settings.principal_claim!r} claim naming the user")
        groups = claims.get(self.settings.groups_claim)
        if not isinstance(groups, list):
            groups = []
        user = Principal(
            name=name, kind="user", groups=tuple(g for g in groups if isinstance(g, str))
        )
        expires = claims["exp"]
        assert isinstance(expires, int | float)  # PyJWT checked it is a number
        seconds = min(REMEMBER_SECONDS, expires - time.time())
        if seconds > 0:
            self._passed[digest] = (time.monotonic() + seconds, user)
            if len(self._passed) > REMEMBERED:
                self._passed.popitem(last=False)
        return user

    def _claims(self, token: bytes, key: jwt.PyJWK, algorithm: str) -> dict[str, object]:
        issuer = self.keys.issuer
        audience = self.settings.audience
        try:
            return jwt.decode(
                token,
                key.key,
                algorithms=[algorithm],
                audience=audience,
                issuer=issuer,
                leeway=LEEWAY,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.InvalidSignatureError:
            raise InvalidJwt("its signature does not verify with the issuer's key") from None
        except jwt.ExpiredSignatureError:
            raise InvalidJwt("it has expired (exp)") from None
        except jwt.ImmatureSignatureError:
            raise InvalidJwt("it is not valid yet (nbf or iat)") from None
        except jwt.MissingRequiredClaimError as exc:
            raise InvalidJwt(f"it has no {exc.claim!r} claim") from None
        except jwt.InvalidAudienceError:
            raise InvalidJwt(f"its audience (aud) does not include {audience!r}") from None
        except jwt.InvalidIssuerError:
            raise InvalidJwt(f"its issuer (iss) is not {issuer!r}") from None
        except jwt.PyJWTError as exc:
            raise InvalidJwt(f"it is not valid: {exc}") from None
