"""Upstream v2.4 behaviour (issue 12): Open MPI 5 env (#4029), the TrainJob image on every MPI rank (#4301),
replicated job names of at most 20 characters in runtimes (#4394), and the CLI's structural pruning."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import pytest

from builders import (
    FIXED_KEYS,
    RuntimeBuilder,
    TrainJobBuilder,
    container,
    container_of,
    env_of,
    jobset_of,
    replicated_job,
)
from fake_client import FakeClient
from trainjob_operator.api import constants as c
from trainjob_operator.api.runtime import SHIPPED_MODELS
from trainjob_operator.controller.runtimes import RuntimeResolver
from trainjob_operator.controller.store import Store
from trainjob_operator.runtime.observed import Observed
from trainjob_operator.runtime.pipeline import Framework
from trainjob_operator.runtime.prune import prune, unknown_field_warning
from trainjob_operator.runtime.validation import admit_runtime, admit_trainjob, check_runtime

TJ = TrainJobBuilder.make()
RT = RuntimeBuilder.make()
FRAMEWORK = Framework.from_registry()
ORTE = {
    "OMPI_MCA_orte_default_hostfile": "/etc/mpi/hostfile",
    "OMPI_MCA_orte_keep_fqdn_hostnames": "true",
    "OMPI_MCA_orte_set_default_slots": "1",
    "OMPI_MCA_plm_rsh_args": "-o ConnectionAttempts=10",
}
PRTE = {
    "PRTE_MCA_prte_default_hostfile": "/etc/mpi/hostfile",
    "PRTE_MCA_prte_keep_fqdn_hostnames": "false",
    "PRTE_MCA_prte_set_default_slots": "1",
    "PRTE_MCA_plm_ssh_args": "-o ConnectionAttempts=10",
}


def mpi_runtime(
    launcher_ancestor: str | None = c.ANCESTOR_TRAINER, node_ancestor: str | None = None, launcher_as_node: bool = True
) -> RuntimeBuilder:
    """deepspeed-distributed's shape: workers running sshd in `node`, the launcher's `node` running mpirun."""
    return RT.ml_policy(
        num_nodes=1,
        mpi={
            "numProcPerNode": 1,
            "mpiImplementation": "OpenMPI",
            "sshAuthMountPath": "/home/mpiuser/.ssh",
            "runLauncherAsNode": launcher_as_node,
        },
    ).jobs(
        [
            replicated_job(c.NODE, node_ancestor, [container(c.NODE, "runtime:worker", command=["/usr/sbin/sshd"])]),
            replicated_job(c.LAUNCHER, launcher_ancestor, [container(c.NODE, "runtime:launcher", command=["mpirun"])]),
        ]
    )


def jobset(job: TrainJobBuilder, runtime: RuntimeBuilder) -> dict[str, Any]:
    return jobset_of(FRAMEWORK.desired_objects(job.obj(), runtime.source(), Observed(keys=FIXED_KEYS)))


# ------------------------------------------------------------------------------------------ #4029: PRTE env


@dataclass(frozen=True)
class EnvCase:
    job: TrainJobBuilder
    runtime: RuntimeBuilder
    launcher_env: dict[str, str]


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            EnvCase(TJ.trainer(numNodes=3), mpi_runtime(), {**ORTE, **PRTE}),
            id="the launcher gets the PRTE names beside the ORTE ones, keep_fqdn false for PRTE only",
        ),
        pytest.param(
            EnvCase(
                TJ.trainer(numNodes=2, numProcPerNode=4),
                mpi_runtime(),
                {**ORTE, **PRTE, "OMPI_MCA_orte_set_default_slots": "4", "PRTE_MCA_prte_set_default_slots": "4"},
            ),
            id="both slot variables follow the TrainJob's numProcPerNode",
        ),
        pytest.param(
            EnvCase(
                TJ.trainer(numNodes=2, env=[{"name": "USER_VAR", "value": "u"}]),
                mpi_runtime(),
                {**ORTE, **PRTE, "USER_VAR": "u"},
            ),
            id="the TrainJob's own env stays beside the MPI env",
        ),
    ],
)
def test_launcher_env_has_orte_and_prte(case: EnvCase) -> None:
    js = jobset(case.job, case.runtime)
    assert env_of(container_of(js, c.LAUNCHER)) == case.launcher_env
    assert "env" not in container_of(js, c.NODE) or not any(
        name.startswith(("OMPI_MCA_", "PRTE_MCA_")) for name in env_of(container_of(js, c.NODE))
    )


@pytest.mark.parametrize("name", sorted(c.OMPI_RESERVED_ENVS))
def test_every_mpi_env_the_operator_sets_is_reserved(name: str) -> None:
    job = TJ.trainer(env=[{"name": name, "value": "x"}]).obj()
    result = admit_trainjob(FRAMEWORK, None, job, lambda *_: mpi_runtime().source())
    assert [str(e) for e in result.errors] == [
        f'spec.trainer.env: Invalid value: [{{"name":"{name}","value":"x"}}]: must not have reserved envs, invalid '
        f"envs configured: [{name}]"
    ]


def test_reserved_env_names_are_exactly_the_launcher_env() -> None:
    assert frozenset(ORTE) | frozenset(PRTE) == c.OMPI_RESERVED_ENVS


def test_several_reserved_prte_envs_are_listed_sorted() -> None:
    job = TJ.trainer(
        env=[{"name": "PRTE_MCA_plm_ssh_args", "value": "x"}, {"name": "OMPI_MCA_plm_rsh_args", "value": "y"}]
    ).obj()
    result = admit_trainjob(FRAMEWORK, None, job, lambda *_: mpi_runtime().source())
    assert [str(e) for e in result.errors] == [
        'spec.trainer.env: Invalid value: [{"name":"PRTE_MCA_plm_ssh_args","value":"x"},'
        '{"name":"OMPI_MCA_plm_rsh_args","value":"y"}]: must not have reserved envs, invalid envs configured: '
        "[OMPI_MCA_plm_rsh_args PRTE_MCA_plm_ssh_args]"
    ]


# ---------------------------------------------------------------------------------- #4301: image on every rank


@dataclass(frozen=True)
class ImageCase:
    job: TrainJobBuilder
    runtime: RuntimeBuilder
    launcher_image: str
    node_image: str


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            ImageCase(TJ.trainer(image="user:app"), mpi_runtime(), "user:app", "user:app"),
            id="the TrainJob image runs on the launcher and on the workers",
        ),
        pytest.param(
            ImageCase(
                TJ.trainer(image="user:app"),
                mpi_runtime(launcher_ancestor=None, node_ancestor=c.ANCESTOR_TRAINER),
                "user:app",
                "user:app",
            ),
            id="whichever job carries the ancestor label, both get the image",
        ),
        pytest.param(
            ImageCase(TJ.trainer(image="user:app"), mpi_runtime(launcher_as_node=False), "user:app", "user:app"),
            id="without runLauncherAsNode the workers get it too",
        ),
        pytest.param(
            ImageCase(TJ.trainer(numNodes=2), mpi_runtime(), "runtime:launcher", "runtime:worker"),
            id="no TrainJob image keeps the runtime's images",
        ),
    ],
)
def test_trainjob_image_on_mpi_launcher_and_nodes(case: ImageCase) -> None:
    js = jobset(case.job, case.runtime)
    assert (container_of(js, c.LAUNCHER)["image"], container_of(js, c.NODE)["image"]) == (
        case.launcher_image,
        case.node_image,
    )
    assert container_of(js, c.NODE)["command"] == ["/usr/sbin/sshd"]  # the workers keep their sshd


def test_image_of_non_ancestor_jobs_is_kept_without_mpi() -> None:
    runtime = RT.ml_policy(num_nodes=1, torch={}).jobs(
        [
            replicated_job(c.NODE, c.ANCESTOR_TRAINER, [container(c.NODE, "runtime:node")]),
            replicated_job("sidecar-job", None, [container(c.NODE, "runtime:other")]),
        ]
    )
    js = jobset(TJ.trainer(image="user:app"), runtime)
    assert (container_of(js, c.NODE)["image"], container_of(js, "sidecar-job")["image"]) == (
        "user:app",
        "runtime:other",
    )


# ----------------------------------------------------------------------------- #4394: replicated job names <= 20


NAME_21 = "a" * 21
NAME_RULE = "replicatedJob name must be no more than 20 characters"


@dataclass(frozen=True)
class NameCase:
    names: list[str]
    errors: list[str] = field(default_factory=list)


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(NameCase(["dataset-initializer", "a" * 20]), id="20 characters are accepted"),
        pytest.param(
            NameCase(
                ["node", NAME_21],
                [f'spec.template.spec.replicatedJobs[1].name: Invalid value: "{NAME_21}": {NAME_RULE}'],
            ),
            id="21 characters are refused, naming the index and the value",
        ),
        pytest.param(
            NameCase(
                [NAME_21, "b" * 30],
                [
                    f'spec.template.spec.replicatedJobs[0].name: Invalid value: "{NAME_21}": {NAME_RULE}',
                    f'spec.template.spec.replicatedJobs[1].name: Invalid value: "{"b" * 30}": {NAME_RULE}',
                ],
            ),
            id="every long name is reported",
        ),
    ],
)
@pytest.mark.parametrize("kind", [c.TRAINING_RUNTIME_KIND, c.CLUSTER_TRAINING_RUNTIME_KIND])
def test_replicated_job_names_at_most_20(case: NameCase, kind: str) -> None:
    runtime = RuntimeBuilder.make(kind=kind).jobs(
        [replicated_job(name, None, [container(c.NODE)]) for name in case.names]
    )
    parsed, crd = check_runtime(runtime.raw())
    assert [str(e) for e in crd.errors] == case.errors  # the CRD's CEL rule (offline validator)
    assert parsed is not None
    assert [str(e) for e in admit_runtime(parsed).errors] == case.errors  # the webhook


def test_crd_carries_the_replicated_job_name_rule() -> None:
    from trainjob_dev.crdgen import root_schema
    from trainjob_operator.api.runtime import TrainingRuntime

    name = root_schema(TrainingRuntime)["properties"]["spec"]["properties"]["template"]["properties"]["spec"][
        "properties"
    ]["replicatedJobs"]["items"]["properties"]["name"]
    assert {key: value for key, value in name.items() if key != "description"} == {
        "type": "string",
        "minLength": 1,
        "maxLength": 63,
        "x-kubernetes-validations": [{"rule": "size(self) <= 20", "message": NAME_RULE}],
    }


# ------------------------------------------------------------------------------------- structural pruning


SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "jobs": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "name": {"type": "string"},
                            "resources": {
                                "type": "object",
                                "properties": {
                                    "limits": {"type": "object", "additionalProperties": {"type": "string"}}
                                },
                            },
                        },
                    },
                },
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "empty": {"type": "object"},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "count": {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True},
            },
        },
    },
}


@dataclass(frozen=True)
class PruneCase:
    obj: dict[str, Any]
    want: dict[str, Any]
    pruned: list[str] = field(default_factory=list)


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            PruneCase(
                {"kind": "K", "metadata": {"name": "x", "odd": 1}, "spec": {"labels": {"a": "b"}}},
                {"kind": "K", "metadata": {"name": "x", "odd": 1}, "spec": {"labels": {"a": "b"}}},
            ),
            id="a known object is left alone (root metadata is the API server's, not the schema's)",
        ),
        pytest.param(
            PruneCase(
                {"spec": {"jobs": [{"name": "a"}, {"name": "b", "resource": {"limits": {"cpu": "1"}}}]}},
                {"spec": {"jobs": [{"name": "a"}, {"name": "b"}]}},
                ["spec.jobs[1].resource"],
            ),
            id="a typo inside a list item is pruned and named with its index",
        ),
        pytest.param(
            PruneCase(
                {"spec": {"jobs": [{"resources": {"limits": {"cpu": "1"}, "limit": {}}}]}, "extra": 1},
                {"spec": {"jobs": [{"resources": {"limits": {"cpu": "1"}}}]}},
                ["spec.jobs[0].resources.limit", "extra"],
            ),
            id="map values are kept, unknown siblings and top-level fields pruned",
        ),
        pytest.param(
            PruneCase(
                {"spec": {"empty": {"x": 1}, "free": {"y": {"z": 2}}, "count": 3}},
                {"spec": {"empty": {}, "free": {"y": {"z": 2}}, "count": 3}},
                ["spec.empty.x"],
            ),
            id="an object without properties keeps nothing unless it preserves unknown fields",
        ),
    ],
)
def test_prune_as_the_api_server(case: PruneCase) -> None:
    original = copy.deepcopy(case.obj)
    got, paths = prune(case.obj, SCHEMA)
    assert (got, paths) == (case.want, case.pruned)
    assert case.obj == original  # the input is not modified


def test_unknown_field_warning_is_kubectls() -> None:
    assert unknown_field_warning("spec.template.spec.containers") == 'unknown field "spec.template.spec.containers"'


# ------------------------------------------------- resuming a suspended MPI TrainJob built before the upgrade


def suspended_jobset(**status: Any) -> dict[str, Any]:
    return {"spec": {"suspend": True}, "status": status}


@pytest.mark.parametrize(
    ("jobset", "want"),
    [
        pytest.param(suspended_jobset(), True, id="a suspended JobSet without status never ran: rebuildable"),
        pytest.param(
            suspended_jobset(
                conditions=[{"type": "Suspended", "status": "True"}],
                replicatedJobsStatus=[
                    {"name": "launcher", "active": 0, "ready": 0, "succeeded": 0, "failed": 0, "suspended": 1}
                ],
            ),
            True,
            id="suspended Jobs only, Suspended condition True: rebuildable",
        ),
        pytest.param(None, False, id="no JobSet: nothing to rebuild"),
        pytest.param({"spec": {"suspend": False}, "status": {}}, False, id="a running JobSet is never rebuilt"),
        pytest.param(
            suspended_jobset(conditions=[{"type": "Suspended", "status": "False"}]),
            False,
            id="a JobSet that was resumed once is not rebuilt",
        ),
        pytest.param(suspended_jobset(restarts=1), False, id="a restarted JobSet is not rebuilt"),
        pytest.param(
            suspended_jobset(replicatedJobsStatus=[{"name": "node", "succeeded": 1}]),
            False,
            id="a JobSet with a succeeded Job is not rebuilt",
        ),
        pytest.param(
            suspended_jobset(replicatedJobsStatus=[{"name": "node", "failed": 1}]),
            False,
            id="a JobSet with a failed Job is not rebuilt",
        ),
        pytest.param(suspended_jobset(terminalState="Failed"), False, id="a finished JobSet is not rebuilt"),
    ],
)
def test_only_a_never_started_suspended_jobset_is_rebuildable(jobset: dict[str, Any] | None, want: bool) -> None:
    from trainjob_operator.runtime.plugins.jobset import rebuildable

    assert rebuildable(jobset) is want


# ---------------------------------------------------------------------------------------- the webhook handlers


def resolver_of(runtime: RuntimeBuilder, client: FakeClient) -> tuple[RuntimeResolver, Store]:
    """The webhook's runtime lookup with `runtime` cached (and nothing else: no JobSet)."""
    store = Store()
    raw = runtime.raw()
    (store.runtimes if raw["kind"] == c.TRAINING_RUNTIME_KIND else store.cluster_runtimes).put(raw)
    return RuntimeResolver(client, store, SHIPPED_MODELS), store


