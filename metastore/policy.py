"""The policy file: authorization decisions from the chart's values, without OPA.

METASTORE_POLICY_FILE names a JSON object; each rule lists subjects (a principal's name,
or `group:<name>`) and namespace patterns (`*` matches any characters, as Rego's
`glob.match` with no delimiters), e.g.

    {"admins": ["group:platform"],
     "read": [{"subjects": ["group:sales"], "namespaces": ["s3a://warehouse*", "hive://*"]}],
     "sensitive": [{"subjects": ["group:sales"], "namespaces": ["s3a://warehouse*"]}],
     "write": [{"subjects": ["spark-sales"], "namespaces": ["spark-sales", "s3a://warehouse*"]}],
     "export": ["lineage-export"]}

Admins may do everything. Whatever no rule allows is denied: a principal without a read
rule sees nothing, and sensitive facets (query text, plans) are shown only where a
`sensitive` rule (or admin) allows.
"""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path

import msgspec

from metastore.principal import Principal

_OPERATION_KEY = {"ReadNamespace": "read", "ShowSensitive": "sensitive", "WriteNamespace": "write"}


class Rule(msgspec.Struct, forbid_unknown_fields=True):
    subjects: list[str]
    namespaces: list[str]


class PolicyFile(msgspec.Struct, forbid_unknown_fields=True):
    admins: list[str] = []
    read: list[Rule] = []
    sensitive: list[Rule] = []
    write: list[Rule] = []
    export: list[str] = []


class PolicyFileError(Exception):
    """The policy file cannot be read or is invalid; the message names the file."""


def _pattern(glob: str) -> re.Pattern[str]:
    # fnmatch's [...] classes are not Rego's glob syntax: only `*` is special here.
    return re.compile(fnmatch.translate(glob.replace("[", "[[]")))


class Policy:
    def __init__(self, spec: PolicyFile) -> None:
        self.admins = frozenset(spec.admins)
        self.export = frozenset(spec.export)
        self.rules = {
            key: [(frozenset(r.subjects), [_pattern(p) for p in r.namespaces]) for r in rules]
            for key, rules in (
                ("read", spec.read),
                ("sensitive", spec.sensitive),
                ("write", spec.write),
            )
        }

    @staticmethod
    def subjects(principal: Principal) -> frozenset[str]:
        return frozenset((principal.name, *(f"group:{g}" for g in principal.groups)))

    def is_admin(self, principal: Principal) -> bool:
        return bool(self.subjects(principal) & self.admins)

    def allows(self, principal: Principal, operation: str, namespace: str | None) -> bool:
        subjects = self.subjects(principal)
        if subjects & self.admins:
            return True
        if operation == "ReadExport":
            return bool(subjects & self.export)
        if namespace is None:
            return False
        return any(
            subjects & who and any(p.fullmatch(namespace) for p in patterns)
            for who, patterns in self.rules[_OPERATION_KEY[operation]]
        )


def load_policy(path: str) -> Policy:
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise PolicyFileError(
            f"METASTORE_POLICY_FILE={path!r} cannot be read: {exc.strerror}"
        ) from None
    try:
        return Policy(msgspec.json.decode(raw, type=PolicyFile))
    except msgspec.ValidationError as exc:
        raise PolicyFileError(f"METASTORE_POLICY_FILE={path!r} is invalid: {exc}") from None
    except msgspec.DecodeError as exc:
        raise PolicyFileError(f"METASTORE_POLICY_FILE={path!r} is not JSON: {exc}") from None
