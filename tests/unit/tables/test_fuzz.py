"""Bounded fuzz of everything that takes a user's TrainJob or runtime: schema and admission validation, rendering,
the status step, the webhooks' handler and the CLI (validate/render over YAML text).

Valid generated pairs are mutated at random places with hostile values (huge and negative numbers, non-finite
numbers, odd quantities and times, wrong types, deep nesting). The properties: validation answers with field errors
and never raises; whatever validation accepts renders (or raises BuildError) and gets a status without raising; the
CLI ends with exit 0, 1 or 2 and one clear line, never a traceback. An exception of any other type fails the test
with the input that caused it.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import datetime as dt
import io
import os
from typing import Any, cast

import pytest
import yaml
from aiohttp import web
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_properties import FRAMEWORK, NAMES, patches, runtimes, trainer

from builders import FIXED_KEYS, RuntimeBuilder, TrainJobBuilder
from trainjob_operator import cli
from trainjob_operator.api import constants as c
from trainjob_operator.runtime.errors import BuildError, printable
from trainjob_operator.runtime.info import RuntimeSource
from trainjob_operator.runtime.observed import Observed
from trainjob_operator.runtime.snapshot import build_snapshot
from trainjob_operator.runtime.status import trainjob_state
from trainjob_operator.runtime.validation import admit_runtime, admit_trainjob, check_runtime, check_trainjob

EXAMPLES = int(os.environ.get("TRAINJOB_FUZZ_EXAMPLES", "150"))
"""Per property, derandomized in `make test` (tests/conftest.py); `make fuzz` runs 500 at random, `make chaos` 2,000."""
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
NOW = dt.datetime(2026, 11, 23, 12, 0, tzinfo=dt.UTC)


def nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = {"a": [value]}
    return value


HOSTILE = st.one_of(
    st.sampled_from(
        [
            None,
            True,
            "",
            " ",
            "-1",
            "0",
            "1e999",
            "Infinity",
            "NaN",
            "-Inf",
            "1e-999",
            "9" * 40,
            "1Ei",
            "999999Ei",
            "0.0000000001n",
            "+.5",
            ".",
            "e5",
            "1e",
            "2.5Gi",
            "--",
            "\u0000",
            "\ud7ff\ue000",
            "9999-12-31T23:59:59Z",
            "0001-01-01T00:00:00Z",
            "2026-11-23T12:00:00",
            "not-a-time",
            "a" * 300,
            [],
            {},
            [None],
            {"": None},
            0,
            -1,
            1,
            2**31,
            2**31 - 1,  # accepted by the CRD: the build must stay bounded (issue 28, item 4)
            100_000,
            100_001,
            30_000,
            2**53 + 1,
            2**63 - 1,
            -(2**63),
            10**30,
            1e308,
            -1e308,
            0.5,
            1e-300,
        ]
    ),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=30),
    st.integers(1, 60).map(nested),
    st.dictionaries(st.text(max_size=8), st.one_of(st.none(), st.integers(), st.text(max_size=8)), max_size=3),
)

# Places the mutations go to: the ones a user writes, and a few the API server writes.
JOB_PATHS = [
    "spec.activeDeadlineSeconds",
    "spec.suspend",
    "spec.managedBy",
    "spec.trainer.numNodes",
    "spec.trainer.numProcPerNode",
    "spec.trainer.resourcesPerNode",
    "spec.trainer.resourcesPerNode.requests",
    "spec.trainer.resourcesPerNode.requests.cpu",
    "spec.trainer.resourcesPerNode.limits.nvidia.com/gpu",
    "spec.trainer.resourcesPerNode.requests.memory",
    "spec.trainer.image",
    "spec.trainer.command",
    "spec.trainer.args",
    "spec.trainer.env",
    "spec.trainer.env.0",
    "spec.trainer.env.0.value",
    "spec.labels",
    "spec.annotations",
    "spec.runtimePatches",
    "spec.runtimePatches.0.time",
    "spec.runtimePatches.0.manager",
    "spec.initializer",
    "spec.initializer.dataset.storageUri",
    "spec.runtimeRef.name",
    "metadata.name",
    "metadata.creationTimestamp",
    "metadata.uid",
    "metadata.labels",
    "metadata.generation",
    "status",
    "status.conditions",
    "status.conditions.0",
    "status.conditions.0.lastTransitionTime",
    "status.jobsStatus",
]
RUNTIME_PATHS = [
    "spec.mlPolicy.numNodes",
    "spec.mlPolicy.torch.numProcPerNode",
    "spec.mlPolicy.mpi.numProcPerNode",
    "spec.mlPolicy.mpi.sshAuthMountPath",
    "spec.podGroupPolicy",
    "spec.podGroupPolicy.coscheduling",
    "spec.podGroupPolicy.coscheduling.scheduleTimeoutSeconds",
    "spec.template.spec.replicatedJobs.0.replicas",
    "spec.template.spec.replicatedJobs.0.template.spec.parallelism",
    "spec.template.spec.replicatedJobs.0.template.spec.template.spec.containers.0.resources.requests.cpu",
    "spec.template.spec.replicatedJobs.0.template.spec.template.spec.containers.0.resources.limits",
    "spec.template.spec.replicatedJobs.0.template.spec.template.spec.containers.0.env",
    "spec.template.spec.replicatedJobs.0.template.spec.template.spec.overhead",
    "spec.template.spec.network",
    "spec.template.spec.successPolicy",
    "spec.template.metadata.labels",
    "metadata.name",
]


def put(raw: dict[str, Any], path: str, value: Any) -> None:
    """Set `path` (dotted; digits index lists), creating mappings on the way; a path through a scalar is skipped."""
    node: Any = raw
    parts = path.split(".")
    for part in parts[:-1]:
        if isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                return
            node = node[int(part)]
        elif isinstance(node, dict):
            if not isinstance(node.get(part), dict | list):
                node[part] = {}
            node = node[part]
        else:
            return
    last = parts[-1]
    if isinstance(node, dict):
        node[last] = copy.deepcopy(value)
    elif isinstance(node, list) and last.isdigit() and int(last) < len(node):
        node[int(last)] = copy.deepcopy(value)


@st.composite
def hostile_pairs(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    """A valid TrainJob/runtime pair with 1 to 4 fields replaced by hostile values."""
    runtime, plugin = draw(runtimes())
    raw_runtime = runtime.raw()
    kind, name = raw_runtime["kind"], raw_runtime["metadata"]["name"]
    job = TrainJobBuilder.make(name=draw(NAMES), runtime=name, kind=kind).set(
        "metadata.creationTimestamp", "2026-11-23T11:00:00Z"
    )
    fields = draw(trainer(plugin, name))
    if fields is not None:
        job = job.trainer(**fields)
    for manager, jobs, metadata in draw(patches(runtime)):
        job = job.patch(manager, jobs, metadata)
    raw_job = job.raw()
    for _ in range(draw(st.integers(1, 4))):
        if draw(st.booleans()):
            put(raw_job, draw(st.sampled_from(JOB_PATHS)), draw(HOSTILE))
        else:
            put(raw_runtime, draw(st.sampled_from(RUNTIME_PATHS)), draw(HOSTILE))
    return raw_job, raw_runtime


def jobset_for(objects: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The rendered JobSet with a plausible running status, for the status step."""
    jobset = next((o for o in objects if o.get("kind") == c.JOBSET_KIND), None)
    if jobset is None:
        return None
    jobset = copy.deepcopy(jobset)
    jobs = jobset["spec"]["replicatedJobs"]
    jobset["status"] = {
        "replicatedJobsStatus": [
            {"name": j["name"], "active": 1, "ready": 1, "succeeded": 0, "failed": 0, "suspended": 0} for j in jobs
        ]
    }
    return jobset


