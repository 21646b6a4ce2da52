"""The admission webhooks' own checks, beyond the CRD (docs/upstream-behaviour.md#webhooks): the TrainJob's runtime
(kind, existence, deprecation) and every plugin's CustomValidation; the runtimes' ancestor jobs."""

from collections.abc import Callable

from ...api import constants as c
from ...api.runtime import ClusterTrainingRuntime, TrainingRuntime
from ...api.trainjob import TrainJob
from .. import names
from ..errors import FieldError, Validation, invalid, plain
from ..info import RuntimeInfo, RuntimeSource
from ..limits import CONFIGMAP_DATA_LIMIT
from ..observed import NOTHING, Observed
from ..pipeline import Framework
from .cel import replicated_job_name_errors

RuntimeLookup = Callable[[str, str, str], RuntimeSource | None]
"""(kind, namespace, name) → the runtime, or None when it does not exist."""


def admit_trainjob(
    framework: Framework,
    old: TrainJob | None,
    new: TrainJob,
    lookup: RuntimeLookup,
    observed: Observed = NOTHING,
    info: RuntimeInfo | None = None,
) -> Validation:
    """The TrainJob validating webhook (docs/upstream-behaviour.md#webhooks): runtime kind and existence,
    deprecation, plugin checks (`info`: as for `Framework.validate`, made from the runtime `lookup` finds)."""
    ref = new.spec.runtime_ref
    if ref.api_group != c.GROUP or ref.kind not in c.RUNTIME_KINDS:
        return Validation((plain(f"unsupported runtime: {ref.kind}.{ref.api_group}"),))
    runtime = lookup(ref.kind, new.namespace, ref.name)
    if runtime is None:
        if ref.kind == c.TRAINING_RUNTIME_KIND:
            # controller-runtime's cached client names the Kind in its NotFound error, not the resource.
            detail = (
                f'TrainingRuntime.trainer.kubeflow.org "{ref.name}" not found: specified trainingRuntime '
                "must be created before the TrainJob is created"
            )
            return Validation((invalid("spec.runtimeRef", ref.to_wire(), detail),))
        detail = (
            f'ClusterTrainingRuntime.trainer.kubeflow.org "{ref.name}" not found: specified '
            "clusterTrainingRuntime must be created before the TrainJob is created"
        )
        return Validation((invalid("spec.RuntimeRef", ref.to_wire(), detail),))
    warnings: tuple[str, ...] = ()
    if runtime.kind == c.CLUSTER_TRAINING_RUNTIME_KIND and runtime.deprecated:
        warnings = (
            f'Referenced ClusterTrainingRuntime "{runtime.name}" is deprecated and will be removed in a '
            f"future release of Kubeflow Trainer. See runtime deprecation policy: "
            f"{c.RUNTIME_DEPRECATION_POLICY_URL}",
        )
    snapshot = len(runtime.snapshot_yaml.encode())  # made once per runtime version, kept for the build
    if snapshot > CONFIGMAP_DATA_LIMIT:
        detail = (
            f"the runtime is too large to snapshot: the ConfigMap {new.name}-runtime-snapshot would be {snapshot} "
            f"bytes, over the API's limit of {CONFIGMAP_DATA_LIMIT} bytes"
        )
        return Validation((invalid("spec.runtimeRef", ref.to_wire(), detail),), warnings)
    trainer = new.spec.trainer
    if trainer is not None and trainer.elastic_policy is not None:
        policy = runtime.spec.ml_policy
        if policy is None or policy.torch is None:
            detail = "must be used with a torch runtime (mlPolicy.torch): elastic training needs torchrun"
            return Validation(
                (invalid("spec.trainer.elasticPolicy", trainer.elastic_policy.to_wire(), detail),), warnings
            )
    return Validation(warnings=warnings) + framework.validate(old, new, runtime, observed, info)


def run_policy_errors(runtime: TrainingRuntime | ClusterTrainingRuntime) -> list[FieldError]:
    """With a `runPolicy`, cleanup belongs to the TrainJob (upstream T#4052): the JobSet template must not carry its
    own TTL, which would delete the JobSet under a TrainJob that is kept."""
    policy, template = runtime.spec.run_policy, runtime.spec.template.spec
    if policy is None or template.ttl_seconds_after_finished is None:
        return []
    return [
        invalid(
            "spec.template.spec.ttlSecondsAfterFinished",
            template.ttl_seconds_after_finished,
            "must not be set when spec.runPolicy is set: use spec.runPolicy.ttlSecondsAfterFinished, which "
            "deletes the TrainJob with its JobSet",
        )
    ]


def admit_runtime(runtime: TrainingRuntime | ClusterTrainingRuntime) -> Validation:
    """The runtime validating webhooks (docs/upstream-behaviour.md#webhooks): ancestor jobs have one replica and the
    required container."""
    replicated_jobs = runtime.spec.template.spec.replicated_jobs
    # The CRD carries the same rule; the webhook repeats it for runtimes stored before v2.4's CRD was installed.
    errors: list[FieldError] = replicated_job_name_errors([(i, rj.name) for i, rj in enumerate(replicated_jobs)])
    for i, rjob in enumerate(replicated_jobs):
        labels = rjob.template.metadata.labels if rjob.template.metadata is not None else None
        ancestor = (labels or {}).get(c.ANCESTOR_LABEL)
        if ancestor not in c.ANCESTOR_CONTAINERS:
            continue
        path = f"spec.template.spec.replicatedJobs[{i}]"
        if (rjob.replicas if rjob.replicas is not None else 1) != 1:
            errors.append(invalid(f"{path}.replicas", rjob.replicas, "always must be 1"))
        pod = rjob.template.spec.template.spec
        containers = [ct.to_wire() for ct in pod.containers] if pod is not None else []
        if c.ANCESTOR_CONTAINERS[ancestor] not in [ct["name"] for ct in containers]:
            errors.append(
                invalid(
                    f"{path}.template.spec.template.spec.containers",
                    [names.go_container(ct) for ct in containers],
                    f"must contain the required container for the ancestor: {ancestor}",
                )
            )
    errors += run_policy_errors(runtime)
    warnings: tuple[str, ...] = ()
    if (
        runtime.kind == c.CLUSTER_TRAINING_RUNTIME_KIND
        and (runtime.metadata.labels or {}).get(c.SUPPORT_LABEL) == c.SUPPORT_DEPRECATED
    ):
        warnings = (
            f'ClusterTrainingRuntime "{runtime.metadata.name}" is deprecated and will be removed in a '
            f"future release of Kubeflow Trainer. See runtime deprecation policy: "
            f"{c.RUNTIME_DEPRECATION_POLICY_URL}",
        )
    return Validation(tuple(errors), warnings)
