"""The chart's alerts and Grafana dashboard: off by default, where the values put them, and
naming only series the processes export (the alerts' behaviour over real scrapes is
tests/test_monitoring.py's)."""

from __future__ import annotations

import json
import re

from prometheus_client import REGISTRY

import metastore.metrics  # noqa: F401 (registers every family)
from tests.deploy.helm import NAMESPACE, Manifest, template
from tests.deploy.test_helm import by_kind, one
from tests.promql import tokens

ALERTS = {
    "MetastoreProjectionLagHigh",
    "MetastoreProjectionStalled",
    "MetastoreDeadLettersIncreasing",
    "MetastoreNoProjectorLeader",
    "MetastoreAPIDown",
    "MetastoreAPIErrors",
    "MetastoreReadTimeouts",
}


def exported() -> set[str]:
    """Every series name the processes can export, and Prometheus's own `up`."""
    return (
        {s.name for family in REGISTRY.collect() for s in family.samples}
        | {
            f"{family.name}{suffix}"
            for family in REGISTRY.collect()
            for suffix in ("", "_total", "_count", "_sum", "_bucket")
        }
        | {"up"}
    )


def series_names(expression: str) -> set[str]:
    """The metric names an expression selects (a label name is followed by its matcher;
    Grafana's `$variables` are read as plain names)."""
    found = tokens(re.sub(r"\$\w+", "x", expression))
    return {
        text
        for (kind, text), (_, after) in zip(found, [*found[1:], ("", "")], strict=True)
        if kind == "name"
        and (text == "up" or text.startswith("metastore_"))
        and after not in ("=", "=~", "!=")
    }


def rule_of(manifests: list[Manifest]) -> Manifest:
    return one(manifests, "PrometheusRule")


def test_alerts_and_dashboard_are_off_by_default(default_manifests: list[Manifest]) -> None:
    assert not by_kind(default_manifests, "PrometheusRule")
    assert not [m for m in by_kind(default_manifests, "ConfigMap") if "grafana_dashboard" in str(m)]


def test_the_rule_holds_every_alert_on_exported_series(all_on_manifests: list[Manifest]) -> None:
    rule = rule_of(all_on_manifests)
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["metadata"]["namespace"] == "monitoring"
    assert rule["metadata"]["labels"]["release"] == "prometheus"
    rules = {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"]}
    assert set(rules) == ALERTS
    names = exported()
    api_job = one(all_on_manifests, "Service", "-api")["metadata"]["name"]
    for alert, r in rules.items():
        used = series_names(r["expr"])
        assert used and used <= names, (alert, used - names)
        assert f'namespace="{NAMESPACE}"' in r["expr"]
        assert api_job in r["expr"], alert  # the job: the Service the ServiceMonitor scrapes
        assert r["labels"]["severity"] in ("warning", "critical")
        assert r["annotations"]["summary"] and r["annotations"]["description"]
    assert rules["MetastoreProjectionLagHigh"]["expr"].endswith("> 120")  # lagSeconds
    assert rules["MetastoreAPIErrors"]["expr"].endswith("> 0.02")  # errorRatio


def test_the_dashboard_is_a_labelled_configmap_of_exported_series(
    all_on_manifests: list[Manifest],
) -> None:
    (dashboard,) = [
        m
        for m in by_kind(all_on_manifests, "ConfigMap")
        if m["metadata"]["name"].endswith("-dashboard")
    ]
    assert dashboard["metadata"]["namespace"] == "monitoring"
    labels = dashboard["metadata"]["labels"]
    assert labels["grafana_dashboard"] == "1" and labels["team"] == "data-platform"
    board = json.loads(dashboard["data"]["metastore.json"])
    assert board["uid"] == "metastore"
    names = exported()
    shown: set[str] = set()
    for panel in board["panels"]:
        for target in panel.get("targets", []):
            used = series_names(target["expr"])
            assert used and used <= names, (panel["title"], used - names)
            shown |= used
    for name in (
        "metastore_projection_lag_seconds",
        "metastore_projection_lag_events",
        "metastore_projection_stalled",
        "metastore_projection_dead_letters",
        "metastore_projector_lease_held",
        "metastore_projector_leader",
        "metastore_read_timeouts_total",
    ):
        assert name in shown, name


def test_values_reused_from_a_release_without_monitoring_still_render(helm: str) -> None:
    """`helm upgrade --reuse-values` keeps the old release's values, which have no
    `monitoring`: the templates must not need it."""
    manifests = template(helm, "--set", "monitoring=null")
    assert not by_kind(manifests, "PrometheusRule")
