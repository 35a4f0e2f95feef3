"""The chart values' policy file: who may read, write and see which namespaces."""

from __future__ import annotations

from pathlib import Path

import pytest

from metastore.config import ConfigError, load_settings
from metastore.principal import Principal

POLICY = """{
  "admins": ["group:platform"],
  "read": [{"subjects": ["group:sales", "cockpit"], "namespaces": ["s3a://warehouse*", "hive://*"]}],
  "sensitive": [{"subjects": ["group:sales"], "namespaces": ["s3a://warehouse*"]}],
  "write": [{"subjects": ["spark-sales"], "namespaces": ["spark-sales", "s3a://warehouse"]}],
  "export": ["exporter"]
}"""


def _settings(tmp_path: Path, policy: str) -> object:
    path = tmp_path / "policy.json"
    path.write_text(policy)
    return load_settings({"METASTORE_POLICY_FILE": str(path)})


def test_rules_allow_only_what_they_name(tmp_path: Path) -> None:
    policy = _settings(tmp_path, POLICY).policy  # type: ignore[attr-defined]
    alice = Principal("alice", "user", groups=("sales",))
    bob = Principal("bob", "user", groups=("finance",))
    admin = Principal("root", "user", groups=("platform",))
    spark = Principal("spark-sales", "service")
    assert policy.allows(alice, "ReadNamespace", "s3a://warehouse")
    assert policy.allows(alice, "ReadNamespace", "hive://hive-metastore:9083")
    assert not policy.allows(alice, "ReadNamespace", "trino://trino:8443")
    assert not policy.allows(bob, "ReadNamespace", "s3a://warehouse")
    assert policy.allows(admin, "ReadNamespace", "trino://trino:8443")
    assert policy.allows(alice, "ShowSensitive", "s3a://warehouse")
    assert not policy.allows(alice, "ShowSensitive", "hive://hive-metastore:9083")
    assert policy.allows(spark, "WriteNamespace", "s3a://warehouse")
    # `*` is the only pattern character: the pattern without one is an exact name
    assert not policy.allows(spark, "WriteNamespace", "s3a://warehouse2")
    assert not policy.allows(alice, "ReadExport", None)
    assert policy.allows(Principal("exporter", "service"), "ReadExport", None)


def test_a_wrong_policy_file_names_the_variable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"METASTORE_POLICY_FILE=.*invalid.*reed"):
        _settings(tmp_path, '{"reed": []}')
    with pytest.raises(ConfigError, match=r"METASTORE_POLICY_FILE=.*cannot be read"):
        load_settings({"METASTORE_POLICY_FILE": str(tmp_path / "absent.json")})


def test_an_admin_reads_unfiltered_and_nobody_else_does(tmp_path: Path) -> None:
    from metastore.authz import PolicyAuthorizer

    authorizer = PolicyAuthorizer(_settings(tmp_path, POLICY).policy)  # type: ignore[attr-defined]
    assert authorizer.sees_everything(Principal("root", "user", groups=("platform",)))
    assert not authorizer.sees_everything(Principal("alice", "user", groups=("sales",)))
    assert not authorizer.sees_everything(Principal("platform", "service"))  # a name, no group