def pipeline(raw_job: dict[str, Any], raw_runtime: dict[str, Any]) -> str:
    """What the API server, the webhooks and the reconciler do with the pair; returns how far it got."""
    from trainjob_operator.runtime.defaulting import keep_newer_fields, stamp_patch_times

    # The mutating webhook sees the raw object before the schema does (found by the admission fuzz: a runtime
    # patch's manager that is no string raised TypeError there); create and update.
    for old in (None, raw_job):
        stamp_patch_times(raw_job, old, "2026-01-01T00:00:00Z")
        keep_newer_fields(raw_job, old, full_update=True)
    runtime, schema = check_runtime(raw_runtime)
    if runtime is None or schema.errors:
        assert all(str(e) for e in schema.errors)
        return "runtime refused by the schema"
    if admit_runtime(runtime).errors:
        return "runtime refused by admission"
    source = RuntimeSource.of(runtime)
    job, job_schema = check_trainjob(raw_job)
    if job is None or job_schema.errors:
        assert all(str(e) for e in job_schema.errors)
        return "trainjob refused by the schema"
    admission = admit_trainjob(FRAMEWORK, None, job, lambda *_: source)
    if admission.errors:
        assert all(str(e) for e in admission.errors)
        return "trainjob refused by admission"
    try:
        objects = [build_snapshot(job, source), *FRAMEWORK.desired_objects(job, source, Observed(keys=FIXED_KEYS))]
    except BuildError as err:
        assert str(err)
        return "build failed with a clear error"
    for observed in (Observed(), Observed(jobset=jobset_for(objects))):
        outcome = FRAMEWORK.status(job, observed, NOW)
        trainjob_state(job, outcome.status)
        outcome.status.to_wire()
    return "rendered"


