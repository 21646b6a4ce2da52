"""Defaulting (`runtime/defaulting.py`): the times stamped on a runtime's patches."""

from typing import Any

import pytest

from trainjob_operator.runtime.defaulting import stamp_patch_times

NOW = "2026-11-22T12:00:00Z"
EARLIER = "2026-11-22T11:00:00Z"


def patch(manager: str, selector: str = "a", time: str | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "manager": manager,
        "trainingRuntimeSpec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {"spec": {"template": {"spec": {"nodeSelector": {"pool": selector}}}}},
                        }
                    ]
                }
            }
        },
    }
    if time:
        entry["time"] = time
    return entry


def with_patches(*patches: dict[str, Any]) -> dict[str, Any]:
    return {"spec": {"runtimePatches": list(patches)}}


@pytest.mark.parametrize(
    ("new", "old", "want"),
    [
        pytest.param(with_patches(patch("a.io/m")), None, [patch("a.io/m", time=NOW)], id="create stamps now"),
        pytest.param(with_patches(patch("a.io/m", time=EARLIER)), None, None, id="create keeps a given time"),
        pytest.param(
            with_patches(patch("a.io/m")),
            with_patches(patch("a.io/m", time=EARLIER)),
            [patch("a.io/m", time=EARLIER)],
            id="an unchanged patch keeps its old time",
        ),
        pytest.param(
            with_patches(patch("a.io/m", "b", time=EARLIER)),
            with_patches(patch("a.io/m", time=EARLIER)),
            [patch("a.io/m", "b", time=NOW)],
            id="a changed patch gets now",
        ),
        pytest.param(
            with_patches(patch("a.io/m", time=EARLIER), patch("b.io/n", time=EARLIER)),
            with_patches(patch("a.io/m", time=EARLIER)),
            None,
            id="a new manager keeps a given time",
        ),
        pytest.param({"spec": {}}, None, None, id="no patches, nothing to do"),
        pytest.param(
            with_patches({"manager": {"x": 1}}, {"manager": ["m"], "time": EARLIER}),
            with_patches({"manager": {"x": 1}}),
            None,
            id="a manager that is no string is left to the schema (found by the admission fuzz: TypeError)",
        ),
        pytest.param(
            with_patches({"manager": 7}, patch("a.io/m")),
            None,
            [{"manager": 7}, patch("a.io/m", time=NOW)],
            id="the other patches are still stamped",
        ),
    ],
)
def test_runtime_patch_times(
    new: dict[str, Any], old: dict[str, Any] | None, want: list[dict[str, Any]] | None
) -> None:
    assert stamp_patch_times(new, old, NOW) == want
