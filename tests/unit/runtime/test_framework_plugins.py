"""Plugins own their reads and their claims: who configures the trainer (`ClaimsTrainer`, first claim in the
registry's order wins), what a plugin needs read (`DeclaresReads`, performed by the shell), key material injected
(`Observed.keys`), the JobSet's rebuild rule reached through the framework, Flux's scripts as package data. A toy
framework added in this file alone (its `mlPolicy.toy` source, the CRD schema and one-of CEL rule generated from
it, its claim, its build and its validation) proves a new framework changes no other file."""

import asyncio
import base64
import contextlib
import datetime as dt
import io
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

import pytest
import yaml
from pydantic import BaseModel

from builders import FixedKeys, RuntimeBuilder, TrainJobBuilder, by_kind, container, container_of, jobset_of
from builders import replicated_job as rjob
from fake_client import FakeClient
from trainjob_dev import crdgen
from trainjob_operator import cli
from trainjob_operator.api import constants as c
from trainjob_operator.api.base import ApiModel
from trainjob_operator.api.core import EnvVar
from trainjob_operator.api.runtime import ClusterTrainingRuntime, TrainingRuntime
from trainjob_operator.api.trainjob import TrainJob
from trainjob_operator.controller import reads
from trainjob_operator.controller.reconciler import Reconciler
from trainjob_operator.controller.runtimes import RuntimeResolver
from trainjob_operator.controller.store import Store
from trainjob_operator.controller.webhooks import Webhooks
from trainjob_operator.k8s.client import ApiError
from trainjob_operator.metrics import Metrics
from trainjob_operator.offline import commands
from trainjob_operator.runtime.errors import BuildError, Validation, forbidden
from trainjob_operator.runtime.framework import ClaimsTrainer, CustomValidation, EnforceMLPolicy
from trainjob_operator.runtime.info import RuntimeInfo, RuntimeSource, new_runtime_info
from trainjob_operator.runtime.observed import ObjectRef, Observed, Read, SSHKeyPair
from trainjob_operator.runtime.pipeline import Framework
from trainjob_operator.runtime.plugins.flux import plugin as flux
from trainjob_operator.runtime.plugins.volcano import PRIORITY_CLASSES
from trainjob_operator.runtime.registry import ORDER, PLUGINS, Factory
from trainjob_operator.runtime.snapshot import build_snapshot
from trainjob_operator.runtime.upsert import upsert_env
from trainjob_operator.runtime.validation.cel import ml_policy_cel
from trainjob_operator.runtime.validation.schema import CEL_SKIPPED

FRAMEWORK = Framework.from_registry()
TRAINER = [rjob(c.NODE, c.ANCESTOR_TRAINER, [container(c.NODE, "img")])]
SHIPPED_RUNTIME = (TrainingRuntime, c.TRAINING_RUNTIME_KIND)


def runtime(**policy: Any) -> RuntimeBuilder:
    return RuntimeBuilder.make().jobs(TRAINER).ml_policy(num_nodes=1, **policy)


def labelled(framework: str, **policy: Any) -> RuntimeBuilder:
    return runtime(**policy).set("metadata.labels", {c.FRAMEWORK_LABEL: framework})


# --- who claims the trainer ---------------------------------------------------------------------------------------

CLAIMS = {
    "a runtime with no framework source is nobody's: PlainML sets count and env": (runtime(), None),
    "mlPolicy.torch claims it for Torch": (runtime(torch={}), "Torch"),
    "mlPolicy.mpi claims it for MPI": (runtime(mpi={}), "MPI"),
    "mlPolicy.jax claims it for JAX": (runtime(jax={}), "JAX"),
    "mlPolicy.xgboost claims it for XGBoost": (runtime(xgboost={}), "XGBoost"),
    "mlPolicy.flux claims it for Flux": (runtime(flux={}), "Flux"),
    "the tensorflow label claims it for TensorFlow": (labelled("tensorflow"), "TensorFlow"),
    "a framework source comes before the tensorflow label": (labelled("tensorflow", torch={}), "Torch"),
    "another framework label claims nothing": (labelled("pytorch"), None),
}