def named(runtime_ref: str, runtime_name: str, nesting: int = 0) -> tuple[dict[str, Any], dict[str, Any]]:
    """A TrainJob referring to ClusterTrainingRuntime `runtime_ref`, and one named `runtime_name`; with `nesting`, a
    value that many levels deep in the TrainJob's env. The explicit examples below are inputs a random campaign
    found (issue 24): each one stays in every run."""
    kind = c.CLUSTER_TRAINING_RUNTIME_KIND
    raw_job = TrainJobBuilder.make(name="job", runtime=runtime_ref, kind=kind).raw()
    if nesting:
        put(raw_job, "spec.trainer.env", nested(nesting))
    return raw_job, RuntimeBuilder.make(name=runtime_name, kind=kind).raw()


TERMINAL_TRICKS = "evil\r\x1b[2Jname"
"""A carriage return and the escape sequence that clears a terminal, in a name."""


@FUZZ
@given(hostile_pairs())
@example(named("\r", "\r"))
@example(named(TERMINAL_TRICKS, TERMINAL_TRICKS))
@example(named("r", "r", nesting=60))
def test_the_pure_pipeline_raises_nothing_unexpected(pair: tuple[dict[str, Any], dict[str, Any]]) -> None:
    pipeline(*pair)


def run_cli(argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = cli.main(argv)
        except SystemExit as exit_:
            code = int(exit_.code or 0)
    return code, err.getvalue()


@FUZZ
@given(hostile_pairs(), st.sampled_from(["validate", "render-yaml", "render-json"]))
@example(named("\r", "\r"), "validate")  # printed raw, its one line became two
@example(named(TERMINAL_TRICKS, TERMINAL_TRICKS), "validate")  # cleared the terminal
@example(named(TERMINAL_TRICKS, "other"), "render-yaml")  # not found: the last line names it
@example(named("r", "r", nesting=60), "render-json")
def test_the_cli_ends_with_a_clear_error_or_success(
    tmp_path_factory: pytest.TempPathFactory, pair: tuple[dict[str, Any], dict[str, Any]], command: str
) -> None:
    folder = tmp_path_factory.mktemp("fuzz")
    jobs, runtimes_file = folder / "jobs.yaml", folder / "runtimes.yaml"
    jobs.write_text(yaml.safe_dump(pair[0]))
    runtimes_file.write_text(yaml.safe_dump(pair[1]))
    verb, _, output = command.partition("-")
    argv = [verb, "-f", str(jobs), "-r", str(runtimes_file), *(["-o", output] if output else [])]
    code, err = run_cli(argv)
    assert code in (0, 1, 2), err
    assert "Traceback" not in err
    lines = err.split("\n")  # not splitlines(): a carriage return must not pass for a line break here
    assert [line for line in lines if printable(line) != line] == [], "a control character reached the terminal"
    if code == 2:  # unusable input: it ends with one line naming it (after any other object's own errors)
        assert err.splitlines()[-1].startswith("trainjob-operator: error: "), err


YAML_TEXT = st.one_of(
    st.text(max_size=200),
    st.binary(max_size=200).map(lambda b: b.decode("latin-1")),
    st.sampled_from(
        [
            "kind: TrainJob\nmetadata: {name: a}\nspec: {runtimeRef: {name: " + "[" * 50 + "]" * 50 + "}}",
            "a: &a [1]\nb: &b [*a, *a]\nc: [*b, *b]\nkind: TrainJob",
            "kind: TrainJob\nmetadata: {name: a, creationTimestamp: 2026-01-01T00:00:00Z}\nspec: {runtimeRef: {name: r}}",
            "kind: TrainJob\nmetadata: {name: !!binary aGVsbG8=}\n",
            "kind: TrainJob\nmetadata: {name: a}\nspec: {activeDeadlineSeconds: " + "9" * 5000 + "}",
            "? [a, b]\n: c\nkind: TrainJob\n",
            "kind: List\nitems: [1, 2]",
            "--- !!python/object:os.system\n",
            "kind: TrainJob\n" * 3,
        ]
    ),
)


@FUZZ
@given(YAML_TEXT)
@example("kind: TrainJob\nspec: " + "[" * 1500 + "]" * 1500)  # past libyaml's own nesting limit (1000)
@example("kind: TrainJob\nmetadata: {name: " + TERMINAL_TRICKS + "}\n")
def test_the_cli_survives_any_text(tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    path = tmp_path_factory.mktemp("text") / "in.yaml"
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    code, err = run_cli(["render", "-f", str(path), "-o", "json"])
    assert code in (0, 1, 2), err
    assert "Traceback" not in err
    assert [line for line in err.split("\n") if printable(line) != line] == [], (
        "a control character reached the terminal"
    )


def test_the_webhook_refuses_what_it_cannot_check_naming_the_cause() -> None:
    """A handler crash is a refusal (400) that names the error, never a 500 without content."""
    from trainjob_operator.controller.admissionserver import AdmissionServer
    from trainjob_operator.metrics import Metrics

    async def broken(_: dict[str, Any]) -> Any:
        raise OverflowError("date value out of range")

    class Request:
        path = "/validate"

        async def json(self) -> dict[str, Any]:
            return {"request": {"uid": "u1", "object": {}}}

    server = AdmissionServer("127.0.0.1", 0, {"/validate": broken}, Metrics())
    # A stand-in for aiohttp's request (deliberately another type: the handler reads only its path and JSON body).
    response = asyncio.run(server._serve(cast(web.Request, Request())))
    import json

    assert isinstance(response.body, bytes)
    body = json.loads(response.body)["response"]
    assert (body["allowed"], body["status"]["code"], body["status"]["message"]) == (
        False,
        400,
        "the object cannot be checked: OverflowError: date value out of range",
    )


def test_a_webhook_call_cut_by_the_api_server_is_no_traceback() -> None:
    """The API server restarting (or timing out) mid-call cut the body: aiohttp logged a traceback."""
    from trainjob_operator.controller.admissionserver import AdmissionServer
    from trainjob_operator.metrics import Metrics

    async def never(_: dict[str, Any]) -> Any:
        raise AssertionError("not reached")

    class Request:
        path = "/validate"

        async def json(self) -> dict[str, Any]:
            raise ConnectionResetError("Connection lost")

    server = AdmissionServer("127.0.0.1", 0, {"/validate": never}, Metrics())
    response = asyncio.run(server._serve(cast(web.Request, Request())))  # a stand-in, as above
    assert response.status == 400
