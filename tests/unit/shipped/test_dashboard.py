"""The Grafana dashboard shipped with the chart: every query names only metrics (and labels) the operator exports."""

import json
import re
from pathlib import Path
from typing import Any

import pytest

from trainjob_operator.metrics import Metrics

DASHBOARD = Path(__file__).resolve().parents[3] / "charts/trainjob-operator/files/dashboards/trainjob-operator.json"
PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless", "offset"}
# Labels Prometheus adds when it scrapes (the ServiceMonitor's targets), and the histogram bucket label.
SCRAPE_LABELS = {"job", "instance", "namespace", "pod", "service", "container", "endpoint", "le"}


def exported() -> dict[str, set[str]]:
    """Sample names the operator's registry exposes → their label names."""
    names: dict[str, set[str]] = {}
    registry = Metrics().registry
    for family in registry.collect():
        labels = set(getattr(family, "_labelnames", ()))
        for sample in family.samples:
            labels |= set(sample.labels)
        suffixes = {
            "counter": ("_total",),
            "histogram": ("_bucket", "_count", "_sum"),
            "summary": ("_count", "_sum"),
        }.get(family.type, ("",))
        for suffix in suffixes:
            names[family.name + suffix] = labels - {"le"} if suffix != "_bucket" else labels | {"le"}
        for sample in family.samples:
            names.setdefault(sample.name, labels)
    # Labelled families with no child yet expose no sample: take their label names from the collectors.
    for collector, collector_names in registry._collector_to_names.items():
        for name in collector_names:
            names[name] = names.get(name, set()) | set(getattr(collector, "_labelnames", ()))
    return names


def queries(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    found = [(panel["title"], target["expr"]) for panel in dashboard["panels"] for target in panel["targets"]]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            # label_values(metric, label): the metric is checked, the label is a scrape label.
            found.append((f"${variable['name']}", re.sub(r",\s*\w+\)$", ")", variable["query"]["query"])))
    return found


def metrics_in(expr: str) -> set[str]:
    """Metric names in a PromQL expression: identifiers that are no function, keyword, label or string."""
    text = re.sub(r'"[^"]*"', '""', expr)
    text = re.sub(r"\{[^}]*\}", "{}", text)  # label matchers
    text = re.sub(r"\b(by|without|on|ignoring)\s*\([^)]*\)", "", text)  # grouping labels
    text = re.sub(r"\[[^\]]*\]", "", text)  # ranges
    idents = [
        m.group()
        for m in re.finditer(r"[a-zA-Z_:][a-zA-Z0-9_:]*", text)
        if not text[m.end() :].lstrip().startswith("(")
    ]
    return {i for i in idents if i not in PROMQL_WORDS and not re.fullmatch(r"\d.*", i)} - {"label_values"}


def labels_in(expr: str) -> set[str]:
    grouped = re.findall(r"\b(?:by|without)\s*\(([^)]*)\)", expr)
    matched = re.findall(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)", " ".join(re.findall(r"\{([^}]*)\}", expr)))
    return {label.strip() for group in grouped for label in group.split(",") if label.strip()} | set(matched)


DASH = json.loads(DASHBOARD.read_text())
EXPORTED = exported()


@pytest.mark.parametrize(("title", "expr"), queries(DASH), ids=[t for t, _ in queries(DASH)])
def test_every_query_names_exported_metrics_and_labels(title: str, expr: str) -> None:
    names = metrics_in(expr)
    assert names, f"{title}: the query names no metric: {expr}"
    unknown = names - set(EXPORTED)
    assert not unknown, f"{title}: {sorted(unknown)} are not exported by the operator"
    known_labels = set().union(*(EXPORTED[n] for n in names)) | SCRAPE_LABELS
    assert labels_in(expr) <= known_labels, f"{title}: unknown labels {sorted(labels_in(expr) - known_labels)}"


def test_the_dashboard_covers_what_the_issue_asks_for() -> None:
    everything = " ".join(expr for _, expr in queries(DASH))
    for metric in (
        "trainjob_operator_trainjobs",
        "trainjob_operator_create_to_jobset_seconds_bucket",
        "trainjob_operator_reconcile_duration_seconds_bucket",
        "trainjob_operator_apply_errors_total",
        "trainjob_operator_webhook_duration_seconds_bucket",
        "trainjob_operator_leader",
    ):
        assert metric in everything
    ids = [panel["id"] for panel in DASH["panels"]]
    assert len(ids) == len(set(ids)), "panel ids are unique"


@pytest.mark.parametrize(
    ("expr", "want"),
    [
        pytest.param('sum by (state) (foo_total{job=~"$job", a="b"})', {"foo_total"}, id="labels and grouping dropped"),
        pytest.param(
            "histogram_quantile(0.95, sum by (le) (rate(x_bucket[5m])))", {"x_bucket"}, id="functions dropped"
        ),
        pytest.param("a / on (pod) b", {"a", "b"}, id="binary operators with matching"),
    ],
)
def test_metric_extraction(expr: str, want: set[str]) -> None:
    assert metrics_in(expr) == want


METRIC_TABLES = (
    DASHBOARD.parents[4] / "docs" / "operations.md",
    DASHBOARD.parents[4] / "docs" / "hangs-and-goodput.md",
)
"""Where the metrics are listed: the metrics table (the README's until issue 38) and the goodput page's (issue 35)."""


def metric_rows() -> list[str]:
    return [
        name
        for path in METRIC_TABLES
        for name in re.findall(r"^\| `(trainjob_operator_\w+)` \|", path.read_text(), flags=re.MULTILINE)
    ]


def operator_metrics() -> list[str]:
    """The operator's own metric families (not the process, platform and GC collectors')."""
    return sorted(
        family.name + ("_total" if family.type == "counter" else "")
        for family in Metrics().registry.collect()
        if family.name.startswith("trainjob_operator_")
    )


@pytest.mark.parametrize("metric", operator_metrics())
def test_every_metric_is_in_the_metrics_table_and_on_the_dashboard(metric: str) -> None:
    readme_rows = metric_rows()
    on_dashboard = {name for _, expr in queries(DASH) for name in metrics_in(expr)}
    shown = {
        name for name in on_dashboard if name == metric or name.removeprefix(metric) in ("_bucket", "_count", "_sum")
    }
    assert (metric in readme_rows, bool(shown)) == (True, True)


def test_the_metrics_table_lists_no_metric_the_operator_lacks() -> None:
    readme_rows = metric_rows()
    assert sorted(readme_rows) == operator_metrics()
