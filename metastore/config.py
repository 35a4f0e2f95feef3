"""Configuration from `METASTORE_*` environment variables.

Every setting is read once, at start, by `load_settings`. A wrong value raises
`ConfigError` whose message names the variable; the CLI prints it on one line and exits.
"""

from __future__ import annotations

import os
import re
import ssl
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import msgspec

from metastore import cadence_overrides
from metastore.catalogs import NO_CATALOGS, CatalogFileError, CatalogMap, load_catalog_map
from metastore.policy import Policy, PolicyFileError, load_policy
from metastore.tls import TLSFileError, TLSFiles, server_context

T = TypeVar("T")

LOG_LEVELS = ("debug", "info", "warning", "error")
LOG_FORMATS = ("text", "json")
SCOPES = ("ingest", "read", "export")


class ConfigError(Exception):
    """A configuration value is wrong; the message names the variable."""


class NamedToken(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """A bearer token that is a principal with a name (METASTORE_TOKENS_FILE)."""

    name: str
    scopes: list[str]
    token: str = ""
    token_file: str = ""  # a mounted Secret's key, read at start
    groups: list[str] = []
    # May name the user it acts for in X-Metastore-User (Cockpit): that user is the principal.
    act_for_users: bool = False


@dataclass(frozen=True)
class OidcSettings:
    """Users' OIDC bearer JWTs: whose, for whom, and which claims name the user."""

    issuer: str  # the issuer's URL without a trailing slash (discovery is below it)
    audience: str
    principal_claim: str = "preferred_username"
    groups_claim: str = "groups"
    ca_file: str | None = None  # PEM bundle the issuer's certificate is checked with
    scopes: frozenset[str] = frozenset({"read"})  # the API scopes a valid JWT grants


@dataclass(frozen=True, slots=True)
class OpaSettings:
    """Where decisions are asked (metastore.opa), as a Stackable product's OPA settings."""

    url: str  # the OPA discovery ConfigMap's `OPA`, e.g. http://opa.opa.svc:8081/
    package: str  # e.g. `metastore`: rules data.metastore.allow and data.metastore.batch
    ca_file: str | None = None  # the CA of OPA's certificate (OPA_SECRET_CLASS), for https
    timeout: float = 2.0
    cache_seconds: float = 30.0
    cache_size: int = 100_000

    def rule_url(self, rule: str) -> str:
        return f"{self.url.rstrip('/')}/v1/data/{self.package.replace('.', '/')}/{rule}"


@dataclass(frozen=True)
class Settings:
    database_url: str | None
    host: str
    port: int
    projector_port: int
    log_level: str
    log_format: str
    max_event_bytes: int
    max_inflight_bytes: int
    request_timeout: float
    pool_size: int
    auth_disabled: bool
    tokens: Mapping[str, frozenset[str]] = field(default_factory=dict)
    # Named tokens (METASTORE_TOKENS_FILE), each a principal; their token is filled in.
    named_tokens: tuple[NamedToken, ...] = ()
    # Users' OIDC bearer JWTs (None: not accepted).
    oidc: OidcSettings | None = None
    # Authorization decisions from the chart values' policy (None: everything allowed).
    policy: Policy | None = None
    # Authorization decisions asked of OPA (None: the policy file's, if any).
    opa: OpaSettings | None = None
    read_database_url: str | None = None
    # Seconds a statement of a read may run (api/v1, export); past it the read answers 503.
    read_timeout: float = 10.0
    tls: TLSFiles | None = None
    # Which engine catalog is which metastore (the projector joins their names).
    catalogs: CatalogMap = NO_CATALOGS
    # Namespaces whose TrinoCatalogs add to the map (projector and replay; empty: none).
    catalogs_from_kubernetes: tuple[str, ...] = ()
    # Roles `migrate` grants what `api` and `projector` need (a least-privilege install).
    api_role: str | None = None
    projector_role: str | None = None
    # A projection not moved for this long while events wait is stalled (metastore.stalls).
    stall_timeout: float = 60.0
    # Per-job cadence overrides, compiled (metastore/cadence_overrides.py; None: none).
    cadence_overrides: str | None = None

    @property
    def auth_configured(self) -> bool:
        return (
            bool(self.named_tokens)
            or self.oidc is not None
            or any(self.tokens.get(scope) for scope in SCOPES)
        )


# One row per variable: (name, default, description). README's table is checked against
# this list by a test, so the documentation cannot drift from the code.
VARIABLES: tuple[tuple[str, str, str], ...] = (
    (
        "METASTORE_DATABASE_URL",
        "",
        "libpq URL of the PostgreSQL database. `dev` starts an "
        "embedded PostgreSQL when unset; `api`, `projector`, `migrate` and `replay` need it.",
    ),
    (
        "METASTORE_READ_DATABASE_URL",
        "",
        "libpq URL of a streaming replica of that database: `/api/v1` and the export feed "
        "read from it, ingest and the projector keep the primary.",
    ),
    ("METASTORE_HOST", "0.0.0.0", "Address the API listens on (`dev`: 127.0.0.1)."),
    ("METASTORE_PORT", "8080", "Port of the API (ingest, read and export)."),
    (
        "METASTORE_PROJECTOR_PORT",
        "9090",
        "Port of the projector's /healthz, /readyz, /metrics (`dev`: a free port unless set).",
    ),
    (
        "METASTORE_TLS_CERT_FILE",
        "",
        "PEM server certificate (chain): the API and the projector's port speak HTTPS only.",
    ),
    ("METASTORE_TLS_KEY_FILE", "", "PEM private key of that certificate (unencrypted)."),
    (
        "METASTORE_TLS_CLIENT_CA_FILE",
        "",
        "PEM CA bundle: clients must present a certificate it signed (mutual TLS).",
    ),
    ("METASTORE_LOG_LEVEL", "info", "One of debug, info, warning, error."),
    ("METASTORE_LOG_FORMAT", "text", "`json` (one object a line) or `text`."),
    ("METASTORE_MAX_EVENT_BYTES", "33554432", "Largest request body, before and after gzip."),
    (
        "METASTORE_MAX_INFLIGHT_BYTES",
        "",
        "Request body bytes one API process holds at once (after gzip); past it, ingest "
        "answers 503 with Retry-After. At least METASTORE_MAX_EVENT_BYTES. Default: 4 times "
        "METASTORE_MAX_EVENT_BYTES, or 1/16 of the memory (container limit or RAM) if less.",
    ),
    ("METASTORE_REQUEST_TIMEOUT", "30", "Seconds a client may take to send its request."),
    (
        "METASTORE_READ_TIMEOUT",
        "10",
        "Seconds a statement of a read (`/api/v1`, export) may run; past it the read answers "
        "503 of type `read-timeout` naming this limit.",
    ),
    (
        "METASTORE_STALL_TIMEOUT",
        "60",
        "Seconds a projection may go without folding while events wait before the projector's "
        "/readyz fails (503) and the API's /readyz and /api/v1/status report it stalled.",
    ),
    (
        "METASTORE_POOL_SIZE",
        "8",
        "Database connections per API process for reads and export; ingest has 3 more, and "
        "`/readyz` and `/api/v1/status` 2 of their own.",
    ),
    ("METASTORE_AUTH", "enabled", "`disabled` lets `api` run without tokens (explicit opt-out)."),
    ("METASTORE_INGEST_TOKENS", "", "Comma-separated bearer tokens for POST /ingest/..."),
    ("METASTORE_INGEST_TOKENS_FILE", "", "File with one ingest token a line."),
    ("METASTORE_READ_TOKENS", "", "Comma-separated bearer tokens for /api/v1/..."),
    ("METASTORE_READ_TOKENS_FILE", "", "File with one read token a line."),
    ("METASTORE_EXPORT_TOKENS", "", "Comma-separated bearer tokens for /export/..."),
    ("METASTORE_EXPORT_TOKENS_FILE", "", "File with one export token a line."),
    (
        "METASTORE_TOKENS_FILE",
        "",
        "JSON list of named tokens, each a principal: `{name, scopes, token_file | token, "
        "groups, act_for_users}` (the chart writes it from `auth.namedTokens`).",
    ),
    (
        "METASTORE_OIDC_ISSUER",
        "",
        "URL of the OIDC issuer whose bearer JWTs are users (`<scheme>://<hostname>:<port>"
        "<rootPath>` of an AuthenticationClass); its keys are read from "
        "`<issuer>/.well-known/openid-configuration`. Unset: no JWTs.",
    ),
    ("METASTORE_OIDC_AUDIENCE", "", "The `aud` a JWT must carry (required with the issuer)."),
    (
        "METASTORE_OIDC_PRINCIPAL_CLAIM",
        "preferred_username",
        "The JWT claim that names the user (an AuthenticationClass's `principalClaim`).",
    ),
    (
        "METASTORE_OIDC_GROUPS_CLAIM",
        "groups",
        "The JWT claim listing the user's groups, when present (policy subjects `group:<g>`).",
    ),
    (
        "METASTORE_OIDC_CA_FILE",
        "",
        "PEM file of the CAs the issuer's HTTPS certificate is checked with (unset: the system's).",
    ),
    (
        "METASTORE_OIDC_SCOPES",
        "read",
        "Comma-separated API scopes a valid JWT grants (ingest, read, export).",
    ),
    (
        "METASTORE_POLICY_FILE",
        "",
        "JSON policy (metastore/policy.py): who may read, write and see sensitive facets of "
        "which namespaces, and read the export feed. Unset: everything is allowed.",
    ),
    (
        "METASTORE_OPA_URL",
        "",
        "OPA's base URL, the `OPA` key of the OPA discovery ConfigMap (the chart's "
        "`authorization.opa.configMapName`): decisions are asked of it. Unset: no OPA.",
    ),
    (
        "METASTORE_OPA_PACKAGE",
        "metastore",
        "The Rego package whose `allow` and `batch` rules decide (`a.b` is `/v1/data/a/b/<rule>`).",
    ),
    ("METASTORE_OPA_CA_FILE", "", "CA certificate(s) of OPA's TLS certificate (https)."),
    ("METASTORE_OPA_TIMEOUT", "2", "Seconds OPA may take to decide; past it 503."),
    ("METASTORE_OPA_CACHE_SECONDS", "30", "Seconds a decision of OPA is kept."),
    ("METASTORE_OPA_CACHE_SIZE", "100000", "Decisions kept at most (per process)."),
    (
        "METASTORE_CADENCE_OVERRIDES",
        "",
        "JSON file of per-job cadence overrides where the learned one is wrong: job "
        "namespace and name patterns, a cadence and/or tolerance, or `ignore` "
        "(docs/LATENESS.md). Read by `api` at start.",
    ),
    (
        "METASTORE_CATALOGS_FILE",
        "",
        "YAML file of the catalog map: which engine catalog is which metastore (see "
        '"Joining the names of one table"). Read by `projector`, `replay` and `dev`.',
    ),
    (
        "METASTORE_CATALOGS_FROM_KUBERNETES",
        "",
        "Comma-separated Kubernetes namespaces whose TrinoClusters and TrinoCatalogs add "
        "entries to the catalog map (`projector` and `replay`, in a pod with a ServiceAccount "
        "that may read them; empty: off).",
    ),
    (
        "METASTORE_API_ROLE",
        "",
        "Read by `migrate`: the database role `metastore api` runs as, when it is not the "
        'migrating role; `migrate` grants it what the API needs (see "Install").',
    ),
    (
        "METASTORE_PROJECTOR_ROLE",
        "",
        "Read by `migrate`: the database role of `metastore projector` and `replay`, when "
        "it is not the migrating role; `migrate` grants it what the projector needs.",
    ),
)
_DEFAULTS = {name: default for name, default, _ in VARIABLES}


def _get(env: Mapping[str, str], name: str) -> str:
    """The variable's value; its default when unset or empty (a chart rendering a value an
    older values file lacks sets it to '')."""
    return env.get(name, "").strip() or _DEFAULTS[name]


def _parse(env: Mapping[str, str], name: str, parse: Callable[[str], T], expected: str) -> T:
    raw = _get(env, name)
    try:
        return parse(raw)
    except (ValueError, TypeError):
        raise ConfigError(f"{name}={raw!r} is invalid: expected {expected}") from None


def _port(raw: str) -> int:
    value = int(raw)
    if not 0 < value < 65536:
        raise ValueError(raw)
    return value


def _positive_int(raw: str) -> int:
    value = int(raw)
    if value <= 0:
        raise ValueError(raw)
    return value


def _positive_float(raw: str) -> float:
    value = float(raw)
    if not value > 0:
        raise ValueError(raw)
    return value


def default_inflight_bytes(max_event_bytes: int, memory_bytes: int | None = None) -> int:
    """4 maximal requests at once, fewer where memory is short, never less than one.

    The API holds about 4 bytes of memory for each request byte it holds (the body, its
    events, the statement's parameters; tests/reliability/test_memory.py measures it), so
    1/16 of the memory keeps a process within a quarter of it.
    """
    memory = memory_bytes if memory_bytes is not None else available_memory()
    return max(max_event_bytes, min(4 * max_event_bytes, memory // 16))


def available_memory() -> int:
    """The container's memory limit (cgroup v2 or v1) or the machine's RAM, the lesser."""
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for limit_file in (
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ):
        try:
            text = Path(limit_file).read_text().strip()
        except OSError:
            continue
        if text.isdigit():
            ram = min(ram, int(text))
    return ram


def _choice(choices: tuple[str, ...]) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        if raw.lower() not in choices:
            raise ValueError(raw)
        return raw.lower()

    return parse


def _tokens(env: Mapping[str, str], scope: str) -> frozenset[str]:
    name = f"METASTORE_{scope.upper()}_TOKENS"
    tokens = {t.strip() for t in _get(env, name).split(",") if t.strip()}
    path = _get(env, name + "_FILE")
    if path:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"{name}_FILE={path!r} cannot be read: {exc.strerror}") from None
        tokens.update(line.strip() for line in text.splitlines() if line.strip())
    return frozenset(tokens)


def _named_tokens(env: Mapping[str, str]) -> tuple[NamedToken, ...]:
    path = _get(env, "METASTORE_TOKENS_FILE")
    if not path:
        return ()
    where = f"METASTORE_TOKENS_FILE={path!r}"
    try:
        entries = msgspec.json.decode(Path(path).read_bytes(), type=list[NamedToken])
    except OSError as exc:
        raise ConfigError(f"{where} cannot be read: {exc.strerror}") from None
    except msgspec.DecodeError as exc:
        raise ConfigError(f"{where} is invalid: {exc}") from None
    named = []
    for entry in entries:
        if unknown := set(entry.scopes) - set(SCOPES):
            raise ConfigError(f"{where}: token {entry.name!r} has unknown scopes {sorted(unknown)}")
        token = entry.token
        if entry.token_file:
            try:
                token = Path(entry.token_file).read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise ConfigError(
                    f"{where}: token {entry.name!r}: {entry.token_file!r} cannot be read: "
                    f"{exc.strerror}"
                ) from None
        if not token:
            raise ConfigError(f"{where}: token {entry.name!r} has no token or token_file")
        named.append(msgspec.structs.replace(entry, token=token, token_file=""))
    return tuple(named)


def _oidc(env: Mapping[str, str]) -> OidcSettings | None:
    issuer = _get(env, "METASTORE_OIDC_ISSUER").rstrip("/")
    audience = _get(env, "METASTORE_OIDC_AUDIENCE")
    ca_file = _get(env, "METASTORE_OIDC_CA_FILE") or None
    if ca_file is not None:
        try:
            ssl.create_default_context(cafile=ca_file)
        except (OSError, ssl.SSLError) as exc:
            reason = getattr(exc, "strerror", None) or "no PEM certificate in it"
            raise ConfigError(
                f"METASTORE_OIDC_CA_FILE={ca_file!r} cannot be read: {reason}"
            ) from None
    scopes = frozenset(
        s.strip().lower() for s in _get(env, "METASTORE_OIDC_SCOPES").split(",") if s.strip()
    )
    if not scopes or scopes - set(SCOPES):
        raise ConfigError(
            f"METASTORE_OIDC_SCOPES={_get(env, 'METASTORE_OIDC_SCOPES')!r} is invalid: "
            f"expected some of {', '.join(SCOPES)}"
        )
    if not issuer:
        if audience:
            raise ConfigError(
                f"METASTORE_OIDC_AUDIENCE={audience!r} is set, but METASTORE_OIDC_ISSUER is not"
            )
        return None
    url = urllib.parse.urlsplit(issuer)
    if url.scheme not in ("http", "https") or not url.hostname or url.query or url.fragment:
        raise ConfigError(
            f"METASTORE_OIDC_ISSUER={issuer!r} is invalid: expected an http(s) URL such as "
            "https://keycloak:8443/realms/platform"
        )
    if not audience:
        raise ConfigError(
            f"METASTORE_OIDC_AUDIENCE is required with METASTORE_OIDC_ISSUER={issuer!r}: "
            "the `aud` of the JWTs meant for metastore"
        )
    return OidcSettings(
        issuer=issuer,
        audience=audience,
        principal_claim=_get(env, "METASTORE_OIDC_PRINCIPAL_CLAIM"),
        groups_claim=_get(env, "METASTORE_OIDC_GROUPS_CLAIM"),
        ca_file=ca_file,
        scopes=scopes,
    )


def _policy(env: Mapping[str, str]) -> Policy | None:
    path = _get(env, "METASTORE_POLICY_FILE")
    if not path:
        return None
    try:
        return load_policy(path)
    except PolicyFileError as exc:
        raise ConfigError(str(exc)) from None


_REGO_PACKAGE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def _rego_package(raw: str) -> str:
    if not _REGO_PACKAGE.fullmatch(raw):
        raise ValueError(raw)
    return raw


def _opa(env: Mapping[str, str]) -> OpaSettings | None:
    # Every value is checked even without a URL, so a mistake shows before OPA is turned on.
    seconds = "a positive number of seconds"
    timeout = _parse(env, "METASTORE_OPA_TIMEOUT", _positive_float, seconds)
    cache_seconds = _parse(env, "METASTORE_OPA_CACHE_SECONDS", _positive_float, seconds)
    cache_size = _parse(env, "METASTORE_OPA_CACHE_SIZE", _positive_int, "a positive integer")
    package = _parse(env, "METASTORE_OPA_PACKAGE", _rego_package, "a Rego package (a.b_c)")
    ca_file = _get(env, "METASTORE_OPA_CA_FILE") or None
    if ca_file is not None and not Path(ca_file).is_file():
        raise ConfigError(f"METASTORE_OPA_CA_FILE={ca_file!r} cannot be read")
    url = _get(env, "METASTORE_OPA_URL")
    if not url:
        return None
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"METASTORE_OPA_URL={url!r} is invalid: expected an http(s):// URL")
    if _get(env, "METASTORE_POLICY_FILE"):
        raise ConfigError(
            "METASTORE_OPA_URL and METASTORE_POLICY_FILE are both set: decisions come from "
            "one of them (with OPA, the policy's rules are the Rego policy's data)"
        )
    return OpaSettings(url, package, ca_file, timeout, cache_seconds, cache_size)


def _tls(env: Mapping[str, str]) -> TLSFiles | None:
    cert = _get(env, "METASTORE_TLS_CERT_FILE")
    key = _get(env, "METASTORE_TLS_KEY_FILE")
    client_ca = _get(env, "METASTORE_TLS_CLIENT_CA_FILE")
    if not cert and not key:
        if client_ca:
            raise ConfigError(
                "METASTORE_TLS_CLIENT_CA_FILE is set without METASTORE_TLS_CERT_FILE and "
                "METASTORE_TLS_KEY_FILE (client certificates need TLS)"
            )
        return None
    if not cert or not key:
        missing = "METASTORE_TLS_KEY_FILE" if cert else "METASTORE_TLS_CERT_FILE"
        given = "METASTORE_TLS_CERT_FILE" if cert else "METASTORE_TLS_KEY_FILE"
        raise ConfigError(f"{missing} is not set, but {given} is (TLS needs both)")
    files = TLSFiles(cert, key, client_ca or None)
    try:
        server_context(files)  # read and checked now, so a wrong file stops the start
    except TLSFileError as exc:
        raise ConfigError(str(exc)) from None
    return files


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    env = os.environ if env is None else env
    max_event_bytes = _parse(
        env, "METASTORE_MAX_EVENT_BYTES", _positive_int, "a positive number of bytes"
    )
    max_inflight_bytes = (
        _parse(env, "METASTORE_MAX_INFLIGHT_BYTES", _positive_int, "a positive number of bytes")
        if _get(env, "METASTORE_MAX_INFLIGHT_BYTES")
        else default_inflight_bytes(max_event_bytes)
    )
    if max_inflight_bytes < max_event_bytes:
        raise ConfigError(
            f"METASTORE_MAX_INFLIGHT_BYTES={max_inflight_bytes} is invalid: expected at least "
            f"METASTORE_MAX_EVENT_BYTES ({max_event_bytes}), or no request of the largest "
            "size could ever be taken"
        )
    auth = _parse(env, "METASTORE_AUTH", _choice(("enabled", "disabled")), "enabled or disabled")
    return Settings(
        database_url=_get(env, "METASTORE_DATABASE_URL") or None,
        host=_get(env, "METASTORE_HOST") or "0.0.0.0",
        port=_parse(env, "METASTORE_PORT", _port, "a port number 1-65535"),
        projector_port=_parse(env, "METASTORE_PROJECTOR_PORT", _port, "a port number 1-65535"),
        log_level=_parse(env, "METASTORE_LOG_LEVEL", _choice(LOG_LEVELS), "|".join(LOG_LEVELS)),
        log_format=_parse(env, "METASTORE_LOG_FORMAT", _choice(LOG_FORMATS), "|".join(LOG_FORMATS)),
        max_event_bytes=max_event_bytes,
        max_inflight_bytes=max_inflight_bytes,
        request_timeout=_parse(
            env, "METASTORE_REQUEST_TIMEOUT", _positive_float, "a positive number of seconds"
        ),
        pool_size=_parse(env, "METASTORE_POOL_SIZE", _positive_int, "a positive integer"),
        read_timeout=_parse(
            env, "METASTORE_READ_TIMEOUT", _positive_float, "a positive number of seconds"
        ),
        stall_timeout=_parse(
            env, "METASTORE_STALL_TIMEOUT", _positive_float, "a positive number of seconds"
        ),
        auth_disabled=auth == "disabled",
        tokens={scope: _tokens(env, scope) for scope in SCOPES},
        named_tokens=_named_tokens(env),
        oidc=_oidc(env),
        policy=_policy(env),
        opa=_opa(env),
        read_database_url=_get(env, "METASTORE_READ_DATABASE_URL") or None,
        tls=_tls(env),
        catalogs=_catalogs(env),
        cadence_overrides=_cadence_overrides(env),
        catalogs_from_kubernetes=tuple(
            n.strip()
            for n in _get(env, "METASTORE_CATALOGS_FROM_KUBERNETES").split(",")
            if n.strip()
        ),
        api_role=_get(env, "METASTORE_API_ROLE") or None,
        projector_role=_get(env, "METASTORE_PROJECTOR_ROLE") or None,
    )


def _cadence_overrides(env: Mapping[str, str]) -> str | None:
    try:
        return cadence_overrides.load(_get(env, cadence_overrides.VARIABLE))
    except cadence_overrides.CadenceFileError as exc:
        raise ConfigError(str(exc)) from None


def _catalogs(env: Mapping[str, str]) -> CatalogMap:
    try:
        return load_catalog_map(_get(env, "METASTORE_CATALOGS_FILE"))
    except CatalogFileError as exc:
        raise ConfigError(str(exc)) from None
