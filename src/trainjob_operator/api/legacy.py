"""Older TrainJob shapes that still circulate in pages and notebooks, and their conversion to the served API.

Two families, found by `legacy_shape`:

- **proposal-era** (`kubeflow.org/v2alpha1`, the KEP-2170 drafts of 2024 and the first controller):
  `spec.trainingRuntimeRef` (later `runtimeRef`), `spec.datasetConfig`, `spec.modelConfig.input`/`.output`,
  `spec.podSpecOverrides`, `spec.labels`/`spec.annotations`, and on runtimes `spec.numNodes` with the JobSet spec
  inline;
- **early `trainer.kubeflow.org/v1alpha1`** (v2.0-v2.2): the same group as today with fields v2.3 no longer has
  (`datasetConfig`, `modelConfig`, `podSpecOverrides`, `podTemplateOverrides`, `labels`, `annotations`).

`convert` maps every field that has a home in `trainer.kubeflow.org/v1alpha1` (v2.3) and lists, by path, every
field it could not place, with the reason. It is pure: wire dicts in, wire dicts out, nothing validated (run
`validate` on the result).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from . import constants as c

PROPOSAL_API_VERSION = "kubeflow.org/v2alpha1"
PROPOSAL_GROUP = "kubeflow.org"
PROPOSAL_MANAGED_BY = "kubeflow.org/trainjob-controller"
# The runtime patch that carries converted labels, annotations and pod overrides.
CONVERT_MANAGER = "trainjob-operator/convert"
# TrainJob spec fields that v2.3 does not have but older shapes do.
OLD_TRAINJOB_FIELDS = (
    "trainingRuntimeRef",
    "numNodes",
    "datasetConfig",
    "modelConfig",
    "podSpecOverrides",
    "podTemplateOverrides",
    "labels",
    "annotations",
)
KINDS = (c.TRAINJOB_KIND, c.TRAINING_RUNTIME_KIND, c.CLUSTER_TRAINING_RUNTIME_KIND)
KEPT_METADATA = ("name", "generateName", "namespace", "labels", "annotations")
SERVER_METADATA = (
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
    "ownerReferences",
    "finalizers",
)
NO_FIELD = f"no such field in {c.API_VERSION}"
EMPTY_INITIALIZER = (
    "no storageUri to load the {what} from: no {what} initializer is written (an empty one would silently take the "
    "runtime's own {what})"
)
# Fields a PodSpecPatch (runtimePatches) may carry, as overrides named them.
POD_PATCH_FIELDS = (
    "serviceAccountName",
    "volumes",
    "imagePullSecrets",
    "securityContext",
    "nodeSelector",
    "affinity",
    "tolerations",
    "schedulingGates",
    "terminationGracePeriodSeconds",
)
CONTAINER_PATCH_FIELDS = ("name", "env", "volumeMounts", "securityContext")
JOBSET_SPEC_FIELDS = (
    "replicatedJobs",
    "network",
    "successPolicy",
    "failurePolicy",
    "startupPolicy",
    "coordinator",
    "ttlSecondsAfterFinished",
    "volumeClaimPolicies",
)


@dataclass(frozen=True)
class Dropped:
    """A field of the input that has no home in the output."""

    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


@dataclass
class Converted:
    obj: dict[str, Any]
    dropped: list[Dropped] = field(default_factory=list)


def legacy_shape(doc: dict[str, Any]) -> str | None:
    """What older shape `doc` has, in words (None: the current shape, or not one of our kinds)."""
    kind = doc.get("kind")
    if kind not in KINDS:
        return None
    api_version = doc.get("apiVersion")
    if api_version == PROPOSAL_API_VERSION:
        return (
            f"a proposal-era {kind} ({PROPOSAL_API_VERSION}: the KEP-2170 draft API, replaced by "
            f"{c.API_VERSION} in Kubeflow Trainer v2.0)"
        )
    spec = doc.get("spec")
    if api_version == c.API_VERSION and kind == c.TRAINJOB_KIND and isinstance(spec, dict):
        old = [f"spec.{name}" for name in OLD_TRAINJOB_FIELDS if name in spec]
        if old:
            return (
                f"a TrainJob in an older {c.API_VERSION} shape (fields removed before Kubeflow Trainer v2.3: "
                f"{', '.join(old)})"
            )
    return None


def convert(doc: dict[str, Any]) -> Converted:
    """The `trainer.kubeflow.org/v1alpha1` object for an older-shape TrainJob or (Cluster)TrainingRuntime."""
    if doc.get("kind") == c.TRAINJOB_KIND:
        return _Conversion(doc).trainjob()
    return _Conversion(doc).runtime()


def _api_group(value: Any) -> Any:
    return c.GROUP if value == PROPOSAL_GROUP else value


class _Conversion:
    """One conversion: pops what it maps from a copy of the input; whatever is left is reported."""

    def __init__(self, doc: dict[str, Any]) -> None:
        self.src = copy.deepcopy(doc)
        self.dropped: list[Dropped] = []
        meta = doc.get("metadata")
        self.namespace: Any = meta.get("namespace") if isinstance(meta, dict) else None

    def drop(self, path: str, reason: str) -> None:
        self.dropped.append(Dropped(path, reason))

    def leftovers(self, prefix: str, node: Any, reason: str = NO_FIELD) -> None:
        if isinstance(node, dict):
            for key in node:
                self.drop(f"{prefix}.{key}" if prefix else str(key), reason)

    def done(self, obj: dict[str, Any]) -> Converted:
        return Converted(obj, self.dropped)

    # --- shared pieces ---------------------------------------------------------------------------------------

    def head(self) -> dict[str, Any]:
        kind = self.src.pop("kind")
        self.src.pop("apiVersion", None)
        meta_src = self.src.pop("metadata", None) or {}
        metadata = {key: meta_src.pop(key) for key in KEPT_METADATA if key in meta_src}
        for key in SERVER_METADATA:
            if key in meta_src:
                meta_src.pop(key)
                self.drop(f"metadata.{key}", "set by the API server; left out so the object can be created")
        self.leftovers("metadata", meta_src)
        if "status" in self.src:
            self.src.pop("status")
            self.drop("status", "written by the operator")
        return {"apiVersion": c.API_VERSION, "kind": kind, "metadata": metadata}

    def secret_ref(self, path: str, ref: Any) -> dict[str, Any] | None:
        if not isinstance(ref, dict):
            return None
        ref = dict(ref)
        out = {"name": ref.pop("name")} if "name" in ref else None
        if "namespace" in ref and ref.pop("namespace") != self.namespace:
            self.drop(f"{path}.namespace", "the Secret must be in the TrainJob's namespace (secretRef has only a name)")
        self.leftovers(path, ref)
        return out

    def source(self, path: str, src: Any) -> dict[str, Any] | None:
        """datasetConfig / modelConfig.input → an InitializerSource (storageUri, env, secretRef)."""
        if not isinstance(src, dict):
            return None
        src = dict(src)
        out: dict[str, Any] = {}
        for key in ("storageUri", "env"):
            if key in src:
                out[key] = src.pop(key)
        config = src.get("config")
        if isinstance(config, str) and "://" in config:  # the pages' `config: hf://org/model`: where to load from
            src.pop("config")
            if out.setdefault("storageUri", config) != config:
                self.drop(
                    f"{path}.config",
                    f"conflicts with {path}.storageUri ({json.dumps(out['storageUri'])}), which is kept",
                )
        if "secretRef" in src:
            ref = self.secret_ref(f"{path}.secretRef", src.pop("secretRef"))
            if ref is not None:
                out["secretRef"] = ref
        self.leftovers(path, src, f"no such field in an initializer of {c.API_VERSION}")
        return out

    # --- TrainJob --------------------------------------------------------------------------------------------

    def trainjob(self) -> Converted:
        obj = self.head()
        spec_src = self.src.pop("spec", None) or {}
        self.leftovers("", self.src)
        spec: dict[str, Any] = {}
        ref = self.runtime_ref(spec_src)
        if ref is not None:  # without one, the caller names a runtime (`choose_runtime`)
            spec["runtimeRef"] = ref
        initializer = self.initializer(spec_src)
        if initializer:
            spec["initializer"] = initializer
        trainer = self.trainer(spec_src)
        if trainer:
            spec["trainer"] = trainer
        patches = self.patches(spec_src)
        if patches:
            spec["runtimePatches"] = patches
        for key in ("suspend", "activeDeadlineSeconds", "runtimePatches"):
            if key in spec_src:
                value = spec_src.pop(key)
                spec[key] = [*spec.get(key, []), *value] if key == "runtimePatches" else value
        if "managedBy" in spec_src:
            managed_by = spec_src.pop("managedBy")
            spec["managedBy"] = c.DEFAULT_MANAGED_BY if managed_by == PROPOSAL_MANAGED_BY else managed_by
        if "initializer" in spec_src:
            spec["initializer"] = {**spec_src.pop("initializer"), **spec.get("initializer", {})}
        self.leftovers("spec", spec_src)
        obj["spec"] = _ordered(
            spec,
            ("runtimeRef", "initializer", "trainer", "runtimePatches", "suspend", "activeDeadlineSeconds", "managedBy"),
        )
        return self.done(obj)

    def runtime_ref(self, spec: dict[str, Any]) -> dict[str, Any] | None:
        path = "spec.trainingRuntimeRef" if "trainingRuntimeRef" in spec else "spec.runtimeRef"
        src = spec.pop("trainingRuntimeRef", None) or spec.pop("runtimeRef", None)
        if not isinstance(src, dict):
            return None
        src = dict(src)
        ref: dict[str, Any] = {}
        if "name" in src:
            ref["name"] = src.pop("name")
        if "apiGroup" in src:
            ref["apiGroup"] = _api_group(src.pop("apiGroup"))
        if "kind" in src:
            ref["kind"] = src.pop("kind")
        if "namespace" in src:
            # The KEP: a reference with a namespace names a TrainingRuntime, without one a ClusterTrainingRuntime.
            namespace = src.pop("namespace")
            ref.setdefault("kind", c.TRAINING_RUNTIME_KIND)
            if namespace != self.namespace:
                self.drop(f"{path}.namespace", "a TrainingRuntime is looked up in the TrainJob's own namespace")
        if "version" in src:
            src.pop("version")
            self.drop(f"{path}.version", f"runtimes are served as {c.API_VERSION} only")
        self.leftovers(path, src)
        return ref

    def initializer(self, spec: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if "datasetConfig" in spec:
            dataset = self.source("spec.datasetConfig", spec.pop("datasetConfig"))
            if dataset:
                out["dataset"] = dataset
            elif dataset is not None:
                self.drop("spec.datasetConfig", EMPTY_INITIALIZER.format(what="dataset"))
        if "modelConfig" in spec:
            model_src = spec.pop("modelConfig")
            if isinstance(model_src, dict):
                model_src = dict(model_src)
                if "output" in model_src:
                    model_src.pop("output")
                    self.drop(
                        "spec.modelConfig.output",
                        f"model export has no field in {c.API_VERSION}: save the model from the training code",
                    )
                if "input" in model_src:
                    model = self.source("spec.modelConfig.input", model_src.pop("input"))
                else:  # the KEP's short form: storageUri/env/secretRef right under modelConfig
                    model = self.source(
                        "spec.modelConfig",
                        {k: model_src.pop(k) for k in ("storageUri", "env", "secretRef") if k in model_src},
                    )
                if model:
                    out["model"] = model
                elif model is not None:
                    self.drop("spec.modelConfig", EMPTY_INITIALIZER.format(what="model"))
                self.leftovers("spec.modelConfig", model_src)
        return out

    def trainer(self, spec: dict[str, Any]) -> dict[str, Any]:
        src = spec.pop("trainer", None)
        src = dict(src) if isinstance(src, dict) else {}
        out: dict[str, Any] = {}
        for key in ("image", "command", "args", "env", "numNodes", "resourcesPerNode"):
            if key in src:
                out[key] = src.pop(key)
        if isinstance(out.get("resourcesPerNode"), list):  # the first draft's []ResourceRequirements
            resources = out.pop("resourcesPerNode")
            if len(resources) == 1 and isinstance(resources[0], dict):
                out["resourcesPerNode"] = resources[0]
            else:
                self.drop("spec.trainer.resourcesPerNode", "a list of several resource sets has no single home")
        if "numProcPerNode" in src:
            value = src.pop("numProcPerNode")
            if isinstance(value, int) or (isinstance(value, str) and value.isdigit()):
                out["numProcPerNode"] = int(value)
            elif value == "auto":
                pass  # the behaviour without the field
            else:
                self.drop(
                    "spec.trainer.numProcPerNode",
                    f"{value!r} has no equivalent: {c.API_VERSION} takes a number of processes (unset = auto)",
                )
        if "numNodes" in spec:
            num_nodes = spec.pop("numNodes")
            if "numNodes" in out and out["numNodes"] != num_nodes:
                self.drop("spec.numNodes", f"conflicts with spec.trainer.numNodes ({out['numNodes']}), which is kept")
            else:
                out["numNodes"] = num_nodes
        self.leftovers("spec.trainer", src)
        return _ordered(out, ("image", "command", "args", "env", "numNodes", "resourcesPerNode", "numProcPerNode"))

    def patches(self, spec: dict[str, Any]) -> list[dict[str, Any]]:
        """spec.labels/annotations and pod overrides → one runtime patch (JobSet metadata, per-job pod specs)."""
        template: dict[str, Any] = {}
        metadata = {key: spec.pop(key) for key in ("labels", "annotations") if key in spec}
        if metadata:
            template["metadata"] = metadata
        jobs: dict[str, dict[str, Any]] = {}
        for key in ("podSpecOverrides", "podTemplateOverrides"):
            for i, override in enumerate(spec.pop(key, None) or []):
                self.override(f"spec.{key}[{i}]", override, key == "podTemplateOverrides", jobs)
        if jobs:
            template["spec"] = {"replicatedJobs": list(jobs.values())}
        if not template:
            return []
        return [{"manager": CONVERT_MANAGER, "trainingRuntimeSpec": {"template": template}}]

    def override(self, path: str, src: Any, templated: bool, jobs: dict[str, dict[str, Any]]) -> None:
        if not isinstance(src, dict):
            return
        src = dict(src)
        targets = [t.get("name") if isinstance(t, dict) else None for t in src.pop("targetJobs", None) or []]
        targets += list(src.pop("targetReplicatedJobs", None) or [])
        pod_meta = src.pop("metadata", None) if templated else None
        pod_src = dict(src.pop("spec", None) or {}) if templated else src
        spec_path = f"{path}.spec" if templated else path
        pod: dict[str, Any] = {key: pod_src.pop(key) for key in POD_PATCH_FIELDS if key in pod_src}
        for key in ("initContainers", "containers"):
            if key in pod_src:
                pod[key] = [
                    self.container(f"{spec_path}.{key}[{j}]", ctr) for j, ctr in enumerate(pod_src.pop(key) or [])
                ]
        self.leftovers(spec_path, pod_src, f"a runtime patch cannot set it in {c.API_VERSION}")
        if templated:
            self.leftovers(path, src)
        if not targets:
            self.drop(f"{path}.targetJobs", "no target job: the override applied to nothing")
            return
        for name in targets:
            if not isinstance(name, str):
                continue
            job = jobs.setdefault(name, {"name": name, "template": {"spec": {"template": {}}}})
            pod_template = job["template"]["spec"]["template"]
            if pod_meta:
                pod_template["metadata"] = {**pod_template.get("metadata", {}), **copy.deepcopy(pod_meta)}
            if pod:
                pod_template["spec"] = {**pod_template.get("spec", {}), **copy.deepcopy(pod)}

    def container(self, path: str, src: Any) -> dict[str, Any]:
        src = dict(src) if isinstance(src, dict) else {}
        out = {key: src.pop(key) for key in CONTAINER_PATCH_FIELDS if key in src}
        self.leftovers(path, src, f"a runtime patch cannot set a container's field in {c.API_VERSION}")
        return out

    # --- TrainingRuntime / ClusterTrainingRuntime ------------------------------------------------------------

    def runtime(self) -> Converted:
        obj = self.head()
        spec_src = self.src.pop("spec", None) or {}
        self.leftovers("", self.src)
        ml_policy = dict(spec_src.pop("mlPolicy", None) or {})
        if "numNodes" in spec_src:
            num_nodes = spec_src.pop("numNodes")
            if ml_policy.get("numNodes", num_nodes) != num_nodes:
                self.drop("spec.numNodes", f"conflicts with spec.mlPolicy.numNodes ({ml_policy['numNodes']})")
            else:
                ml_policy["numNodes"] = num_nodes
        torch = ml_policy.get("torch")
        if isinstance(torch, dict):
            for key in ("numProcPerNode", "elasticPolicy"):
                if key in torch:
                    torch.pop(key)
                    self.drop(
                        f"spec.mlPolicy.torch.{key}",
                        "removed from the API before v2.3 (numProcPerNode: set "
                        "spec.trainer.numProcPerNode on the TrainJob)",
                    )
        spec: dict[str, Any] = {}
        if ml_policy:
            spec["mlPolicy"] = ml_policy
        if "podGroupPolicy" in spec_src:
            spec["podGroupPolicy"] = spec_src.pop("podGroupPolicy")
        template = spec_src.pop("template", None) or {}
        jobset = dict(template.get("spec") or {})
        for key in JOBSET_SPEC_FIELDS:
            if key in spec_src:
                jobset[key] = spec_src.pop(key)
        if jobset:
            template = {**template, "spec": jobset}
        if template:
            spec["template"] = template
        self.leftovers("spec", spec_src)
        obj["spec"] = spec
        return self.done(obj)


def _ordered(values: dict[str, Any], order: tuple[str, ...]) -> dict[str, Any]:
    return {key: values[key] for key in order if key in values}


# --- a runtime for a converted TrainJob that names none ----------------------------------------------------------

INITIALIZER_JOBS = {"dataset": c.DATASET_INITIALIZER, "model": c.MODEL_INITIALIZER}
"""Each initializer of a TrainJob and the replicated job a runtime needs to run it."""


@dataclass(frozen=True)
class RuntimeChoice:
    """What `choose_runtime` knows of a runtime: enough to tell whether a TrainJob can use it."""

    kind: str
    name: str
    namespace: str | None = None
    """A TrainingRuntime's namespace (None: a ClusterTrainingRuntime, or one that `kubectl apply -n` places)."""
    framework: str = ""
    """Its `trainer.kubeflow.org/framework` label."""
    initializers: frozenset[str] = frozenset()
    """The initializers (`dataset`, `model`) it has a replicated job for."""

    @classmethod
    def of(cls, runtime: dict[str, Any]) -> RuntimeChoice | None:
        """From a (Cluster)TrainingRuntime as written (None: not one, or without a name)."""
        kind, meta, spec = runtime.get("kind"), runtime.get("metadata"), runtime.get("spec")
        if kind not in c.RUNTIME_KINDS or not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
            return None
        labels = _mapping(meta.get("labels"))
        template = spec.get("template") if isinstance(spec, dict) else None
        jobset = template.get("spec") if isinstance(template, dict) else None
        jobs = jobset.get("replicatedJobs") if isinstance(jobset, dict) else None
        job_names = {job.get("name") for job in jobs if isinstance(job, dict)} if isinstance(jobs, list) else set()
        namespace = meta.get("namespace") if kind == c.TRAINING_RUNTIME_KIND else None
        return cls(
            kind=str(kind),
            name=meta["name"],
            namespace=namespace if isinstance(namespace, str) else None,
            framework=str(labels.get(c.FRAMEWORK_LABEL, "")),
            initializers=frozenset(what for what, job in INITIALIZER_JOBS.items() if job in job_names),
        )

    def ref(self) -> dict[str, Any]:
        """The TrainJob's `spec.runtimeRef` for it (the kind only where the default, ClusterTrainingRuntime, is not)."""
        return (
            {"name": self.name}
            if self.kind == c.CLUSTER_TRAINING_RUNTIME_KIND
            else {"name": self.name, "kind": self.kind}
        )

    def __str__(self) -> str:
        return f"{self.kind} {json.dumps(self.name)}"  # quoted and escaped: the name is the user's text