@pytest.mark.parametrize("case", CLAIMS.values(), ids=CLAIMS.keys())
def test_the_first_claim_in_registry_order_owns_the_trainer(case: tuple[RuntimeBuilder, str | None]) -> None:
    built, owner = case
    job = TrainJobBuilder.make().obj()
    info = FRAMEWORK.claim_trainer(new_runtime_info(job, built.source()))
    assert info.trainer_owner == owner


def test_plugin_order_is_one_list_and_the_registry_follows_it() -> None:
    assert list(PLUGINS) == [plugin.name for plugin in ORDER]
    assert [p.name for p in FRAMEWORK.claimants] == ["Torch", "MPI", "JAX", "XGBoost", "Flux", "TensorFlow"]


# --- a toy framework, added here alone ----------------------------------------------------------------------------


class ToyMLPolicySource(ApiModel):
    """Toy training: one process per node."""

    world: int | None = None
    """How many processes in all (default: the trainer count)."""


class Toy(ClaimsTrainer, EnforceMLPolicy, CustomValidation):
    """A framework with its own `mlPolicy.toy`: TOY_WORLD on the trainer; TOY_WORLD is the toy's to set."""

    name: ClassVar[str] = "Toy"
    policy_source: ClassVar[tuple[str, type[ApiModel]] | None] = ("toy", ToyMLPolicySource)

    def claims_trainer(self, info: RuntimeInfo) -> bool:
        return toy_policy(info) is not None

    def enforce_ml_policy(self, info: RuntimeInfo, job: TrainJob) -> None:
        policy = toy_policy(info)
        if info.trainer_owner != self.name or policy is None:
            return
        trainer = info.ancestor(c.ANCESTOR_TRAINER)
        node = trainer.container(c.NODE) if trainer is not None else None
        if trainer is not None and node is not None:
            world = policy.world if policy.world is not None else trainer.count
            upsert_env(node, [EnvVar(name="TOY_WORLD", value=str(world))])

    def validate(self, info: RuntimeInfo, old: TrainJob | None, new: TrainJob, observed: Observed) -> Validation:
        if info.trainer_owner != self.name or new.spec.trainer is None:
            return Validation()
        return Validation(
            tuple(
                forbidden(f"spec.trainer.env[{i}]", "TOY_WORLD is reserved for the toy runtime")
                for i, env in enumerate(new.spec.trainer.env or [])
                if env.name == "TOY_WORLD"
            )
        )


def toy_policy(info: RuntimeInfo) -> ToyMLPolicySource | None:
    """The runtime's `mlPolicy.toy` (a runtime parsed with the registry's models has the field)."""
    source = getattr(info.ml_policy, "toy", None)
    return source if isinstance(source, ToyMLPolicySource) else None


# Registered where a framework goes: among the frameworks, before TensorFlow.
TOY_ORDER: dict[str, Factory] = {}
for plugin in ORDER:
    if plugin.name == "TensorFlow":
        TOY_ORDER[Toy.name] = Toy
    TOY_ORDER[plugin.name] = PLUGINS[plugin.name]
WITH_TOY = Framework.from_registry(TOY_ORDER)
TOY_RUNTIME_MODEL, TOY_CLUSTER_RUNTIME_MODEL = WITH_TOY.runtime_models()
MINE = {"name": "MINE", "value": "1"}
TOY_JOB = TrainJobBuilder.make().trainer(numNodes=3, env=[MINE])


def toy_source(**toy: Any) -> RuntimeSource:
    """A runtime with `mlPolicy.toy`, parsed with the models generated for the toy's registry."""
    return RuntimeSource.of(TOY_RUNTIME_MODEL.model_validate(runtime(toy=toy).raw()))


