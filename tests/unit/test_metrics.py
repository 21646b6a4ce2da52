"""The operator's metrics (`metrics.py`): the goodput families' labels stay bounded whatever runtimes tenants name."""

from __future__ import annotations

from trainjob_operator.metrics import GOODPUT_SERIES_MAX, OTHER_RUNTIME, Metrics


def series(metrics: Metrics, family: str) -> set[tuple[str, str]]:
    return {
        (s.labels["trainjob_namespace"], s.labels["runtime"])
        for m in metrics.registry.collect()
        if m.name == family
        for s in m.samples
    }


def test_runtimes_past_the_bound_are_counted_as_other_and_known_ones_keep_their_label() -> None:
    metrics = Metrics()
    for i in range(GOODPUT_SERIES_MAX + 50):
        labels = metrics.goodput_labels("team-a", f"rt-{i}")
        metrics.goodput_seconds.labels(**labels, phase="Training").inc(1)
    assert metrics.goodput_labels("team-a", "rt-0") == {"trainjob_namespace": "team-a", "runtime": "rt-0"}
    assert metrics.goodput_labels("team-b", "rt-new") == {"trainjob_namespace": "team-b", "runtime": OTHER_RUNTIME}
    pairs = series(metrics, "trainjob_operator_goodput_seconds")
    assert len(pairs) == GOODPUT_SERIES_MAX + 1, "the bound, and one (other) series for the namespace past it"
    other = next(
        s.value
        for m in metrics.registry.collect()
        if m.name == "trainjob_operator_goodput_seconds"
        for s in m.samples
        if s.name.endswith("_total") and s.labels["runtime"] == OTHER_RUNTIME
    )
    assert other == 50, "every second past the bound is still counted"
