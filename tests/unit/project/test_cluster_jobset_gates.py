"""The harness starts JobSet with the feature gates a run names (`TRAINJOB_JOBSET_FEATURE_GATES`, e.g.
`ElasticJobSet=true` for elastic PyTorch; hack/harness/cluster.py)."""

import pytest

from harness import cluster


@pytest.mark.parametrize(
    ("text", "gates"),
    [
        pytest.param(None, {}, id="unset: JobSet's defaults"),
        pytest.param("", {}, id="empty: JobSet's defaults"),
        pytest.param("ElasticJobSet=true", {"ElasticJobSet": True}, id="one gate on"),
        pytest.param(
            " ElasticJobSet=true, InPlaceRestart=false ,", {"ElasticJobSet": True, "InPlaceRestart": False}, id="two"
        ),
        pytest.param("ElasticJobSet", {"ElasticJobSet": True}, id="a bare name turns it on"),
    ],
)
def test_jobset_feature_gates(text: str | None, gates: dict[str, bool]) -> None:
    assert cluster.jobset_feature_gates(text) == gates