def test_the_toy_brings_its_ml_policy_field_and_one_of_rule_into_the_generated_crd() -> None:
    def ml_policy(model: type[BaseModel], kind: str) -> dict[str, Any]:
        crd = crdgen.crd(crdgen.CrdKind(model, kind, c.PLURALS[kind], "Namespaced"))
        schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        ml: dict[str, Any] = schema["properties"]["spec"]["properties"]["mlPolicy"]
        return ml

    toy, shipped = ml_policy(TOY_RUNTIME_MODEL, c.TRAINING_RUNTIME_KIND), ml_policy(*SHIPPED_RUNTIME)
    assert toy["properties"]["toy"] == {
        "description": "Toy training: one process per node.",
        "properties": {
            "world": {
                "description": "How many processes in all (default: the trainer count).",
                "format": "int32",
                "type": "integer",
            }
        },
        "type": "object",
    }
    assert toy["x-kubernetes-validations"] == [
        {
            "rule": "[has(self.torch), has(self.mpi), has(self.jax), has(self.xgboost), has(self.flux),has(self.toy)]"
            ".filter(x, x).size() <= 1",
            "message": "Only one of the policy can be configured",
        }
    ]
    # Nothing else of the schema changes, and the shipped registry generates the shipped CRD.
    assert {k: v for k, v in toy["properties"].items() if k != "toy"} == shipped["properties"]
    assert Framework.from_registry().runtime_models() == (TrainingRuntime, ClusterTrainingRuntime)


def test_the_cel_twin_of_the_one_of_rule_counts_the_toys_source() -> None:
    both = runtime(toy={}, torch={}).raw()
    assert [str(e) for e in ml_policy_cel(both, WITH_TOY.one_ml_policy_sources())] == [
        "spec.mlPolicy: Invalid value: Only one of the policy can be configured"
    ]
    assert ml_policy_cel(both) == []  # the shipped twin knows no toy


def test_the_toy_framework_claims_the_trainer_and_plainml_steps_aside() -> None:
    def trainer(framework: Framework, source: RuntimeSource) -> tuple[list[dict[str, Any]], int]:
        jobset = jobset_of(framework.desired_objects(TOY_JOB.obj(), source, Observed()))
        return container_of(jobset, c.NODE)["env"], jobset["spec"]["replicatedJobs"][0]["template"]["spec"][
            "parallelism"
        ]

    # Claimed: the toy's env first, and the count stays the runtime's (PlainML would have set numNodes, 3).
    assert trainer(WITH_TOY, toy_source()) == ([{"name": "TOY_WORLD", "value": "1"}, MINE], 1)
    assert trainer(WITH_TOY, toy_source(world=8)) == ([{"name": "TOY_WORLD", "value": "8"}, MINE], 1)
    # The shipped models drop the unknown source: nobody claims, PlainML sets the count.
    assert trainer(FRAMEWORK, runtime(toy={}).source()) == ([MINE], 3)


def test_without_its_source_the_toy_claims_nothing_and_the_build_is_the_shipped_one() -> None:
    plain = runtime().source()
    assert WITH_TOY.desired_objects(TOY_JOB.obj(), plain, Observed()) == FRAMEWORK.desired_objects(
        TOY_JOB.obj(), plain, Observed()
    )


def test_the_toy_framework_validates_its_reserved_env() -> None:
    job = TOY_JOB.trainer(env=[{"name": "TOY_WORLD", "value": "9"}]).obj()
    result = WITH_TOY.validate(None, job, toy_source())
    assert [str(e) for e in result.errors] == [
        "spec.trainer.env[0]: Forbidden: TOY_WORLD is reserved for the toy runtime"
    ]
    assert FRAMEWORK.validate(None, job, runtime(toy={}).source()).errors == ()


# --- the toy through the production parse paths ------------------------------------------------------------------
# Every place that parses a runtime takes the framework's models (`Framework.runtime_models`), so the toy's
# `mlPolicy.toy` reaches the toy plugin through each of them; with the shipped registry the same input loses it.

TOY_RUNTIME = runtime(toy={"world": 8})
TOY_ENV = [{"name": "TOY_WORLD", "value": "8"}, MINE]
NOW = dt.datetime(2026, 11, 25, 12, 0, tzinfo=dt.UTC)
JOB_KEY = ("default", "test-job")


def reconciled_env(framework: Framework, *held: dict[str, Any]) -> list[dict[str, Any]]:
    """The trainer env of the JobSet the reconciler (built on `framework`, as the composition root builds it)
    applies for TOY_JOB, the fake API holding `held` and the watch cache nothing but the TrainJob (the runtime is
    read through the resolver)."""
    job = TOY_JOB.raw()
    client, store = FakeClient().put(job, *held), Store()
    store.trainjobs.put(job)
    result = asyncio.run(Reconciler(client, store, framework, Metrics(), clock=lambda: NOW).reconcile(JOB_KEY))
    assert not result.error
    jobset = client.stored(c.JOBSET_API_VERSION, c.JOBSET_KIND, "test-job", "default")
    assert jobset is not None, client.calls
    env: list[dict[str, Any]] = container_of(jobset, c.NODE)["env"]
    return env


