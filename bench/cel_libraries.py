"""Measure two Python CEL libraries on the CEL rules of our CRDs: fidelity (the verdict the API server gives) and speed.

    python -m venv /tmp/cel && /tmp/cel/bin/pip install common-expression-language cel-python pyyaml
    /tmp/cel/bin/python bench/cel_libraries.py

Every distinct `x-kubernetes-validations` rule of crds/ is compiled by both libraries and evaluated on cases whose
verdict is the API server's (from the rule's meaning and the integration tests in tests/integration); the table
and the timings go to docs/validation.md. Not part of the test suite: neither library is a dependency.
"""

from __future__ import annotations

import contextlib
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
ROUNDS = 20

# (rule, self, oldSelf or None, the API server's verdict: True = valid)
Case = tuple[str, Any, Any, bool]

ONE_POLICY = (
    "[has(self.torch), has(self.mpi), has(self.jax), has(self.xgboost),has(self.flux)].filter(x, x).size() <= 1"
)
STARTUP = (
    "!(has(self.startupPolicy) && self.startupPolicy.startupPolicyOrder == 'InOrder' && "
    "self.replicatedJobs.exists(x, has(x.dependsOn)))"
)
VCP = "self.templates.all(t, !has(t.metadata.namespace) || size(t.metadata.namespace) == 0)"
NAME = "self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')"
URI = "self == '' || self.matches('^[A-Za-z][A-Za-z0-9+.-]*://.+$')"
MANAGED = "self in ['trainer.kubeflow.org/trainjob-controller', 'kueue.x-k8s.io/multikueue']"
STATUS = "!has(self.trainerStatus) || has(self.trainerStatus.lastUpdatedTime)"


def rules_of_crds() -> dict[str, str]:
    """rule → message of every CEL rule in crds/."""
    found: dict[str, str] = {}

    def visit(node: Any) -> None:
        if isinstance(node, dict):
            for rule in node.get("x-kubernetes-validations", ()):
                found[rule["rule"]] = rule["message"]
            for value in node.values():
                visit(value)
        elif isinstance(node, list):
            for value in node:
                visit(value)

    for path in sorted((REPO / "crds").glob("*.yaml")):
        visit(yaml.safe_load(path.read_text(encoding="utf-8").split("---\n", 1)[1]))
    return found


def resize_rule(rules: dict[str, str]) -> str:
    return next(r for r in rules if r.startswith("!has(self.trainer) || !has(oldSelf.trainer)"))


def cases(rules: dict[str, str]) -> list[Case]:
    resize = resize_rule(rules)
    trainer = {"image": "a", "numNodes": 2}
    return [
        (ONE_POLICY, {"torch": {}}, None, True),
        (ONE_POLICY, {"numNodes": 2}, None, True),
        (ONE_POLICY, {"torch": {}, "mpi": {"numProcPerNode": 1}}, None, False),
        (ONE_POLICY, {"jax": {}, "xgboost": {}, "flux": {}}, None, False),
        ("self >= 1", 1, None, True),
        ("self >= 1", 0, None, False),
        ("self >= 1", -3, None, False),
        ("!self.exists(c, c == 'node')", ["a", "b"], None, True),
        ("!self.exists(c, c == 'node')", ["a", "node"], None, False),
        (STARTUP, {"replicatedJobs": [{"name": "a", "dependsOn": [{"name": "b"}]}]}, None, True),
        (
            STARTUP,
            {"startupPolicy": {"startupPolicyOrder": "AnyOrder"}, "replicatedJobs": [{"dependsOn": []}]},
            None,
            True,
        ),
        (STARTUP, {"startupPolicy": {"startupPolicyOrder": "InOrder"}, "replicatedJobs": [{"name": "a"}]}, None, True),
        (
            STARTUP,
            {
                "startupPolicy": {"startupPolicyOrder": "InOrder"},
                "replicatedJobs": [{"name": "a"}, {"name": "b", "dependsOn": [{"name": "a"}]}],
            },
            None,
            False,
        ),
        ("self == oldSelf", {"a": [1, 2]}, {"a": [1, 2]}, True),
        ("self == oldSelf", {"a": [1, 2]}, {"a": [2, 1]}, False),
        ("self == oldSelf", "x", "y", False),
        ("self == oldSelf", 3, 3, True),
        ("size(self) <= 20", "node", None, True),
        ("size(self) <= 20", "a" * 21, None, False),
        ("size(self) <= 20", "é" * 20, None, True),  # size counts code points, not bytes
        (VCP, {"templates": [{"metadata": {"name": "a"}}]}, None, True),
        (VCP, {"templates": [{"metadata": {"name": "a", "namespace": ""}}]}, None, True),
        (VCP, {"templates": [{"metadata": {"name": "a", "namespace": "x"}}]}, None, False),
        (NAME, {"metadata": {"name": "good-name"}}, None, True),
        (NAME, {"metadata": {"name": "1bad"}}, None, False),
        (NAME, {"metadata": {"name": "bad.name"}}, None, False),
        (NAME, {"metadata": {"name": "trailing-"}}, None, False),
        ("size(self.metadata.name) <= 63", {"metadata": {"name": "a" * 63}}, None, True),
        ("size(self.metadata.name) <= 63", {"metadata": {"name": "a" * 64}}, None, False),
        (resize, {"trainer": trainer}, {"trainer": trainer}, True),
        (resize, {"trainer": {**trainer, "numNodes": 4}}, {"trainer": trainer, "suspend": True}, True),
        (resize, {"trainer": {**trainer, "numNodes": 4}}, {"trainer": trainer, "suspend": False}, False),
        (resize, {"trainer": {**trainer, "numNodes": 4}}, {"trainer": trainer}, False),
        (resize, {"trainer": {**trainer, "image": "b"}}, {"trainer": trainer, "suspend": True}, False),
        (resize, {"trainer": {**trainer, "command": ["x"]}}, {"trainer": trainer, "suspend": True}, False),
        (resize, {}, {"trainer": trainer}, True),
        (resize, {"trainer": trainer}, {}, True),
        (URI, "", None, True),
        (URI, "hf://org/model", None, True),
        (URI, "s3://bucket/key", None, True),
        (URI, "no-scheme", None, False),
        (URI, "1x://bad", None, False),
        (MANAGED, "trainer.kubeflow.org/trainjob-controller", None, True),
        (MANAGED, "kueue.x-k8s.io/multikueue", None, True),
        (MANAGED, "someone/else", None, False),
        (STATUS, {}, None, True),
        (STATUS, {"trainerStatus": {"lastUpdatedTime": "2026-01-01T00:00:00Z"}}, None, True),
        (STATUS, {"trainerStatus": {"progressPercentage": 5}}, None, False),
    ]


