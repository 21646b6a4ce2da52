"""One source per CEL rule: every rule of the CRDs is a constant of `api.rules`, and each has an offline twin in
`runtime.validation.cel` (or a stated reason not to), which reports the rule's own message when the rule fails.

Why twins and not a CEL library evaluating the CRDs' expressions: docs/validation.md (measured fidelity and speed).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from trainjob_operator.api import rules
from trainjob_operator.api.rules import CelRule
from trainjob_operator.runtime.errors import FieldError
from trainjob_operator.runtime.validation import cel

CRDS = Path(__file__).resolve().parents[4] / "crds"
RULE_CONSTANTS = {value for value in vars(rules).values() if isinstance(value, CelRule)}


def crd_rules() -> Iterator[tuple[str, str, dict[str, str]]]:
    """(kind, schema path, wired rule) of every `x-kubernetes-validations` entry in crds/."""

    def walk(node: dict[str, Any], path: str) -> Iterator[tuple[str, dict[str, str]]]:
        for rule in node.get("x-kubernetes-validations", ()):
            yield path, rule
        for prop, sub in node.get("properties", {}).items():
            yield from walk(sub, f"{path}.{prop}")
        if isinstance(node.get("items"), dict):
            yield from walk(node["items"], f"{path}[]")
        if isinstance(node.get("additionalProperties"), dict):
            yield from walk(node["additionalProperties"], f"{path}{{}}")

    for file in sorted(CRDS.glob("*.yaml")):
        crd = yaml.safe_load(file.read_text(encoding="utf-8").split("---\n", 1)[1])
        schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        for path, rule in walk(schema, ""):
            yield crd["spec"]["names"]["kind"], path, rule


def rule_of(wired: dict[str, str]) -> CelRule | None:
    return next((r for r in RULE_CONSTANTS if r.wire() == wired), None)


def test_every_crd_rule_is_written_once_in_api_rules() -> None:
    strays = [f"{kind} {path or '<root>'}: {wired}" for kind, path, wired in crd_rules() if rule_of(wired) is None]
    assert strays == [], "CEL rules in crds/ that are no constant of api/rules.py"


def test_every_crd_rule_has_an_offline_twin_or_a_reason() -> None:
    used = {rule_of(wired) for _, _, wired in crd_rules()}
    missing = sorted(r.message for r in used if r is not None and r not in cel.TWINS)
    assert missing == [], "CRD rules with no entry in runtime.validation.cel.TWINS"
    stale = sorted(r.message for r in cel.TWINS if r not in used)
    assert stale == [], "TWINS entries for rules no CRD carries"
    unmirrored = {r for r, twin in cel.TWINS.items() if twin is None}
    assert unmirrored == set(cel.UNMIRRORED), "a rule without a twin needs its reason in UNMIRRORED, and only then"


@dataclass(frozen=True)
class Violation:
    rule: CelRule
    raw: dict[str, Any]
    old: dict[str, Any] | None = None


TRAINER = {"image": "a", "numNodes": 2}
POLICY = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainingRuntime", "metadata": {"name": "rt"}}
VIOLATIONS = [
    pytest.param(Violation(rules.NAME_RFC1035, {"metadata": {"name": "Bad"}}), id="an upper-case TrainJob name"),
    pytest.param(Violation(rules.NAME_MAX_63, {"metadata": {"name": "a" * 64}}), id="a 64-character TrainJob name"),
    pytest.param(
        Violation(rules.STORAGE_URI, {"spec": {"initializer": {"model": {"storageUri": "no-scheme"}}}}),
        id="a storage URI without a scheme",
    ),
    pytest.param(
        Violation(rules.NUM_PROC_PER_NODE, {"spec": {"trainer": {"numProcPerNode": 0}}}),
        id="zero processes per node on the trainer",
    ),
    pytest.param(Violation(rules.MANAGED_BY, {"spec": {"managedBy": "someone/else"}}), id="a foreign managedBy"),
    pytest.param(
        Violation(rules.TRAINER_STATUS_TIME, {"status": {"trainerStatus": {"progressPercentage": 5}}}),
        id="a trainerStatus without lastUpdatedTime",
    ),
    pytest.param(
        Violation(rules.IMMUTABLE, {"spec": {"managedBy": "b"}}, {"spec": {"managedBy": "a"}}),
        id="managedBy changed on update",
    ),
    pytest.param(
        Violation(
            rules.RESIZE_WHILE_SUSPENDED,
            {"spec": {"trainer": {**TRAINER, "numNodes": 4}}},
            {"spec": {"trainer": TRAINER, "suspend": False}},
        ),
        id="numNodes changed while the TrainJob runs",
    ),
    pytest.param(
        Violation(rules.ONE_ML_POLICY, {**POLICY, "spec": {"mlPolicy": {"torch": {}, "mpi": {}}}}), id="two ML policies"
    ),
    pytest.param(
        Violation(
            rules.ENV_INJECTION_NOT_NODE,
            {
                **POLICY,
                "spec": {
                    "mlPolicy": {
                        "torch": {"envInjection": {"targets": [{"jobName": "node", "containerNames": ["node"]}]}}
                    }
                },
            },
        ),
        id="env injection into the node container",
    ),
    pytest.param(
        Violation(rules.MPI_NUM_PROC_PER_NODE, {**POLICY, "spec": {"mlPolicy": {"mpi": {"numProcPerNode": 0}}}}),
        id="zero MPI processes per node",
    ),
    pytest.param(
        Violation(rules.FLUX_NUM_PROC_PER_NODE, {**POLICY, "spec": {"mlPolicy": {"flux": {"numProcPerNode": 0}}}}),
        id="zero Flux processes per node",
    ),
    pytest.param(
        Violation(
            rules.ELASTIC_MIN_LE_MAX,
            {**POLICY, "spec": {"mlPolicy": {"torch": {"elasticPolicy": {"minNodes": 3, "maxNodes": 2}}}}},
        ),
        id="elastic maxNodes below minNodes",
    ),
    pytest.param(
        Violation(
            rules.REPLICATED_JOB_NAME_MAX_20,
            {**POLICY, "spec": {"template": {"spec": {"replicatedJobs": [{"name": "a" * 21}]}}}},
        ),
        id="a 21-character replicated job name",
    ),
]


def run_twin(twin: Callable[..., list[FieldError]], violation: Violation) -> list[FieldError]:
    if twin is cel.trainjob_transition:
        assert violation.old is not None
        return cel.trainjob_transition(violation.old, violation.raw)
    if twin is cel.replicated_job_name_errors:
        jobs = violation.raw["spec"]["template"]["spec"]["replicatedJobs"]
        return cel.replicated_job_name_errors([(i, job.get("name")) for i, job in enumerate(jobs)])
    return twin(violation.raw)


@pytest.mark.parametrize("violation", VIOLATIONS)
def test_the_twin_reports_the_rule_message(violation: Violation) -> None:
    twin = cel.TWINS[violation.rule]
    assert twin is not None
    assert [e.detail for e in run_twin(twin, violation)] == [violation.rule.message]


def test_every_twin_has_a_violation_case() -> None:
    violations = [p.values[0] for p in VIOLATIONS]
    assert all(isinstance(violation, Violation) for violation in violations)
    covered = {violation.rule for violation in violations if isinstance(violation, Violation)}
    assert {r for r, twin in cel.TWINS.items() if twin is not None} == covered