def from_the_live_runtime(framework: Framework, tmp_path: Path) -> list[dict[str, Any]]:
    return reconciled_env(framework, TOY_RUNTIME.raw())


def from_the_snapshot(framework: Framework, tmp_path: Path) -> list[dict[str, Any]]:
    """The runtime is gone; its snapshot (taken with the toy's models) is what the reconciler reads back."""
    return reconciled_env(framework, build_snapshot(TOY_JOB.obj(), toy_source(world=8)))


class Said(NamedTuple):
    code: int
    stdout: str
    errors: list[str]


def offline(command: str, framework: Framework, tmp_path: Path, job: TrainJobBuilder, rt: RuntimeBuilder) -> Said:
    """`trainjob-operator COMMAND -f job.yaml -r runtime.yaml` with `framework` (what `cli.py` builds from the
    registry): its exit code, stdout and the error lines of stderr (without the per-object headers)."""
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(job.raw()))
    (tmp_path / "runtime.yaml").write_text(yaml.safe_dump(rt.raw()))
    args = [command, "-f", str(tmp_path / "job.yaml"), "-r", str(tmp_path / "runtime.yaml"), "--workers", "1"]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = commands.run(cli.parser().parse_args(args), framework)
    lines = [line for line in err.getvalue().splitlines() if not line.startswith(("invalid: ", "valid: "))]
    return Said(code, out.getvalue(), lines)


def rendered_offline(framework: Framework, tmp_path: Path) -> list[dict[str, Any]] | list[str]:
    """`render`'s JobSet's trainer env, or its errors when it renders nothing."""
    said = offline("render", framework, tmp_path, TOY_JOB, TOY_RUNTIME)
    if said.code != 0:
        return said.errors
    env: list[dict[str, Any]] = container_of(jobset_of(list(yaml.safe_load_all(said.stdout))), c.NODE)["env"]
    return env


UNKNOWN_TOY = (
    'TrainingRuntime in version "v1alpha1" cannot be handled as a TrainingRuntime: strict decoding error: '
    'unknown field "spec.mlPolicy.toy"'
)
REFUSED_RUNTIME = (
    'spec.runtimeRef: Invalid value: {"name":"test-runtime","apiGroup":"trainer.kubeflow.org",'
    '"kind":"TrainingRuntime"}: TrainingRuntime default/test-runtime is invalid (its errors are listed above): the '
    "API server would not have stored it"
)
"""What `validate`/`render` say with the shipped registry, whose CRDs do not know the toy's source."""
CEL_SKIPPED_LINE = str(CEL_SKIPPED)

Path_ = Callable[[Framework, Path], Any]
BUILT_FROM: dict[str, tuple[Path_, Any]] = {
    # The shipped models drop the source: nobody claims the trainer, no TOY_WORLD.
    "the reconciler resolves the live runtime through the API (cache miss) and builds from it": (
        from_the_live_runtime,
        [MINE],
    ),
    "the reconciler reads the runtime back from its snapshot ConfigMap and builds from it": (from_the_snapshot, [MINE]),
    # The shipped CRD's schema refuses the unknown field, as the API server would.
    "the offline CLI's render parses the -r file and builds from it": (
        rendered_offline,
        [UNKNOWN_TOY, REFUSED_RUNTIME],
    ),
}


@pytest.mark.parametrize("case", BUILT_FROM.values(), ids=BUILT_FROM.keys())
def test_the_toys_source_survives_each_production_parse_and_reaches_the_plugin(
    case: tuple[Path_, Any], tmp_path: Path
) -> None:
    path, shipped = case
    assert path(WITH_TOY, tmp_path) == TOY_ENV
    assert path(FRAMEWORK, tmp_path) == shipped