Evaluator = Callable[[str], Callable[[dict[str, Any]], Any]]


def common_expression_language() -> Evaluator:
    import cel  # type: ignore[import-not-found]

    def compile_(rule: str) -> Callable[[dict[str, Any]], Any]:
        program = cel.compile(rule)
        return lambda activation: program.execute(activation)

    return compile_


def cel_python() -> Evaluator:
    import celpy  # type: ignore[import-not-found]

    env = celpy.Environment()

    def compile_(rule: str) -> Callable[[dict[str, Any]], Any]:
        program = env.program(env.compile(rule))
        return lambda activation: program.evaluate({k: celpy.json_to_cel(v) for k, v in activation.items()})

    return compile_


def measure(name: str, evaluator: Evaluator, rules: dict[str, str], table: list[Case]) -> None:
    compiled: dict[str, Callable[[dict[str, Any]], Any]] = {}
    compile_errors: list[str] = []
    t0 = time.perf_counter()
    for rule in rules:
        try:
            compiled[rule] = evaluator(rule)
        except Exception as exc:
            compile_errors.append(f"{rule[:60]}: {type(exc).__name__}: {exc}")
    compile_ms = (time.perf_counter() - t0) * 1000
    agree, wrong = 0, []
    for rule, self_, old, want in table:
        activation = {"self": self_} if old is None else {"self": self_, "oldSelf": old}
        try:
            got = compiled[rule](activation) if rule in compiled else "not compiled"
        except Exception as exc:
            got = f"{type(exc).__name__}: {exc}"
        if not isinstance(got, str) and got == want:  # celpy's BoolType is an int subclass
            agree += 1
        else:
            wrong.append(f"{rule[:50]!r} self={str(self_)[:40]} -> {str(got)[:80]} (want {want})")
    # speed: every case of the table, evaluated with its compiled program, ROUNDS rounds; median of 5 runs
    runs = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(ROUNDS):
            for rule, self_, old, _want in table:
                if rule in compiled:
                    with contextlib.suppress(Exception):
                        compiled[rule]({"self": self_} if old is None else {"self": self_, "oldSelf": old})
        runs.append((time.perf_counter() - t0) / (ROUNDS * len(table)) * 1e6)
    print(f"## {name}")
    print(f"rules compiled: {len(compiled)}/{len(rules)} in {compile_ms:.1f} ms")
    for line in compile_errors:
        print(f"  compile error: {line}")
    print(f"verdicts equal to the API server's: {agree}/{len(table)}")
    for line in wrong:
        print(f"  differs: {line}")
    print(f"evaluation: median {statistics.median(runs):.1f} µs per rule evaluation (5 runs x {ROUNDS} x {len(table)})")
    print()


#: Evaluation errors: cel-go (the API server) says `no such key: <field>` when a rule selects an absent field.
ERROR_CASES = [(VCP, {"templates": [{}]}, "no such key: metadata"), ("self.a.b == 1", {"a": {}}, "no such key: b")]


def error_messages(name: str, evaluator: Evaluator) -> None:
    print(f"### {name}: evaluation errors (cel-go's text in brackets)")
    for rule, self_, want in ERROR_CASES:
        try:
            got = f"no error: {evaluator(rule)({'self': self_})!r}"
        except Exception as exc:
            got = f"{type(exc).__name__}: {exc}"
        print(f"  {rule[:40]!r}: {got[:150]} [{want}]")
    print()


def main() -> int:
    rules = rules_of_crds()
    table = cases(rules)
    assert {r for r, *_ in table} == set(rules), set(rules) - {r for r, *_ in table}
    print(f"{len(rules)} distinct CEL rules in crds/, {len(table)} cases\n")
    measure("common-expression-language (Rust cel-interpreter bindings)", common_expression_language(), rules, table)
    measure("cel-python (celpy, pure Python)", cel_python(), rules, table)
    error_messages("common-expression-language", common_expression_language())
    error_messages("cel-python", cel_python())
    return 0


if __name__ == "__main__":
    sys.exit(main())