SHIPPED_RUNTIMES: tuple[RuntimeChoice, ...] = (
    RuntimeChoice(c.CLUSTER_TRAINING_RUNTIME_KIND, "torch-distributed", framework="torch"),
    RuntimeChoice(c.CLUSTER_TRAINING_RUNTIME_KIND, "deepspeed-distributed", framework="deepspeed"),
    RuntimeChoice(c.CLUSTER_TRAINING_RUNTIME_KIND, "horovod-distributed", framework="horovod"),
    RuntimeChoice(c.CLUSTER_TRAINING_RUNTIME_KIND, "jax-distributed", framework="jax"),
    RuntimeChoice(c.CLUSTER_TRAINING_RUNTIME_KIND, "mlx-distributed", framework="mlx"),
    RuntimeChoice(c.CLUSTER_TRAINING_RUNTIME_KIND, "tensorflow-distributed", framework="tensorflow"),
    RuntimeChoice(c.CLUSTER_TRAINING_RUNTIME_KIND, "xgboost-distributed", framework="xgboost"),
    *(
        RuntimeChoice(
            c.CLUSTER_TRAINING_RUNTIME_KIND,
            f"torchtune-{model}",
            framework="torchtune",
            initializers=frozenset(INITIALIZER_JOBS),
        )
        for model in ("llama3.2-1b", "llama3.2-3b", "qwen2.5-1.5b")
    ),
)
"""The ClusterTrainingRuntimes this project ships (`runtimes/`, the chart installs them), first the default."""

