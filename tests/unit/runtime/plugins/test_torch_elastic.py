"""Elastic PyTorch in the torch plugin (runtime/plugins/torch.py): torchrun's elastic env, the rendezvous
Service, the bounds the JobSet carries, and the admission rules of `mlPolicy.torch.elasticPolicy`."""

import json
from dataclasses import dataclass
from typing import Any

import pytest

from builders import FixedKeys, RuntimeBuilder, TrainJobBuilder, by_kind, container_of, env_of, jobset_of
from trainjob_operator.api import constants as c
from trainjob_operator.runtime.info import RuntimeSource
from trainjob_operator.runtime.observed import Observed, SSHKeyPair
from trainjob_operator.runtime.pipeline import Framework
from trainjob_operator.runtime.validation import admit_trainjob, check_runtime, check_trainjob

FRAMEWORK = Framework.from_registry()
KEYS = FixedKeys(SSHKeyPair(private_pem=b"P", public_openssh=b"ecdsa AAAA\n"))
NODE_RANK = {"fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}


def runtime(**policy: Any) -> RuntimeBuilder:
    return RuntimeBuilder.make().ml_policy(num_nodes=2, torch={"elasticPolicy": policy})


def render(job: TrainJobBuilder, rt: RuntimeBuilder) -> list[dict[str, Any]]:
    return FRAMEWORK.desired_objects(job.obj(), rt.source(), Observed(keys=KEYS))


def test_an_elastic_trainjob_runs_torchrun_elastic_with_every_agent_serving_a_store_and_a_service_at_index_0() -> None:
    objects = render(TrainJobBuilder.make().trainer(numNodes=2), runtime(minNodes=1, maxNodes=3, maxRestarts=5))
    jobset = jobset_of(objects)
    node = container_of(jobset, c.NODE)
    assert env_of(node) == {
        "PET_NNODES": "1:3",
        "PET_NPROC_PER_NODE": "1",  # the standard runtime's node asks for CPU only
        "PET_NODE_RANK": NODE_RANK,
        "PET_RDZV_BACKEND": "c10d",
        "PET_RDZV_ENDPOINT": "test-job-rdzv:29400",
        "PET_RDZV_ID": "uid",
        "PET_RDZV_CONF": "is_host=true",
        "PET_MAX_RESTARTS": "5",
        "PET_MASTER_ADDR": "test-job-node-0-0.test-job",
        "PET_MASTER_PORT": "29500",
    }
    assert {p["containerPort"] for p in node["ports"]} == {29500, 29400}
    assert json.loads(jobset["metadata"]["annotations"][c.ELASTIC_ANNOTATION]) == {
        "minNodes": 1,
        "maxNodes": 3,
        "belowMinNodesSeconds": c.ELASTIC_DEFAULT_BELOW_MIN_SECONDS,
    }
    rjob = next(r for r in jobset["spec"]["replicatedJobs"] if r["name"] == c.NODE)
    assert (rjob["template"]["spec"]["parallelism"], rjob["template"]["spec"]["completions"]) == (2, 2)
    (service,) = by_kind(objects, "Service")
    assert service["metadata"]["name"] == "test-job-rdzv"  # no pod's hostname: no pod resolves it to itself
    assert service["metadata"]["ownerReferences"][0]["uid"] == "uid"
    assert service["spec"] == {
        "clusterIP": "None",
        "publishNotReadyAddresses": True,
        "selector": {
            c.JOBSET_NAME_LABEL: "test-job",
            c.JOBSET_REPLICATED_JOB_LABEL: c.NODE,
            c.JOB_COMPLETION_INDEX_LABEL: "0",
        },
        "ports": [{"name": "c10d", "port": 29400, "targetPort": 29400}],
    }


@pytest.mark.parametrize(
    ("given", "want"),
    [
        pytest.param(None, "is_host=true", id="no options: every agent serves a store"),
        pytest.param(
            "join_timeout=900, last_call_timeout=5",
            "join_timeout=900,last_call_timeout=5,is_host=true",
            id="the runtime's options are kept",
        ),
        pytest.param(
            "is_host=false,read_timeout=20", "read_timeout=20,is_host=true", id="the runtime's is_host is replaced"
        ),
    ],
)
def test_the_rendezvous_options_keep_the_runtimes_and_make_every_agent_a_store_host(
    given: str | None, want: str
) -> None:
    rt = runtime(minNodes=1, maxNodes=2)
    if given is not None:
        rt = rt.node_container(env=[{"name": "PET_RDZV_CONF", "value": given}])
    env = env_of(container_of(jobset_of(render(TrainJobBuilder.make().trainer(numNodes=2), rt)), c.NODE))
    assert env["PET_RDZV_CONF"] == want


def test_the_rendezvous_service_selects_the_index_status_names_after_a_move() -> None:
    job = TrainJobBuilder.make().trainer(numNodes=2).set("status", {"elastic": {"rendezvousIndex": 1}})
    (service,) = by_kind(render(job, runtime(minNodes=1, maxNodes=2)), "Service")
    assert service["spec"]["selector"][c.JOB_COMPLETION_INDEX_LABEL] == "1"


def test_the_defaults_are_min_1_max_numnodes_3_restarts_and_a_kueue_job_carries_what_was_admitted() -> None:
    job = TrainJobBuilder.make().trainer(numNodes=2).set("metadata.labels", {c.KUEUE_QUEUE_NAME_LABEL: "q"})
    jobset = jobset_of(render(job, runtime()))
    env = env_of(container_of(jobset, c.NODE))
    assert (env["PET_NNODES"], env["PET_MAX_RESTARTS"]) == ("1:2", "3")
    assert json.loads(jobset["metadata"]["annotations"][c.ELASTIC_ANNOTATION])["admittedNodes"] == 2


def test_a_torch_runtime_without_elastic_policy_builds_what_it_did() -> None:
    objects = render(TrainJobBuilder.make().trainer(numNodes=2), RuntimeBuilder.make().ml_policy(num_nodes=2, torch={}))
    jobset = jobset_of(objects)
    assert env_of(container_of(jobset, c.NODE))["PET_NNODES"] == "2"
    assert not any(k.startswith("PET_RDZV") or k == "PET_MAX_RESTARTS" for k in env_of(container_of(jobset, c.NODE)))
    assert c.ELASTIC_ANNOTATION not in (jobset["metadata"].get("annotations") or {})
    assert by_kind(objects, "Service") == []


@dataclass(frozen=True)
class Admission:
    job: TrainJobBuilder
    runtime: RuntimeBuilder
    want: list[str]


REF = "spec.runtimeRef"

ADMISSIONS = [
    pytest.param(
        Admission(TrainJobBuilder.make().trainer(numNodes=2), runtime(minNodes=1, maxNodes=2), []),
        id="numNodes within the bounds is admitted",
    ),
    pytest.param(
        Admission(
            TrainJobBuilder.make().trainer(numNodes=3),
            runtime(minNodes=1, maxNodes=2),
            ["spec.trainer.numNodes: Invalid value: 3: must be between elasticPolicy minNodes (1) and maxNodes (2)"],
        ),
        id="numNodes above maxNodes is refused",
    ),
    pytest.param(
        Admission(
            TrainJobBuilder.make(),
            runtime(minNodes=3, maxNodes=4),
            [f"{REF}: Invalid value: 2: must be between elasticPolicy minNodes (3) and maxNodes (4)"],
        ),
        id="the runtime's numNodes below minNodes is refused, naming the runtimeRef",
    ),
    pytest.param(
        Admission(
            TrainJobBuilder.make().trainer(numNodes=2),
            runtime(minNodes=1, maxNodes=100_001),
            [
                f'{REF}: Invalid value: "test-runtime": elasticPolicy maxNodes must be no more than 100000 (an '
                "Indexed Job's completions limit), got 100001"
            ],
        ),
        id="maxNodes over the Indexed Job limit is refused",
    ),
    pytest.param(
        Admission(
            TrainJobBuilder.make().trainer(numNodes=2),
            runtime(metrics=[{"type": "Resource", "resource": {"name": "cpu"}}]),
            [
                f'{REF}: Invalid value: "test-runtime": elasticPolicy metrics are not supported: no autoscaler acts '
                "on them; leave metrics empty (the operator resizes on lost and returning capacity and on numNodes "
                "edits)"
            ],
        ),
        id="metrics are refused rather than ignored",
    ),
    pytest.param(
        Admission(
            TrainJobBuilder.make().trainer(numNodes=2, env=[{"name": "PET_RDZV_ENDPOINT", "value": "x:1"}]),
            runtime(),
            [
                'spec.trainer.env: Invalid value: [{"name":"PET_RDZV_ENDPOINT","value":"x:1"}]: must not have '
                "reserved envs, invalid envs configured: [PET_RDZV_ENDPOINT]"
            ],
        ),
        id="the rendezvous env is reserved for an elastic TrainJob",
    ),
    pytest.param(
        Admission(
            TrainJobBuilder.make().trainer(numNodes=2, env=[{"name": "PET_RDZV_CONF", "value": "is_host=false"}]),
            runtime(),
            [
                'spec.trainer.env: Invalid value: [{"name":"PET_RDZV_CONF","value":"is_host=false"}]: must not have '
                "reserved envs, invalid envs configured: [PET_RDZV_CONF]"
            ],
        ),
        id="so are its rendezvous options (the runtime's env carries them, the operator adds is_host)",
    ),
    pytest.param(
        Admission(
            TrainJobBuilder.make().trainer(numNodes=2, env=[{"name": "PET_RDZV_ENDPOINT", "value": "x:1"}]),
            RuntimeBuilder.make().ml_policy(num_nodes=2, torch={}),
            [],
        ),
        id="and free for any other torch TrainJob, as upstream",
    ),
]


@pytest.mark.parametrize("case", ADMISSIONS)
def test_elastic_admission(case: Admission) -> None:
    source = RuntimeSource.of(case.runtime.obj())
    validation = admit_trainjob(FRAMEWORK, None, case.job.obj(), lambda kind, ns, name: source)
    assert [str(e) for e in validation.errors] == case.want


def test_a_runtime_with_maxnodes_below_minnodes_is_refused_by_the_crds_rule() -> None:
    _, validation = check_runtime(runtime(minNodes=3, maxNodes=2).raw())
    assert [str(e) for e in validation.errors] == [
        "spec.mlPolicy.torch.elasticPolicy: Invalid value: maxNodes must be greater than or equal to minNodes"
    ]


def test_elastic_policy_exists_only_under_torch_so_never_with_mpi() -> None:
    raw = RuntimeBuilder.make().ml_policy(num_nodes=2, mpi={"elasticPolicy": {"minNodes": 1}}).raw()
    obj, validation = check_runtime(raw)
    assert validation.errors == () or all("elasticPolicy" not in str(e) for e in validation.errors)
    assert obj is not None and obj.spec.ml_policy is not None and obj.spec.ml_policy.mpi is not None
    assert "elasticPolicy" not in obj.spec.ml_policy.mpi.to_wire()  # pruned, as the API server prunes it


def test_the_trainjobs_elastic_policy_narrows_the_runtimes_field_by_field() -> None:
    job = TrainJobBuilder.make().trainer(numNodes=2, elasticPolicy={"maxNodes": 4})
    jobset = jobset_of(render(job, runtime(minNodes=2, maxNodes=8, maxRestarts=7)))
    env = env_of(container_of(jobset, c.NODE))
    assert (env["PET_NNODES"], env["PET_MAX_RESTARTS"]) == ("2:4", "7")


def test_a_trainjobs_elastic_policy_alone_makes_a_torch_trainjob_elastic() -> None:
    job = TrainJobBuilder.make().trainer(numNodes=2, elasticPolicy={"minNodes": 1, "maxNodes": 3})
    objects = render(job, RuntimeBuilder.make().ml_policy(num_nodes=2, torch={}))
    assert env_of(container_of(jobset_of(objects), c.NODE))["PET_NNODES"] == "1:3"
    assert [s["metadata"]["name"] for s in by_kind(objects, "Service")] == ["test-job-rdzv"]


def test_a_trainjobs_elastic_policy_with_another_framework_is_refused() -> None:
    source = RuntimeSource.of(RuntimeBuilder.make().ml_policy(num_nodes=2, jax={}).obj())
    job = TrainJobBuilder.make().trainer(numNodes=2, elasticPolicy={"maxNodes": 3})
    validation = admit_trainjob(FRAMEWORK, None, job.obj(), lambda kind, ns, name: source)
    assert [str(e) for e in validation.errors] == [
        'spec.trainer.elasticPolicy: Invalid value: {"maxNodes":3}: must be used with a torch runtime '
        "(mlPolicy.torch): elastic training needs torchrun"
    ]


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        pytest.param(
            {"elasticPolicy": {"maxNodes": 4}},
            {"numNodes": 3, "elasticPolicy": {"maxNodes": 4}},
            [],
            id="an elastic trainer's numNodes may change while it runs",
        ),
        pytest.param(
            {},
            {"numNodes": 3},
            ["spec.trainer: Invalid value: field is immutable"],
            id="any other running trainer's numNodes is immutable, as upstream",
        ),
        pytest.param(
            {"elasticPolicy": {}},
            {"numNodes": 3, "elasticPolicy": {}, "image": "other"},
            ["spec.trainer: Invalid value: field is immutable"],
            id="only numNodes",
        ),
    ],
)
def test_the_crd_lets_only_an_elastic_trainer_resize_while_running(
    old: dict[str, Any], new: dict[str, Any], want: list[str]
) -> None:
    before = TrainJobBuilder.make().trainer(**{"numNodes": 2, **old}).raw()
    after = TrainJobBuilder.make().trainer(**{"numNodes": 2, **new}).raw()
    _, validation = check_trainjob(after, before)
    assert [str(e) for e in validation.errors] == want


def test_a_running_elastic_trainjobs_new_numnodes_is_admitted_within_the_bounds_only() -> None:
    source = RuntimeSource.of(runtime(minNodes=1, maxNodes=3).obj())
    old = TrainJobBuilder.make().trainer(numNodes=2).obj()
    for nodes, want in (
        (3, []),
        (4, ["spec.trainer.numNodes: Invalid value: 4: must be between elasticPolicy minNodes (1) and maxNodes (3)"]),
    ):
        new = TrainJobBuilder.make().trainer(numNodes=nodes).obj()
        validation = admit_trainjob(FRAMEWORK, old, new, lambda kind, ns, name: source)
        assert [str(e) for e in validation.errors] == want