def webhooks(runtime: RuntimeBuilder) -> Any:
    import datetime as dt

    from trainjob_operator.controller.webhooks import Webhooks

    client = FakeClient()
    resolver, store = resolver_of(runtime, client)
    return Webhooks(FRAMEWORK, resolver, store, client, lambda: dt.datetime(2026, 1, 1, tzinfo=dt.UTC))


@pytest.mark.parametrize("kind", [c.TRAINING_RUNTIME_KIND, c.CLUSTER_TRAINING_RUNTIME_KIND])
def test_runtime_webhooks_refuse_a_long_replicated_job_name(kind: str) -> None:
    import asyncio

    hooks = webhooks(RT)
    runtime = RuntimeBuilder.make(kind=kind).jobs([replicated_job(NAME_21, None, [container(c.NODE)])]).raw()
    handler = (
        hooks.validate_training_runtime if kind == c.TRAINING_RUNTIME_KIND else hooks.validate_cluster_training_runtime
    )
    verdict = asyncio.run(handler({"operation": "CREATE", "object": runtime}))
    assert (verdict.allowed, verdict.message) == (
        False,
        f'spec.template.spec.replicatedJobs[0].name: Invalid value: "{NAME_21}": {NAME_RULE}',
    )


def test_trainjob_webhook_refuses_a_reserved_prte_env() -> None:
    import asyncio

    job = TJ.trainer(env=[{"name": c.PRTE_ENV_HOSTFILE, "value": "/mine"}]).raw()
    verdict = asyncio.run(webhooks(mpi_runtime()).validate_trainjob({"operation": "CREATE", "object": job}))
    assert (verdict.allowed, verdict.message) == (
        False,
        'spec.trainer.env: Invalid value: [{"name":"PRTE_MCA_prte_default_hostfile","value":"/mine"}]: must '
        "not have reserved envs, invalid envs configured: [PRTE_MCA_prte_default_hostfile]",
    )