# Words of a trainer's image, command and args that tell its framework, most specific first.
_FRAMEWORK_WORDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("torchtune", ("tune run", "torchtune")),
    ("deepspeed", ("deepspeed",)),
    ("horovod", ("horovod",)),
    ("mlx", ("mlx",)),
    ("jax", ("jax",)),
    ("xgboost", ("xgboost",)),
    ("tensorflow", ("tensorflow", "keras")),
    ("torch", ("torch", "pytorch")),
)


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _squeezed(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isalnum())


def _framework_of(trainer: Any) -> str | None:
    if not isinstance(trainer, dict):
        return None
    words = [trainer.get("image"), *(trainer.get("command") or []), *(trainer.get("args") or [])]
    text = " ".join(str(word) for word in words if word is not None).lower()
    return next((name for name, hints in _FRAMEWORK_WORDS if any(hint in text for hint in hints)), None)


def choose_runtime(trainjob: dict[str, Any], choices: Sequence[RuntimeChoice]) -> tuple[RuntimeChoice, str] | None:
    """The runtime that suits a TrainJob without `runtimeRef` best, and why in words: first one of the framework its
    trainer's image or command names (any, when they name none), then one with a job for each initializer the
    TrainJob uses, then one whose name names its model (`torchtune-llama3.2-1b` for
    `hf://meta-llama/Llama-3.2-1B-Instruct`); the earliest of equals. None when no runtime may serve it (a
    TrainingRuntime of another namespace serves none)."""
    meta = _mapping(trainjob.get("metadata"))
    namespace = meta.get("namespace") or "default"
    spec = _mapping(trainjob.get("spec"))
    needed = initializers_of(trainjob)
    model = _mapping(_mapping(spec.get("initializer")).get("model"))
    model_uri = _squeezed(str(model.get("storageUri") or ""))
    framework = _framework_of(spec.get("trainer"))
    usable = [choice for choice in choices if choice.namespace in (None, namespace)]

    def names_model(choice: RuntimeChoice) -> bool:
        key = _squeezed(choice.name.removeprefix(f"{choice.framework}-"))
        return bool(model_uri and key and key in model_uri)

    def score(choice: RuntimeChoice) -> tuple[bool, bool, bool]:
        return framework in (choice.framework, None), needed <= choice.initializers, names_model(choice)

    if not usable:
        return None
    best = max(usable, key=score)  # max keeps the first of equals
    reasons = []
    if needed and needed <= best.initializers:
        reasons.append(f"it has the {' and '.join(sorted(needed))} initializer the TrainJob uses")
    if names_model(best):
        reasons.append(f"its name matches the model {json.dumps(model.get('storageUri'))}")
    if framework is not None and framework == best.framework:
        reasons.append(f"the trainer's image or command is {framework}'s")
    return best, "; ".join(reasons) or "the first runtime that may serve it"


