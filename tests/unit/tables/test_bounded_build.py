"""Bounded work for anything admission accepts (issue 28, item 4): over generated TrainJobs of every plugin with node
and process counts across the whole int32 range the CRD allows, whatever the API server's checks and the webhook
accept builds (no BuildError: what admission accepts must build) within a fixed memory and time per TrainJob, and
whatever they refuse is refused naming the field. Seeded (derandomized), measured with tracemalloc."""

from __future__ import annotations

import contextlib
import time
import tracemalloc
from collections.abc import Iterator
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_properties import FRAMEWORK, runtimes

from builders import FixedKeys, RuntimeBuilder, TrainJobBuilder, container_of, standard_jobs
from trainjob_operator.api import constants as c
from trainjob_operator.runtime.info import RuntimeSource, new_runtime_info
from trainjob_operator.runtime.limits import INDEXED_JOB_LIMIT
from trainjob_operator.runtime.observed import Observed, SSHKeyPair
from trainjob_operator.runtime.plugins import mpi, tensorflow
from trainjob_operator.runtime.snapshot import build_snapshot
from trainjob_operator.runtime.validation import admit_runtime, admit_trainjob, check_runtime, check_trainjob

BUILD_MEMORY_BYTES = 64 << 20
"""The most one build may allocate at its peak (a hostfile at the ConfigMap limit is 1 MiB; the JobSet a few KiB)."""
BUILD_SECONDS = 5.0
"""The most one build may take (on a loaded 2-CPU machine; a build of the largest accepted MPI job takes ~0.3 s)."""
KEY = SSHKeyPair(private_pem=b"PRIVATE", public_openssh=b"ecdsa-sha2-nistp521 AAAA\n")
BOUNDED = settings(
    max_examples=120, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck), database=None
)
COUNTS = st.one_of(
    st.integers(0, 8),
    st.integers(9, 200_000),
    st.sampled_from([INDEXED_JOB_LIMIT, INDEXED_JOB_LIMIT + 1, 26_000, 27_000, 2**31 - 1]),
    st.integers(0, 2**31 - 1),
)
MPI = RuntimeBuilder.make("deepspeed").ml_policy(
    num_nodes=1, mpi={"numProcPerNode": 1, "mpiImplementation": "OpenMPI", "sshAuthMountPath": "/root/.ssh"}
)
TENSORFLOW = (
    RuntimeBuilder.make("tensorflow").ml_policy(num_nodes=1).set("metadata.labels", {c.FRAMEWORK_LABEL: "tensorflow"})
)
FLUX = RuntimeBuilder.make("flux").ml_policy(num_nodes=1, flux={})


@st.composite
def big_trainjobs(draw: st.DrawFn) -> tuple[dict[str, object], dict[str, object]]:
    runtime = draw(st.one_of(st.sampled_from([MPI, TENSORFLOW, FLUX]), runtimes().map(lambda pair: pair[0])))
    raw_runtime = runtime.raw()
    name = draw(st.from_regex(r"[a-z]([-a-z0-9]{0,40}[a-z0-9])?", fullmatch=True))
    job = TrainJobBuilder.make(
        name=name, runtime=raw_runtime["metadata"]["name"], kind=raw_runtime["kind"], uid=draw(st.uuids().map(str))
    )
    fields: dict[str, object] = {}
    if draw(st.booleans()) or runtime is FLUX:
        fields["numNodes"] = draw(COUNTS)
    if draw(st.booleans()):
        fields["numProcPerNode"] = draw(st.integers(1, 2**31 - 1))
    if bool(fields) or draw(st.booleans()):
        job = job.trainer(**fields)
    if runtime is FLUX and draw(st.booleans()):
        job = job.set("spec.trainer", {})  # a Flux TrainJob without numNodes: refused, never a failed build
    return job.raw(), raw_runtime


def admitted(raw_job: dict[str, object], raw_runtime: dict[str, object]) -> tuple[bool, list[str]]:
    runtime, runtime_checks = check_runtime(raw_runtime)
    assert runtime is not None and runtime_checks.errors == () and admit_runtime(runtime).errors == ()
    source = RuntimeSource.of(runtime)
    job, schema = check_trainjob(raw_job)
    if job is None or schema.errors:
        return False, [str(e) for e in schema.errors]
    admission = admit_trainjob(FRAMEWORK, None, job, lambda kind, ns, name: source)
    return not admission.errors, [str(e) for e in admission.errors]


@BOUNDED
@given(big_trainjobs())
def test_what_admission_accepts_builds_within_a_fixed_memory_and_time(
    pair: tuple[dict[str, object], dict[str, object]],
) -> None:
    raw_job, raw_runtime = pair
    ok, errors = admitted(raw_job, raw_runtime)
    if not ok:
        assert all(e.startswith("spec.") for e in errors), errors  # each refusal names its field
        return
    runtime, _ = check_runtime(raw_runtime)
    job, _ = check_trainjob(raw_job)
    assert runtime is not None and job is not None
    source = RuntimeSource.of(runtime)
    tracemalloc.start()
    started = time.perf_counter()
    try:
        objects = [build_snapshot(job, source), *FRAMEWORK.desired_objects(job, source, Observed(keys=FixedKeys(KEY)))]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    took = time.perf_counter() - started
    assert objects
    assert peak < BUILD_MEMORY_BYTES, f"{peak} bytes for {raw_job['spec']}"
    assert took < BUILD_SECONDS, f"{took:.2f} s for {raw_job['spec']}"