def priority_classes(names: list[str] | None) -> FakeClient:
    """The API holding these PriorityClasses (None: their list is refused)."""
    client = FakeClient().put(
        *({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": n}} for n in names or ())
    )
    if names is None:
        from trainjob_operator.k8s.client import ApiError

        client.fail("list", ApiError(403, "Forbidden", "priorityclasses is forbidden"))
    return client


HIGH = RuntimeBuilder.make().volcano().job(c.NODE, "template.spec.template.spec.priorityClassName", "high")
MISSING_HIGH = (
    'spec.templateSpec.priorityClassName: Invalid value: "high": PriorityClass "high" doesn\'t exist: '
    'priorityclasses.scheduling.k8s.io "high" not found'
)
PRIORITY_CASES = {
    "a Volcano TrainJob naming a PriorityClass that does not exist is refused": (HIGH, ["low"], False, 1),
    "a Volcano TrainJob naming an existing PriorityClass is admitted": (HIGH, ["high"], True, 1),
    "PriorityClasses that cannot be listed skip the check": (HIGH, None, True, 1),
    "a runtime without Volcano lists no PriorityClasses": (RT, ["low"], True, 0),
}


@pytest.mark.parametrize("case", PRIORITY_CASES.values(), ids=PRIORITY_CASES.keys())
def test_the_trainjob_webhook_checks_volcano_priority_classes(
    case: tuple[RuntimeBuilder, list[str] | None, bool, int],
) -> None:
    import asyncio
    import datetime as dt

    from trainjob_operator.controller.webhooks import Webhooks

    runtime, names, allowed, lists = case
    client = priority_classes(names)
    resolver, store = resolver_of(runtime, client)
    hooks = Webhooks(FRAMEWORK, resolver, store, client, lambda: dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
    verdict = asyncio.run(hooks.validate_trainjob({"operation": "CREATE", "object": TJ.raw()}))
    lists_sent = sum(call[0] == "list" for call in client.calls)
    assert (verdict.allowed, verdict.message, lists_sent) == (allowed, "" if allowed else MISSING_HIGH, lists)