def initializers_of(trainjob: dict[str, Any]) -> frozenset[str]:
    """The initializers (`dataset`, `model`) a TrainJob uses."""
    initializer = _mapping(_mapping(trainjob.get("spec")).get("initializer"))
    return frozenset(what for what in INITIALIZER_JOBS if initializer.get(what))


def with_runtime(trainjob: dict[str, Any], choice: RuntimeChoice) -> dict[str, Any]:
    """The TrainJob with `spec.runtimeRef` naming `choice`, first in its spec."""
    spec = _mapping(trainjob.get("spec"))
    rest = {key: value for key, value in spec.items() if key != "runtimeRef"}
    return {**trainjob, "spec": {"runtimeRef": choice.ref(), **rest}}


def initializer_hint(what: str, runtime: str, choices: Sequence[RuntimeChoice]) -> str:
    """What to do when the TrainJob's runtime has no job for its `what` ("dataset"/"model") initializer."""
    having = [json.dumps(choice.name) for choice in choices if what in choice.initializers]
    some = f" such as {', '.join(having[:3])}" if having else ""
    return (
        f"{runtime} has no {INITIALIZER_JOBS[what]} job: name a runtime that has one{some} "
        f"(convert --runtime NAME), or delete spec.initializer.{what} and load the {what} in the training code"
    )
