"""Identities through a real `metastore api`: named tokens, Cockpit acting for a user
(X-Metastore-User), and users with an OIDC JWT from a local issuer (tests/oidc_issuer.py)."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest

from metastore.embedded_pg import free_port
from metastore.jwks import MIN_REFRESH
from tests.oidc_issuer import Issuer, new_key, running_issuer
from tests.support import Process, running

NAMESPACES = "/api/v1/namespaces"


class Tokens:
    """Named tokens as the chart writes them: Cockpit may act for users, Spark may not."""

    def __init__(self, folder: Path) -> None:
        self.cockpit = f"cockpit-{secrets.token_urlsafe(16)}"
        self.spark = f"spark-{secrets.token_urlsafe(16)}"
        secret = folder / "cockpit-secret"  # a mounted Secret's key
        secret.write_text(self.cockpit + "\n")
        self.file = folder / "tokens.json"
        self.file.write_text(
            json.dumps(
                [
                    {
                        "name": "cockpit",
                        "scopes": ["read"],
                        "token_file": str(secret),
                        "act_for_users": True,
                    },
                    {"name": "spark-sales", "scopes": ["ingest", "read"], "token": self.spark},
                ]
            )
        )


@pytest.fixture
def issuer(tmp_path: Path) -> Iterator[Issuer]:
    with running_issuer(tmp_path / "issuer") as issuer:
        yield issuer


@pytest.fixture
def tokens(tmp_path: Path) -> Tokens:
    return Tokens(tmp_path)


@pytest.fixture
def api(database_url: str, tmp_path: Path, issuer: Issuer, tokens: Tokens) -> Iterator[Process]:
    env = {**issuer.env(), "METASTORE_TOKENS_FILE": str(tokens.file), "METASTORE_AUTH": "enabled"}
    env["METASTORE_LOG_FORMAT"] = "json"
    with running("api", database_url, tmp_path, env=env) as process:
        yield process


def _get(api: Process, token: str, **headers: str) -> httpx.Response:
    return httpx.get(
        api.base_url + NAMESPACES, headers={"Authorization": f"Bearer {token}", **headers}
    )


def _request_lines(api: Process, status: int) -> list[dict[str, Any]]:
    """The access log's lines of /api/v1/namespaces of that status (once in its file)."""
    time.sleep(0.2)
    lines = []
    for line in api.output().splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            if record.get("message") == "request" and (record["path"], record["status"]) == (
                NAMESPACES,
                status,
            ):
                lines.append(record)
    return lines


def _problem(answer: httpx.Response, status: int) -> str:
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    detail: str = answer.json()["detail"]
    return detail


def test_a_user_with_a_jwt_reads_as_that_user_and_the_log_names_them(
    api: Process, issuer: Issuer
) -> None:
    token = issuer.token("alice", ["sales", "analysts"])
    assert _get(api, token).status_code == 200
    (line,) = _request_lines(api, 200)
    assert (line["principal"], line["groups"], line["via"]) == (
        "alice",
        ["sales", "analysts"],
        None,
    )
    # a JWT grants the read scope (METASTORE_OIDC_SCOPES), not ingest
    answer = httpx.post(
        api.base_url + "/ingest/openlineage",
        headers={"Authorization": f"Bearer {token}"},
        json={},
    )
    assert "read API" in _problem(answer, 403)
    assert token not in api.output()


def test_a_jwt_failing_a_check_is_a_401_saying_which_check(api: Process, issuer: Issuer) -> None:
    now = int(time.time())
    stranger = new_key()
    cases = {
        "expired (exp)": issuer.token(expires_in=-120),
        "audience (aud) does not include 'metastore'": issuer.token(aud="trino"),
        f"issuer (iss) is not '{issuer.url}'": issuer.token(iss="https://idp.example/realms/x"),
        "key id (kid) 'gone' is not one of the issuer's keys": issuer.token(
            kid="gone", key=stranger
        ),
        "signature does not verify": issuer.token(kid="key-1", key=stranger),
        "no 'preferred_username' claim": issuer.token(user=None),
        "no 'exp' claim": issuer.token(exp=None),
        "algorithm (alg) 'HS256' is not an asymmetric signature": jwt.encode(
            {"iss": issuer.url, "aud": "metastore", "exp": now + 60, "preferred_username": "x"},
            "a shared secret of 32 bytes at least",
            algorithm="HS256",
            headers={"kid": "key-1"},
        ),
        "not a well-formed JWT": "eyJhbGciOiJSUzI1NiIs.cGF5bG9hZA.c2ln",  # header: {"alg":"RS256",
    }
    for check, token in cases.items():
        answer = _get(api, token)
        assert check in _problem(answer, 401), check
        assert 'error="invalid_token"' in answer.headers["www-authenticate"]
    # a token that is no JWT is refused as before, without a word about JWTs
    assert _problem(_get(api, "not-a-token"), 401) == "the bearer token is not valid"
    output = api.output()
    assert not any(token in output for token in cases.values())