RESERVED_JOB = TOY_JOB.trainer(env=[{"name": "TOY_WORLD", "value": "9"}])
RESERVED = "spec.trainer.env[0]: Forbidden: TOY_WORLD is reserved for the toy runtime"
BAD_WORLD = runtime(toy={"world": "eight"})
BAD_WORLD_ERROR = 'spec.mlPolicy.toy.world: Invalid value: "string": spec.mlPolicy.toy.world in body must be of type integer: "string"'


def webhooks(framework: Framework, *cached: dict[str, Any]) -> Webhooks:
    """The webhooks as the manager wires them: one framework, its runtime models in the shared resolver."""
    store = Store()
    for raw in cached:
        store.runtimes.put(raw)
    client = FakeClient()
    return Webhooks(framework, RuntimeResolver(client, store, framework.runtime_models()), store, client, lambda: NOW)


def webhook_on_trainjob(framework: Framework, tmp_path: Path) -> list[str]:
    hooks = webhooks(framework, TOY_RUNTIME.raw())
    verdict = asyncio.run(hooks.validate_trainjob({"operation": "CREATE", "object": RESERVED_JOB.raw()}))
    return [verdict.message] if verdict.message else []


def webhook_on_runtime(framework: Framework, tmp_path: Path) -> list[str]:
    verdict = asyncio.run(
        webhooks(framework).validate_training_runtime({"operation": "CREATE", "object": BAD_WORLD.raw()})
    )
    return [verdict.message] if verdict.message else []


def validate_on_trainjob(framework: Framework, tmp_path: Path) -> list[str]:
    return offline("validate", framework, tmp_path, RESERVED_JOB, TOY_RUNTIME).errors


def validate_on_runtime(framework: Framework, tmp_path: Path) -> list[str]:
    return offline("validate", framework, tmp_path, TOY_JOB, BAD_WORLD).errors


ADMITTED_BY: dict[str, tuple[Path_, list[str], list[str]]] = {
    # The webhook's shipped models drop the source (the API server's CRD would have pruned it): nothing to refuse.
    "the webhook refuses a TrainJob setting the toy's reserved env (its runtime read through the resolver)": (
        webhook_on_trainjob,
        [RESERVED],
        [],
    ),
    "the webhook refuses a runtime whose mlPolicy.toy does not fit the toy's model": (
        webhook_on_runtime,
        [BAD_WORLD_ERROR],
        [],
    ),
    # validate prunes by the CRD first: the shipped one refuses the unknown field, as the API server would.
    "validate refuses a TrainJob setting the toy's reserved env": (
        validate_on_trainjob,
        [RESERVED],
        [UNKNOWN_TOY, REFUSED_RUNTIME],
    ),
    "validate refuses a runtime whose mlPolicy.toy does not fit the toy's model (and says its TrainJob cannot use it)": (
        validate_on_runtime,
        [BAD_WORLD_ERROR, CEL_SKIPPED_LINE, REFUSED_RUNTIME],
        [UNKNOWN_TOY, REFUSED_RUNTIME],
    ),
}


@pytest.mark.parametrize("case", ADMITTED_BY.values(), ids=ADMITTED_BY.keys())
def test_the_toys_source_reaches_admission_in_the_webhook_and_validate(
    case: tuple[Path_, list[str], list[str]], tmp_path: Path
) -> None:
    check, with_toy, shipped = case
    assert check(WITH_TOY, tmp_path) == with_toy
    assert check(FRAMEWORK, tmp_path) == shipped


# --- declared reads -----------------------------------------------------------------------------------------------


def test_the_volcano_plugin_declares_the_priority_class_read_for_volcano_runtimes_only() -> None:
    job = TrainJobBuilder.make().obj()
    assert FRAMEWORK.reads(job, RuntimeBuilder.make().volcano().source()) == [PRIORITY_CLASSES]
    assert FRAMEWORK.reads(job, RuntimeBuilder.make().coscheduling().source()) == []
    assert FRAMEWORK.reads(job, None) == []