REFUSALS: dict[str, tuple[RuntimeBuilder, dict[str, Any], str]] = {
    "two billion MPI nodes are over an Indexed Job's limit": (
        MPI,
        {"numNodes": 2**31 - 1},
        "spec.trainer.numNodes: Invalid value: 2147483647: must be at most 100000: a JobSet's Indexed Job runs at "
        "most 100000 pods (completions and parallelism)",
    ),
    "an MPI hostfile over a ConfigMap's 1 MiB is refused before it is written": (
        MPI,
        {"numNodes": 100_000},
        "spec.trainer.numNodes: Invalid value: 100000: too many nodes: the MPI hostfile (ConfigMap "
        "test-job-mpi-hostfile) would be 3888890 bytes, over the API's limit of 1048576 bytes",
    ),
    "a TF_CONFIG over 1 MiB is refused": (
        TENSORFLOW,
        {"numNodes": 40_000},
        "spec.trainer.numNodes: Invalid value: 40000: too many nodes: the TF_CONFIG value would be 1548964 bytes, "
        "over the API's limit of 1048576 bytes",
    ),
    "a Flux TrainJob without numNodes is refused (upstream's plugin reads it)": (
        FLUX,
        {"image": "flux:v1"},
        "spec.trainer.numNodes: Required value: must be set for a TrainJob whose runtime has mlPolicy.flux",
    ),
}


def test_a_runtime_too_large_to_snapshot_is_refused_naming_the_runtime_ref() -> None:
    huge = (
        RuntimeBuilder.make("huge")
        .ml_policy(num_nodes=1, torch={})
        .node_container(env=[{"name": "BLOB", "value": "x" * (1 << 20)}])
    )
    job = TrainJobBuilder.make(runtime="huge")
    ok, errors = admitted(job.raw(), huge.raw())
    assert not ok
    [error] = errors
    assert error.startswith("spec.runtimeRef: Invalid value: ")
    assert "the runtime is too large to snapshot: the ConfigMap test-job-runtime-snapshot would be " in error
    assert error.endswith("bytes, over the API's limit of 1048576 bytes")


TORCH = (  # one replicated job, `node`, like the default torch-distributed runtime's
    RuntimeBuilder.make("torch")
    .ml_policy(num_nodes=1, torch={})
    .jobs([j for j in standard_jobs() if j["name"] == c.NODE])
)
POD_NAMES = {
    # (TrainJob name length, numNodes) → accepted; each verdict equals JobSet v0.10's webhook on the JobSet built
    # (`kubectl create --dry-run=server` on the local control plane, 25 November 2026)
    "48 characters and 2 nodes fit: <name>-node-0-1-xxxxx is 63": (48, 2, True),
    "49 characters and 2 nodes do not": (49, 2, False),
    "48 characters and 10 nodes fit (pod index 9)": (48, 10, True),
    "48 characters and 11 nodes do not (pod index 10)": (48, 11, False),
    "47 characters and 11 nodes fit": (47, 11, True),
    "45 characters and 101 nodes fit": (45, 101, True),
}


def test_pod_names_within_jobsets_limit_as_jobset_judges_them() -> None:
    for sentence, (length, nodes, want) in POD_NAMES.items():
        job = TrainJobBuilder.make(name="a" * length, runtime="torch").trainer(numNodes=nodes)
        ok, errors = admitted(job.raw(), TORCH.raw())
        assert ok is want, (sentence, errors)
        if not ok:
            [error] = errors
            assert error.startswith(f'metadata.name: Invalid value: "{"a" * length}": must be no more than '), error
            assert "at most 63 characters" in error


def test_refusals_name_the_field_and_the_limit() -> None:
    for sentence, (runtime, trainer, want) in REFUSALS.items():
        job = TrainJobBuilder.make(runtime=runtime.raw()["metadata"]["name"]).trainer(**trainer)
        ok, errors = admitted(job.raw(), runtime.raw())
        assert (ok, errors) == (False, [want]), sentence


@BOUNDED
@given(st.integers(1, 300), st.sampled_from([MPI, TENSORFLOW]), st.booleans())
def test_the_computed_sizes_are_the_built_sizes(nodes: int, runtime: RuntimeBuilder, launcher_as_node: bool) -> None:
    """The closed forms admission checks equal what the build writes (checked against a limit of 0)."""
    if runtime is MPI:
        runtime = runtime.set("spec.mlPolicy.mpi.runLauncherAsNode", launcher_as_node)
    job = TrainJobBuilder.make(runtime=runtime.raw()["metadata"]["name"]).trainer(numNodes=nodes).obj()
    objects = FRAMEWORK.desired_objects(job, runtime.source(), Observed(keys=FixedKeys(KEY)))
    if runtime is TENSORFLOW:
        [jobset] = [o for o in objects if o["kind"] == c.JOBSET_KIND]
        node = container_of(jobset, c.NODE)
        built = len(next(e["value"] for e in node["env"] if e["name"] == c.TF_ENV_CONFIG))
        with limit(tensorflow, "ENV_VALUE_LIMIT"):
            [error] = tensorflow.tf_config_size_errors(new_runtime_info(job, runtime.source()), job)  # as admission
    else:
        [hostfile] = [o for o in objects if o["kind"] == "ConfigMap"]
        built = len(hostfile["data"][c.MPI_HOSTFILE_NAME])
        info = FRAMEWORK.runtime_info(job, runtime.source())
        assert info.ml_policy is not None and info.ml_policy.mpi is not None
        with limit(mpi, "CONFIGMAP_DATA_LIMIT"):
            [error] = mpi.hostfile_size_errors(info, job, info.ml_policy.mpi)
    assert f"would be {built} bytes" in str(error)


@contextlib.contextmanager
def limit(module: object, name: str) -> Iterator[None]:
    """The module's limit set to 0 for a moment, so its check reports every size."""
    saved = getattr(module, name)
    setattr(module, name, 0)
    try:
        yield
    finally:
        setattr(module, name, saved)