def test_a_rotated_key_is_fetched_and_made_up_key_ids_do_not_hammer_the_issuer(
    api: Process, issuer: Issuer
) -> None:
    old_key = issuer.keys["key-1"]
    assert _get(api, issuer.token("alice")).status_code == 200
    assert issuer.jwks_fetches == 1  # discovery and keys once, then kept
    assert _get(api, issuer.token("bob")).status_code == 200
    assert issuer.jwks_fetches == 1
    issuer.rotate("key-2", kind="EC")
    rotated_at = time.monotonic()
    assert _get(api, issuer.token("alice")).status_code == 200  # the new key, fetched
    assert issuer.jwks_fetches == 2
    # the dropped key no longer verifies (a JWT that passed with it before is remembered for
    # up to a minute), and made-up kids fetch at most once every MIN_REFRESH seconds: none
    # more unless this loop outlasts it (a loaded machine), one more a window then
    signed_with_the_old_key = issuer.token("carol", kid="key-1", key=old_key)
    assert "'key-1' is not one of" in _problem(_get(api, signed_with_the_old_key), 401)
    for n in range(20):
        made_up = issuer.token(kid=f"made-up-{n}", key=new_key("EC"))
        assert "is not one of the issuer's keys" in _problem(_get(api, made_up), 401)
    windows = int((time.monotonic() - rotated_at) // MIN_REFRESH)
    assert issuer.jwks_fetches <= 2 + windows
    discovery = "/realms/platform/.well-known/openid-configuration"
    assert issuer.fetched[discovery] == 1


def test_an_unreachable_issuer_is_a_503_and_tokens_still_work(
    database_url: str, tmp_path: Path, issuer: Issuer, tokens: Tokens
) -> None:
    env = {
        **issuer.env(),
        "METASTORE_OIDC_ISSUER": f"https://127.0.0.1:{free_port()}/realms/platform",
        "METASTORE_TOKENS_FILE": str(tokens.file),
    }
    with running("api", database_url, tmp_path, env=env) as api:
        answer = _get(api, issuer.token("alice"))
        assert "cannot be checked" in _problem(answer, 503)
        assert answer.json()["type"].endswith("/issuer-unavailable")
        assert answer.headers["retry-after"] == "10"
        assert _get(api, tokens.spark).status_code == 200
        assert "oidc keys not fetched" in api.output()


def test_cockpit_acts_for_a_user_and_no_other_principal_may(
    api: Process, issuer: Issuer, tokens: Tokens
) -> None:
    acting = {"X-Metastore-User": "bob", "X-Metastore-Groups": "finance, audit"}
    assert _get(api, tokens.cockpit, **acting).status_code == 200
    assert _get(api, tokens.cockpit).status_code == 200
    (as_bob, as_cockpit) = _request_lines(api, 200)
    assert (as_bob["principal"], as_bob["via"], as_bob["groups"]) == (
        "bob",
        "cockpit",
        ["finance", "audit"],
    )
    assert (as_cockpit["principal"], as_cockpit["via"]) == ("cockpit", None)
    # another token, or a user's JWT, naming a user is refused, not answered as itself
    detail = _problem(_get(api, tokens.spark, **acting), 403)
    assert "'spark-sales' may not act for users" in detail
    assert "X-Metastore-User" in detail
    assert "'alice' may not act" in _problem(
        _get(api, issuer.token("alice"), **{"X-Metastore-User": "bob"}), 403
    )
    assert "'spark-sales' may not" in _problem(
        _get(api, tokens.spark, **{"X-Metastore-Groups": "platform"}), 403
    )
    refused = _request_lines(api, 403)
    assert [line["principal"] for line in refused] == ["spark-sales", "alice", "spark-sales"]
    # Cockpit must name the user
    for user in (b"", b"\xff not UTF-8"):
        answer = httpx.get(
            api.base_url + NAMESPACES,
            headers=[
                (b"Authorization", f"Bearer {tokens.cockpit}".encode()),
                (b"X-Metastore-User", user),
            ],
        )
        assert "X-Metastore-User must name the user" in _problem(answer, 400)


def test_acting_for_a_user_is_refused_without_authentication(
    database_url: str, tmp_path: Path
) -> None:
    with running("api", database_url, tmp_path, env={"METASTORE_AUTH": "disabled"}) as api:
        answer = httpx.get(api.base_url + NAMESPACES, headers={"X-Metastore-User": "root"})
        assert "may not act for users" in _problem(answer, 403)
        assert httpx.get(api.base_url + NAMESPACES).status_code == 200
