"""Credentials scrubbed from an event before it is appended: the one change made to an event.

Emitters put secrets where they do not belong: a password in a JDBC URL or a dataset
namespace (`postgres://etl:hunter2@db:5432`), an S3 secret key in Spark's properties, a
token in an environment facet. The log is append-only and exported, so a secret stored
once is kept and handed out for good; it is replaced here by MARKER, and the event's
`metastore_redaction` facet lists the JSON pointers (RFC 6901) of the values changed.

What is redacted (README "Credentials in events" is the user's copy of this list):
- a string value whose key names a secret (`secret_key`, read from the key's last 256
  characters): split into words at `.`, `_`, `-`, `/`, `:`, spaces and camelCase, its last
  word ends in password/passwd/pwd/passphrase/secret/token or is credential(s) or
  authorization; or its last word is key(s) after secret/private/api/account/master/
  encryption/signing, or with `secret` among the words (`aws_secret_access_key`); or it
  ends in `jaas config`; or holds `account key` (Azure's `fs.azure.account.key.<account>`).
  An access key *id* (`fs.s3a.access.key`, `aws_access_key_id`) is not a secret and stays;
- in any string: the password of a URI's userinfo (`scheme://user:password@host`: the
  user stays), Oracle's `jdbc:oracle:thin:user/password@`, and the value of a `name=value`
  property whose name names a secret (the same rule) after `?`, `&`, `;`, whitespace or at
  the start (JDBC URLs of PostgreSQL, MySQL, SQL Server, connection strings); the value
  runs to the next `&`, `;`, quote or whitespace.
Only strings are replaced (a number or an object under a secret-named key stays: column
names key `columnLineage` maps, and a column may be called `password`). SQL text is not
parsed (a `CREATE USER ... PASSWORD '...'` stays).

Most events hold nothing of this: `may_hold_secrets` looks at the raw bytes (a lower-cased
copy searched for a few words, in C) and only when it hits is the decoded event walked.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from typing import Any

MARKER = "***REDACTED***"
FACET = "metastore_redaction"
FACET_PRODUCER = "https://github.com/stackabletech/metastore"
FACET_SCHEMA_URL = (
    "https://github.com/stackabletech/metastore/blob/main/README.md#credentials-in-events"
)

# Every secret-named key and every pattern below contains `pass`, `pwd`, `secret`, `token`,
# `credential`, `authorization` or `jaas` (lower-cased), a qualified key (`_KEY_BYTES`) or a
# `:...@` userinfo (`_USERINFO_BYTES`): an event with none of them is stored as sent. Each
# `in` is a pass over the bytes in C, about 1 µs per KB: the fewer words, the cheaper.
_KEY_BYTES = re.compile(rb"(?:api|private|account|master|encryption|signing)[._\-]?key")
_USERINFO_BYTES = re.compile(rb"://[^\s\"/@?#]*:[^\s\"/?#]*@")

_SECRET_LAST_WORDS = ("password", "passwd", "pwd", "passphrase", "secret", "token")
_SECRET_WORDS = frozenset({"credential", "credentials", "authorization"})
_KEY_QUALIFIERS = frozenset(
    {"secret", "private", "api", "account", "master", "encryption", "signing"}
)
# A key's words are read from its last MAX_KEY_CHARS characters (a property name of a
# megabyte would otherwise be split in full); one without a hint is no secret's name.
MAX_KEY_CHARS = 256
_KEY_HINTS = ("pass", "pwd", "secret", "token", "credential", "authorization", "key", "jaas")
_SPLIT_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
_WORD_SEPARATORS = re.compile(r"[._\-\s/:]+")

# Each pattern starts at a literal or a separator and never backtracks over a run, so a
# string of megabytes (a Spark plan) costs one pass. The password runs to the authority's
# last `@` (an unescaped `@` in it leaks nothing), at most 1,024 characters.
_USERINFO = re.compile(r"(?P<head>://[^\s\"'/@?#:]{0,1024}:)(?P<secret>[^\s\"'/?#]{1,1024})@")
_ORACLE = re.compile(r"(?P<head>jdbc:oracle:[a-z]+:[^\s\"'/@:]++/)(?P<secret>[^\s\"'@]++)@", re.I)
# `name=value` after a separator; the name decides (`secret_key`), as for an object key.
_PROPERTY = re.compile(r"(?:^|(?<=[?&;\s]))(?P<name>[\w.\-]++)\s*+=\s*+(?P<secret>[^&;\s\"']++)")


def may_hold_secrets(text: bytes) -> bool:
    """False when `text` (an event's JSON) surely holds nothing `redact` would change."""
    lowered = text.lower()
    return (
        b"pass" in lowered
        or b"secret" in lowered
        or b"token" in lowered
        or b"pwd" in lowered
        or b"credential" in lowered
        or b"authorization" in lowered
        or b"jaas" in lowered
        or (b"key" in lowered and _KEY_BYTES.search(lowered) is not None)
        # (Oracle's `user/password@` has an `@` too, and is rarer than a userinfo)
        or (
            b"@" in text and (_USERINFO_BYTES.search(text) is not None or b"jdbc:oracle" in lowered)
        )
    )


def secret_key(key: str) -> bool:
    """Whether a value under this object key is a credential (see the module's list)."""
    key = key[-MAX_KEY_CHARS:]
    if not _hinted(key.lower()):  # most keys: no split needed
        return False
    words = [w for w in _WORD_SEPARATORS.split(_SPLIT_CAMEL.sub(r"\1.\2", key).lower()) if w]
    if not words:
        return False
    last = words[-1]
    if last.endswith(_SECRET_LAST_WORDS) or last in _SECRET_WORDS:
        return True
    if (
        last in ("key", "keys")
        and len(words) > 1
        and (words[-2] in _KEY_QUALIFIERS or "secret" in words)
    ):
        return True
    if len(words) > 1 and words[-2:] == ["jaas", "config"]:
        return True
    return any(a == "account" and b == "key" for a, b in itertools.pairwise(words))


def redact_string(value: str) -> str:
    """`value` with the passwords of URIs, Oracle JDBC URLs and secret properties masked."""
    if "=" in value and _hinted(value.lower()):
        value = _PROPERTY.sub(_masked_property, value)
    if "@" in value:
        if "://" in value:
            value = _USERINFO.sub(_masked, value)
        if "jdbc:" in value:
            value = _ORACLE.sub(_masked, value)
    return value


def _hinted(lowered: str) -> bool:
    return any(hint in lowered for hint in _KEY_HINTS)


def _masked_property(match: re.Match[str]) -> str:
    if not secret_key(match.group("name")):
        return match.group(0)
    return match.group(0)[: match.start("secret") - match.start()] + MARKER


def _masked(match: re.Match[str]) -> str:
    return match.group("head") + MARKER + match.group(0)[match.end("secret") - match.start() :]


def redact(document: dict[str, Any]) -> list[str]:
    """Masks every credential in the decoded event, in place; the JSON pointers masked.

    When any was, the event's redaction facet (`FACET`) lists them: in `run.facets` of a
    run event, `job.facets` of a job event, `dataset.facets` of a dataset event.
    """
    paths: list[str] = []
    _walk(document, paths)
    if paths:
        _note(document, paths)
    return paths


def _walk(document: dict[str, Any], paths: list[str]) -> None:
    """Masks the document's credentials in place, noting their pointers in document order.

    A stack of iterators, not recursion: the decoder takes JSON nested nearly as deep as
    Python's recursion limit, and a recursive walk then failed on what it had accepted.
    """
    stack: list[tuple[Iterator[tuple[Any, Any]], Any, str]] = [
        (iter(document.items()), document, "")
    ]
    while stack:
        items, container, pointer = stack[-1]
        for key, item in items:
            if isinstance(container, dict):
                child = pointer + "/" + key.replace("~", "~0").replace("/", "~1")
                if isinstance(item, str) and item and item != MARKER and secret_key(key):
                    container[key] = MARKER
                    paths.append(child)
                    continue
            else:
                child = f"{pointer}/{key}"
            if isinstance(item, str):
                masked = redact_string(item)
                if masked != item:
                    container[key] = masked
                    paths.append(child)
            elif isinstance(item, dict):
                stack.append((iter(item.items()), item, child))
                break
            elif isinstance(item, list):
                stack.append((enumerate(item), item, child))
                break
        else:
            stack.pop()


def _note(document: dict[str, Any], paths: list[str]) -> None:
    """Adds (or extends) the redaction facet where the event's kind keeps facets."""
    owner_key = "run" if "run" in document else "job" if "job" in document else "dataset"
    owner = document.get(owner_key)
    if not isinstance(owner, dict):
        return
    facets = owner.get("facets")
    if facets is None:
        facets = owner["facets"] = {}
    if not isinstance(facets, dict):  # a malformed facets value is kept as sent
        return
    earlier = facets.get(FACET)
    noted = earlier.get("paths") if isinstance(earlier, dict) else None
    known = [p for p in noted if isinstance(p, str)] if isinstance(noted, list) else []
    facets[FACET] = {
        "_producer": FACET_PRODUCER,
        "_schemaURL": FACET_SCHEMA_URL,
        "paths": known + [p for p in paths if p not in known],
    }
