"""The offline twins of the CRDs' CEL rules agree with the rules themselves.

Each case goes through the offline validator (`check_trainjob` / `check_runtime`) and, separately, through the CRDs'
own CEL expressions evaluated by cel-python (`celpy`) on the object as the API server sees it: every
`x-kubernetes-validations` rule of crds/ at every node of the object it applies to, transition rules against the
old object with list-map items correlated by their keys. The messages of the failing rules must be the same. The
CRD expression is the source; a twin that drifts from it fails here. (cel-python is a dev dependency only: it is
faithful on our rules but about 3 ms per evaluation, see docs/validation.md.)
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from trainjob_operator.api import constants as c
from trainjob_operator.api.trainjob import TrainJob
from trainjob_operator.runtime.validation import cel as twins
from trainjob_operator.runtime.validation import check_runtime, check_trainjob, parse

celpy = pytest.importorskip("celpy", reason="cel-python is not installed (pip install -e '.[dev]')")

CRDS = Path(__file__).resolve().parents[4] / "crds"
TWIN_MESSAGES = {rule.message for rule, twin in twins.TWINS.items() if twin is not None}


@cache
def schema_of(kind: str) -> dict[str, Any]:
    plural = c.PLURALS[kind]
    crd = yaml.safe_load((CRDS / f"{c.GROUP}_{plural}.yaml").read_text(encoding="utf-8").split("---\n", 1)[1])
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


_ENV = celpy.Environment()
_PROGRAMS: dict[str, Any] = {}


def holds(rule: str, self_: Any, old: Any) -> bool:
    if rule not in _PROGRAMS:
        _PROGRAMS[rule] = _ENV.program(_ENV.compile(rule))
    activation = {"self": celpy.json_to_cel(self_)}
    if old is not None:
        activation["oldSelf"] = celpy.json_to_cel(old)
    return bool(_PROGRAMS[rule].evaluate(activation))


def failing(schema: dict[str, Any], value: Any, old: Any) -> Iterator[str]:
    """Messages of the rules that fail at this node and below (a transition rule only where an old value exists)."""
    for rule in schema.get("x-kubernetes-validations", ()):
        transition = "oldSelf" in rule["rule"]
        if transition and old is None:
            continue
        if not holds(rule["rule"], value, old if transition else None):
            yield rule["message"]
    if isinstance(value, dict):
        for prop, sub in schema.get("properties", {}).items():
            if prop in value:
                yield from failing(sub, value[prop], old.get(prop) if isinstance(old, dict) else None)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        keys = schema.get("x-kubernetes-list-map-keys")
        by_key = {}
        if keys and isinstance(old, list):
            by_key = {tuple(o.get(k) for k in keys): o for o in old if isinstance(o, dict)}
        for item in value:
            match = by_key.get(tuple(item.get(k) for k in keys)) if keys and isinstance(item, dict) else None
            yield from failing(schema["items"], item, match)


def mirrored(messages: Iterator[str]) -> list[str]:
    return sorted(m for m in messages if m in TWIN_MESSAGES)


@dataclass(frozen=True)
class Case:
    raw: dict[str, Any]
    old: dict[str, Any] | None = None


def trainjob(spec: dict[str, Any], name: str = "job", **extra: Any) -> dict[str, Any]:
    spec = {"runtimeRef": {"name": "torch-distributed"}, **spec}
    return {"apiVersion": c.API_VERSION, "kind": c.TRAINJOB_KIND, "metadata": {"name": name}, "spec": spec, **extra}


def runtime(ml_policy: dict[str, Any] | None = None, jobs: list[str] | None = None) -> dict[str, Any]:
    template = {"spec": {"template": {"spec": {"containers": [{"name": "node", "image": "img"}]}}}}
    spec: dict[str, Any] = {
        "template": {"spec": {"replicatedJobs": [{"name": j, "template": template} for j in jobs or ["node"]]}}
    }
    if ml_policy is not None:
        spec["mlPolicy"] = ml_policy
    return {"apiVersion": c.API_VERSION, "kind": c.TRAINING_RUNTIME_KIND, "metadata": {"name": "rt"}, "spec": spec}


TRAINER = {"image": "a", "numNodes": 2, "numProcPerNode": 2}
CASES = [
    pytest.param(Case(trainjob({})), id="a minimal TrainJob breaks no rule"),
    pytest.param(Case(trainjob({}, name="Bad_Name")), id="a TrainJob name that is no DNS label"),
    pytest.param(Case(trainjob({}, name="a" * 64)), id="a TrainJob name of 64 characters"),
    pytest.param(
        Case(trainjob({"initializer": {"dataset": {"storageUri": "hf://x"}, "model": {"storageUri": "x"}}})),
        id="a model storage URI without a scheme",
    ),
    pytest.param(
        Case(trainjob({"initializer": {"dataset": {"storageUri": ""}}})), id="an empty storage URI is allowed"
    ),
    pytest.param(Case(trainjob({"trainer": {"numProcPerNode": 0}})), id="zero processes per node"),
    pytest.param(Case(trainjob({"managedBy": "kueue.x-k8s.io/multikueue"})), id="MultiKueue may manage a TrainJob"),
    pytest.param(Case(trainjob({"managedBy": "example.com/other"})), id="another manager is refused"),
    pytest.param(
        Case(trainjob({}, status={"trainerStatus": {"progressPercentage": 3}})),
        id="a trainer status without its update time",
    ),
    pytest.param(Case(trainjob({"trainer": TRAINER}), trainjob({"trainer": TRAINER})), id="an update changing nothing"),
    pytest.param(
        Case(trainjob({"trainer": {**TRAINER, "numNodes": 4}}), trainjob({"trainer": TRAINER})),
        id="resizing a running TrainJob",
    ),
    pytest.param(
        Case(
            trainjob({"trainer": {**TRAINER, "numNodes": 4}, "suspend": True}),
            trainjob({"trainer": TRAINER, "suspend": True}),
        ),
        id="resizing a suspended TrainJob",
    ),
    pytest.param(
        Case(
            trainjob({"trainer": {**TRAINER, "numNodes": 4, "elasticPolicy": {"maxNodes": 4}}}),
            trainjob({"trainer": {**TRAINER, "elasticPolicy": {"maxNodes": 4}}}),
        ),
        id="resizing a running elastic TrainJob",
    ),
    pytest.param(
        Case(
            trainjob({"trainer": {**TRAINER, "numNodes": 4, "elasticPolicy": {"maxNodes": 8}}}),
            trainjob({"trainer": {**TRAINER, "elasticPolicy": {"maxNodes": 4}}}),
        ),
        id="a running elastic TrainJob's policy is fixed",
    ),
    pytest.param(
        Case(
            trainjob({"trainer": {**TRAINER, "image": "b", "elasticPolicy": {}}}),
            trainjob({"trainer": {**TRAINER, "elasticPolicy": {}}}),
        ),
        id="a running elastic TrainJob's image is fixed",
    ),
    pytest.param(
        Case(
            trainjob({"trainer": {**TRAINER, "numNodes": 4, "elasticPolicy": {}}}),
            trainjob({"trainer": TRAINER}),
        ),
        id="an elastic policy cannot be added to a running TrainJob",
    ),
    pytest.param(
        Case(trainjob({"trainer": {"elasticPolicy": {"minNodes": 3, "maxNodes": 2}}})),
        id="a TrainJob's elastic maxNodes below minNodes",
    ),
    pytest.param(
        Case(
            trainjob({"trainer": {**TRAINER, "image": "b"}, "suspend": True}),
            trainjob({"trainer": TRAINER, "suspend": True}),
        ),
        id="a new image on a suspended TrainJob",
    ),
    pytest.param(Case(trainjob({"runtimeRef": {"name": "other"}}), trainjob({})), id="another runtime on update"),
    pytest.param(Case(trainjob({"managedBy": c.MULTIKUEUE_MANAGED_BY}), trainjob({})), id="a new manager on update"),
    pytest.param(
        Case(
            trainjob(
                {
                    "runtimePatches": [
                        {
                            "manager": "m",
                            "trainingRuntimeSpec": {
                                "template": {
                                    "spec": {
                                        "replicatedJobs": [
                                            {
                                                "name": "node",
                                                "template": {
                                                    "spec": {"template": {"spec": {"serviceAccountName": "b"}}}
                                                },
                                            }
                                        ]
                                    }
                                }
                            },
                        }
                    ]
                }
            ),
            trainjob(
                {
                    "runtimePatches": [
                        {
                            "manager": "m",
                            "trainingRuntimeSpec": {
                                "template": {
                                    "spec": {
                                        "replicatedJobs": [
                                            {
                                                "name": "node",
                                                "template": {
                                                    "spec": {"template": {"spec": {"serviceAccountName": "a"}}}
                                                },
                                            }
                                        ]
                                    }
                                }
                            },
                        }
                    ]
                }
            ),
        ),
        id="a patched service account changed on update",
    ),
    pytest.param(Case(runtime({"torch": {}})), id="a torch runtime breaks no rule"),
    pytest.param(Case(runtime({"torch": {}, "mpi": {}})), id="two ML policies"),
    pytest.param(Case(runtime({"jax": {}, "xgboost": {}, "flux": {}})), id="three ML policies"),
    pytest.param(Case(runtime({"mpi": {"numProcPerNode": 0}})), id="zero MPI processes per node"),
    pytest.param(
        Case(runtime({"torch": {"elasticPolicy": {"minNodes": 3, "maxNodes": 2}}})), id="elastic max below min"
    ),
    pytest.param(
        Case(runtime({"torch": {"elasticPolicy": {"minNodes": 2, "maxNodes": 2}}})), id="elastic min equal to max"
    ),
    pytest.param(Case(runtime({"flux": {"numProcPerNode": 0}})), id="zero Flux processes per node"),
    pytest.param(
        Case(
            runtime(
                {"torch": {"envInjection": {"targets": [{"jobName": "node", "containerNames": ["sidecar", "node"]}]}}}
            )
        ),
        id="env injection into the node container",
    ),
    pytest.param(Case(runtime(jobs=["a" * 21])), id="a replicated job name of 21 characters"),
    pytest.param(Case(runtime(jobs=["a" * 20])), id="a replicated job name of 20 characters"),
]


def offline(case: Case) -> list[str]:
    if case.raw["kind"] == c.TRAINJOB_KIND:
        _, validation = check_trainjob(case.raw, case.old)
    else:
        _, validation = check_runtime(case.raw)
    return sorted(e.detail for e in validation.errors if e.detail in TWIN_MESSAGES)


def by_the_crd(case: Case) -> list[str]:
    kind = case.raw["kind"]
    if case.old is None:
        return mirrored(failing(schema_of(kind), case.raw, None))
    # on update the API server evaluates the stored objects (CRD defaults applied), as `check_trainjob` compares them
    new, old = parse(TrainJob, case.raw)[0], parse(TrainJob, case.old)[0]
    assert new is not None and old is not None
    return mirrored(failing(schema_of(kind), new.to_wire(), old.to_wire()))


@pytest.mark.parametrize("case", CASES)
def test_the_twins_agree_with_the_crd_rules(case: Case) -> None:
    assert offline(case) == by_the_crd(case)


def test_the_cases_break_every_mirrored_rule() -> None:
    cases = [p.values[0] for p in CASES]
    assert all(isinstance(case, Case) for case in cases)
    broken = {m for case in cases if isinstance(case, Case) for m in by_the_crd(case)}
    assert broken == TWIN_MESSAGES
