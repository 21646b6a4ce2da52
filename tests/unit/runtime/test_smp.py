"""Strategic merge of pod patches (`runtime/smp.py`): maps merge, null deletes, lists by their keys."""

from typing import Any

import pytest

from trainjob_operator.runtime import smp


@pytest.mark.parametrize(
    ("original", "patch", "want"),
    [
        pytest.param({"a": 1, "b": {"c": 1}}, {"b": {"d": 2}}, {"a": 1, "b": {"c": 1, "d": 2}}, id="maps merge"),
        pytest.param({"a": 1, "b": 2}, {"b": None}, {"a": 1}, id="null deletes"),
        pytest.param(
            {"env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
            {"env": [{"name": "B", "value": "3"}, {"name": "C", "value": "4"}]},
            {"env": [{"name": "A", "value": "1"}, {"name": "B", "value": "3"}, {"name": "C", "value": "4"}]},
            id="env merges by name, in place then appended",
        ),
        pytest.param(
            {"volumeMounts": [{"name": "x", "mountPath": "/a"}]},
            {"volumeMounts": [{"name": "y", "mountPath": "/a"}]},
            {"volumeMounts": [{"name": "y", "mountPath": "/a"}]},
            id="volumeMounts merge by mountPath",
        ),
        pytest.param(
            {"tolerations": [{"key": "a"}]},
            {"tolerations": [{"key": "b"}]},
            {"tolerations": [{"key": "b"}]},
            id="tolerations are replaced",
        ),
        pytest.param({"args": ["a"]}, {"args": ["b"]}, {"args": ["b"]}, id="plain lists are replaced"),
    ],
)
def test_strategic_merge(original: dict[str, Any], patch: dict[str, Any], want: dict[str, Any]) -> None:
    before = repr(original)
    assert smp.merge(original, patch) == want
    assert repr(original) == before