def test_the_shell_performs_each_declared_read_and_a_refused_one_is_unknown() -> None:
    low = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "low"}}
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "ns"}}
    client = FakeClient().put(low, cm)
    for kind in ("Pod", "Secret"):
        client.fail("list", ApiError(403, "Forbidden", f"{kind} is forbidden"), kind=kind)
    by_name, missing = Read("v1", "ConfigMap", "cm", "ns"), Read("v1", "ConfigMap", "gone", "ns")
    selected, refused = Read("v1", "Pod", namespace="ns", label_selector="a=b"), Read("v1", "Secret")
    got = asyncio.run(reads.perform(client, [PRIORITY_CLASSES, by_name, missing, selected, refused]))
    assert got == {
        PRIORITY_CLASSES: (client.stored("scheduling.k8s.io/v1", "PriorityClass", "low"),),
        by_name: (client.stored("v1", "ConfigMap", "cm", "ns"),),
        missing: (),
        selected: None,
        refused: None,
    }
    assert ("list", "Pod", "ns", "a=b") in client.calls


# --- key material -------------------------------------------------------------------------------------------------

KEY = SSHKeyPair(private_pem=b"fixed private", public_openssh=b"fixed public\n")
MPI_RUNTIME = runtime(mpi={"numProcPerNode": 1})


class NoKeys:
    def ssh_key(self) -> SSHKeyPair:
        raise AssertionError("a key was drawn for a Secret that exists")

    def curve_secret(self) -> bytes:
        raise AssertionError("a key was drawn for a Secret that exists")


def test_the_mpi_secret_carries_the_injected_key() -> None:
    objects = FRAMEWORK.desired_objects(
        TrainJobBuilder.make().obj(), MPI_RUNTIME.source(), Observed(keys=FixedKeys(KEY))
    )
    (secret,) = by_kind(objects, "Secret")
    assert secret["data"] == {
        c.MPI_SSH_PRIVATE_KEY: base64.b64encode(b"fixed private").decode(),
        c.MPI_SSH_PUBLIC_KEY: base64.b64encode(b"fixed public\n").decode(),
    }


def test_no_key_is_drawn_for_an_existing_secret_and_none_is_made_up_without_a_source() -> None:
    exists = frozenset({ObjectRef("v1", "Secret", "test-job-mpi-ssh-auth")})
    objects = FRAMEWORK.desired_objects(
        TrainJobBuilder.make().obj(), MPI_RUNTIME.source(), Observed(existing=exists, keys=NoKeys())
    )
    assert by_kind(objects, "Secret") == []
    with pytest.raises(BuildError, match="no key source for the MPI SSH Secret"):
        FRAMEWORK.desired_objects(TrainJobBuilder.make().obj(), MPI_RUNTIME.source(), Observed())


# --- the JobSet's rebuild rule through the framework --------------------------------------------------------------

NEVER_RAN = {"spec": {"suspend": True}, "status": {}}


def test_the_plan_reaches_the_jobset_rebuild_rule_through_the_framework() -> None:
    assert FRAMEWORK.rebuildable(c.JOBSET_API_VERSION, c.JOBSET_KIND, NEVER_RAN)
    assert not FRAMEWORK.rebuildable(c.JOBSET_API_VERSION, c.JOBSET_KIND, {"spec": {"suspend": False}})
    assert not FRAMEWORK.rebuildable("v1", "ConfigMap", NEVER_RAN)
    without_jobset = Framework.from_registry({k: v for k, v in PLUGINS.items() if k != "JobSet"})
    assert not without_jobset.rebuildable(c.JOBSET_API_VERSION, c.JOBSET_KIND, NEVER_RAN)


# --- Flux's scripts are package data ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [flux.INIT_KEY, flux.ENTRYPOINT_KEY])
def test_flux_scripts_are_files_beside_the_plugin_and_every_placeholder_is_filled(name: str) -> None:
    template = flux.script(name)
    assert template.startswith("#!/bin/bash\n") and flux.PLACEHOLDER.search(template)
    job = TrainJobBuilder.make().trainer(numNodes=2, numProcPerNode=1).obj()
    objects = FRAMEWORK.desired_objects(job, runtime(flux={}).source(), Observed(keys=FixedKeys(KEY)))
    (config_map,) = [o for o in by_kind(objects, "ConfigMap") if o["metadata"]["name"] == "test-job-flux-entrypoint"]
    assert flux.PLACEHOLDER.search(config_map["data"][name]) is None
