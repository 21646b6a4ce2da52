"""The generated CRDs: in sync with the models, structural, and carrying upstream v2.3's API."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import pytest
import yaml
from pydantic import BaseModel, Field, StringConstraints

from trainjob_dev import crdgen
from trainjob_operator.api import constants as c
from trainjob_operator.api import rules
from trainjob_operator.api.base import K8sModel
from trainjob_operator.api.rules import CelRule

ETCD_REQUEST_LIMIT = 1536 * 1024  # etcd's default --max-request-bytes (1.5 MiB)
LAST_APPLIED_LIMIT = 256 * 1024  # the total size of an object's annotations (kubectl apply's last-applied copy)

TRAINJOB = "trainer.kubeflow.org_trainjobs.yaml"
TRAINING_RUNTIME = "trainer.kubeflow.org_trainingruntimes.yaml"
CLUSTER_TRAINING_RUNTIME = "trainer.kubeflow.org_clustertrainingruntimes.yaml"
RUNTIMES = (TRAINING_RUNTIME, CLUSTER_TRAINING_RUNTIME)

POD = "template.spec.replicatedJobs[].template.spec.template.spec"  # a runtime's pod spec, below .spec
PATCH_POD = (  # a runtime patch's pod spec, below .spec.runtimePatches[]
    "trainingRuntimeSpec.template.spec.replicatedJobs[].template.spec.template.spec"
)


@pytest.fixture(scope="module")
def generated() -> dict[str, str]:
    return crdgen.generate()


@pytest.fixture(scope="module")
def described(generated: dict[str, str]) -> dict[str, dict[str, Any]]:
    """The CRDs as generated, descriptions and all."""
    return {name: yaml.safe_load(text.split("---\n", 1)[1]) for name, text in generated.items()}


@pytest.fixture(scope="module")
def crds(generated: dict[str, str]) -> dict[str, dict[str, Any]]:
    """The CRDs without their descriptions, so that a schema node compares with what it means."""
    return {name: undescribed(yaml.safe_load(text.split("---\n", 1)[1])) for name, text in generated.items()}


def undescribed(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: undescribed(v) for k, v in value.items() if not (k == "description" and isinstance(v, str))}
    return [undescribed(v) for v in value] if isinstance(value, list) else value


def schema_of(crd: dict[str, Any]) -> dict[str, Any]:
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def at(crd: dict[str, Any], path: str) -> dict[str, Any]:
    """The schema node at a dotted path (`spec.trainer.env[]`)."""
    node = schema_of(crd)
    for part in path.split("."):
        items = part.endswith("[]")
        node = node["properties"][part.removesuffix("[]")]
        if items:
            node = node["items"]
    return node


def nodes(value: Any) -> Iterator[Any]:
    """Every dict and list inside a YAML document, the document included."""
    yield value
    children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    for child in children:
        yield from nodes(child)


def all_rules() -> list[CelRule]:
    return [v for v in vars(rules).values() if isinstance(v, CelRule)]


def messages(node: dict[str, Any]) -> list[str]:
    return [r["message"] for r in node.get("x-kubernetes-validations", [])]


# ------------------------------------------------------------------------------------------- in sync, stable


def test_committed_crds_match_the_models(generated: dict[str, str]) -> None:
    """Fails when the models changed and `make crds` was not run."""
    stale = [
        name
        for name, text in generated.items()
        if not (crdgen.CRD_DIR / name).exists() or (crdgen.CRD_DIR / name).read_text(encoding="utf-8") != text
    ]
    assert not stale, f"run `make crds` and commit: {stale} differ"


def test_exactly_the_three_crds_are_generated(generated: dict[str, str]) -> None:
    assert sorted(generated) == sorted([TRAINJOB, TRAINING_RUNTIME, CLUSTER_TRAINING_RUNTIME])
    assert sorted(p.name for p in crdgen.CRD_DIR.glob("*.yaml")) == sorted(generated)


def test_generation_is_deterministic(generated: dict[str, str]) -> None:
    crdgen.k8s_definitions.cache_clear()
    assert crdgen.generate() == generated


def test_check_mode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert crdgen.main(["--out", str(tmp_path)]) == 0
    assert crdgen.main(["--check", "--out", str(tmp_path)]) == 0

    path = tmp_path / TRAINJOB
    path.write_text(path.read_text(encoding="utf-8").replace("maxItems: 16", "maxItems: 17"), encoding="utf-8")
    capsys.readouterr()
    assert crdgen.main(["--check", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert f"{path}: differs from what crdgen generates" in err
    assert "run `make crds`" in err

    path.unlink()
    assert crdgen.main(["--check", "--out", str(tmp_path)]) == 1

    assert crdgen.main(["--out", str(tmp_path)]) == 0
    (tmp_path / f"{c.GROUP}_oldjobs.yaml").write_text("{}", encoding="utf-8")
    capsys.readouterr()
    assert crdgen.main(["--check", "--out", str(tmp_path)]) == 1
    assert "oldjobs.yaml: not generated any more" in capsys.readouterr().out


@pytest.mark.parametrize("name", [TRAINJOB, TRAINING_RUNTIME, CLUSTER_TRAINING_RUNTIME])
def test_size_is_well_under_the_etcd_request_limit(described: dict[str, dict[str, Any]], name: str) -> None:
    """Measured as what kubectl sends and etcd stores: compact JSON (the descriptions tripled it). A client-side
    `kubectl apply -f crds/` records it all in an annotation of at most 256 KiB: kept with a margin."""
    size = len(json.dumps(described[name], separators=(",", ":")).encode())
    assert (size < ETCD_REQUEST_LIMIT // 5, size < 0.9 * LAST_APPLIED_LIMIT) == (True, True)


@pytest.mark.parametrize("name", [TRAINJOB, TRAINING_RUNTIME, CLUSTER_TRAINING_RUNTIME])
def test_every_field_has_a_description(described: dict[str, dict[str, Any]], name: str) -> None:
    """`kubectl explain trainjob.spec.trainer.numNodes` and every other field say what the field is (but the root
    `metadata`, which the API server wants bare and describes itself)."""
    undescribed = [
        path
        for path, node in crdgen.walk(schema_of(described[name]))
        if path and path != ".metadata" and not path.endswith(("[]", "{}")) and not node.get("description")
    ]
    assert undescribed == []


def test_upstream_fields_are_described_in_upstream_terms(described: dict[str, dict[str, Any]]) -> None:
    """Spot checks of what `kubectl explain` prints for fields a newcomer reads first."""
    assert at(described[TRAINJOB], "spec.trainer.numNodes")["description"].startswith("Number of training nodes")
    assert "Immutable" in at(described[TRAINJOB], "spec.runtimeRef")["description"]
    assert at(described[TRAINJOB], "spec.trainer.resourcesPerNode")["description"].startswith("Compute resources")
    pod = at(described[CLUSTER_TRAINING_RUNTIME], f"spec.{POD}.containers[].image")["description"]
    assert pod.startswith("Container image name.")  # Kubernetes' own words for embedded core types


def test_kubernetes_descriptions_are_cut_to_their_first_paragraph() -> None:
    long = "First sentence here. " * 20 + "\n\nSecond paragraph."
    cut = crdgen.k8s_description(long)
    assert (cut.endswith("here."), len(cut) <= crdgen.MAX_K8S_DESCRIPTION, "Second" in cut) == (True, True, False)
    assert crdgen.k8s_description("Short.\n\nMore.") == "Short."


# ----------------------------------------------------------------------------------------------- structural


@pytest.mark.parametrize("name", [TRAINJOB, TRAINING_RUNTIME, CLUSTER_TRAINING_RUNTIME])
def test_schemas_are_structural(crds: dict[str, dict[str, Any]], name: str) -> None:
    assert crdgen.structural_errors(schema_of(crds[name])) == []


def test_structural_check_catches_violations() -> None:
    bad = {
        "type": "object",
        "properties": {
            "a": {"type": "object", "properties": {}, "additionalProperties": {"type": "string"}},
            "b": {"properties": {}},
            "c": {
                "type": "array",
                "items": {"type": "object"},
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
            },
            "d": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "metadata": {"type": "object", "properties": {"name": {"type": "string"}}},
        },
    }
    errors = "\n".join(crdgen.structural_errors(bad))
    assert ".a: properties and additionalProperties are mutually exclusive" in errors
    assert ".b: no type" in errors
    assert ".c: list-map key 'name' must be a scalar property of the items" in errors
    assert ".d: keywords not allowed here: ['x-kubernetes-preserve-unknown-fields']" in errors
    assert ".metadata: the object's own metadata must be just `type: object`" in errors


@pytest.mark.parametrize("name", [TRAINJOB, TRAINING_RUNTIME, CLUSTER_TRAINING_RUNTIME])
def test_nothing_is_left_untyped_or_open(crds: dict[str, dict[str, Any]], name: str) -> None:
    for node in nodes(crds[name]):
        if isinstance(node, dict):
            assert "x-kubernetes-preserve-unknown-fields" not in node
            assert node.get("additionalProperties", {}) not in (True, False)
            assert "$ref" not in node
            assert "nullable" not in node
            assert not isinstance(node.get("type"), list)
            assert "x-kubernetes-patch-strategy" not in node
            assert "x-kubernetes-group-version-kind" not in node
            assert "x-k8s-definition" not in node


def test_dict_typed_fields_name_their_kubernetes_definition() -> None:
    """Every `dict[str, Any]` of our own models must be typed from a Kubernetes definition."""
    with pytest.raises(TypeError, match="untyped dict needs json_schema_extra"):

        class Loose(BaseModel):
            blob: dict[str, Any] | None = None

        crdgen.model_schema(Loose)


def test_constraints_inside_annotated_and_field() -> None:
    class Bounded(BaseModel):
        names: list[Annotated[str, StringConstraints(min_length=1, max_length=7, pattern="^[a-z]+$")]] = Field(
            max_length=3
        )
        count: Annotated[int, Field(ge=1, le=9)] | None = None
        code: str = Field(pattern="^[A-Z]{2}$")

    schema = crdgen.model_schema(Bounded)
    assert schema["properties"]["names"] == {
        "type": "array",
        "maxItems": 3,
        "items": {"type": "string", "minLength": 1, "maxLength": 7, "pattern": "^[a-z]+$"},
    }
    assert schema["properties"]["count"] == {"type": "integer", "format": "int32", "minimum": 1, "maximum": 9}
    assert schema["properties"]["code"] == {"type": "string", "pattern": "^[A-Z]{2}$"}
    assert schema["required"] == ["code", "names"]


# ----------------------------------------------------------------------------------------------- the kinds


def test_names_scope_and_version(crds: dict[str, dict[str, Any]]) -> None:
    for name, kind, plural, scope in [
        (TRAINJOB, "TrainJob", "trainjobs", "Namespaced"),
        (TRAINING_RUNTIME, "TrainingRuntime", "trainingruntimes", "Namespaced"),
        (CLUSTER_TRAINING_RUNTIME, "ClusterTrainingRuntime", "clustertrainingruntimes", "Cluster"),
    ]:
        crd = crds[name]
        assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
        assert crd["metadata"]["name"] == f"{plural}.{c.GROUP}"
        assert crd["spec"]["group"] == c.GROUP
        assert crd["spec"]["scope"] == scope
        assert crd["spec"]["names"] == {
            "kind": kind,
            "listKind": f"{kind}List",
            "plural": plural,
            "singular": kind.lower(),
        }
        [version] = crd["spec"]["versions"]
        assert (version["name"], version["served"], version["storage"]) == (c.VERSION, True, True)


def test_trainjob_has_status_subresource_and_printer_columns(crds: dict[str, dict[str, Any]]) -> None:
    [version] = crds[TRAINJOB]["spec"]["versions"]
    assert version["subresources"] == {"status": {}}
    assert version["additionalPrinterColumns"] == [
        {"name": "State", "type": "string", "jsonPath": ".status.state"},
        {"name": "Reason", "type": "string", "jsonPath": ".status.reason"},
        {"name": "Nodes", "type": "integer", "jsonPath": ".status.nodes"},
        {"name": "Restarts", "type": "integer", "jsonPath": ".status.restarts"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        {"name": "Message", "type": "string", "jsonPath": ".status.message", "priority": 1},
        {"name": "Goodput", "type": "integer", "jsonPath": ".status.goodput.percent", "priority": 1},
        # upstream's fields, which a MultiKueue manager receives from the worker (docs/multikueue.md)
        {
            "name": "Condition",
            "type": "string",
            "jsonPath": '.status.conditions[?(@.status=="True")].type',
            "priority": 1,
        },
        {"name": "Active", "type": "string", "jsonPath": ".status.jobsStatus[?(@.active>0)].name", "priority": 1},
    ]


@pytest.mark.parametrize("name", RUNTIMES)
def test_runtimes_have_no_status_and_no_columns(crds: dict[str, dict[str, Any]], name: str) -> None:
    [version] = crds[name]["spec"]["versions"]
    assert "subresources" not in version
    assert "additionalPrinterColumns" not in version
    assert sorted(schema_of(crds[name])["properties"]) == ["apiVersion", "kind", "metadata", "spec"]


@pytest.mark.parametrize("name", [TRAINJOB, TRAINING_RUNTIME, CLUSTER_TRAINING_RUNTIME])
def test_top_level_metadata_is_left_to_the_api_server(
    crds: dict[str, dict[str, Any]], described: dict[str, dict[str, Any]], name: str
) -> None:
    root = schema_of(crds[name])
    # as generated, description included: the API server refuses anything but the type there
    assert schema_of(described[name])["properties"]["metadata"] == {"type": "object"}
    assert root["properties"]["apiVersion"] == {"type": "string"}
    assert root["properties"]["kind"] == {"type": "string"}
    assert "required" not in root  # spec is optional on the wire, as upstream (`omitzero`)


# --------------------------------------------------------------------------------------------------- TrainJob


def test_trainjob_root_rules(crds: dict[str, dict[str, Any]]) -> None:
    assert schema_of(crds[TRAINJOB])["x-kubernetes-validations"] == [
        rules.NAME_RFC1035.wire(),
        rules.NAME_MAX_63.wire(),
    ]
    assert messages(schema_of(crds[TRAINJOB])) == [
        "metadata.name must match RFC 1035 DNS label format",
        "metadata.name must be no more than 63 characters",
    ]


def test_trainjob_status(crds: dict[str, dict[str, Any]]) -> None:
    status = at(crds[TRAINJOB], "status")
    assert status["minProperties"] == 1
    assert status["x-kubernetes-validations"] == [rules.TRAINER_STATUS_TIME.wire()]
    conditions = at(crds[TRAINJOB], "status.conditions")
    assert (conditions["maxItems"], conditions["x-kubernetes-list-type"]) == (8, "map")
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]
    condition = conditions["items"]
    assert condition["required"] == ["lastTransitionTime", "message", "reason", "status", "type"]
    assert condition["properties"]["status"]["enum"] == ["True", "False", "Unknown"]
    assert condition["properties"]["lastTransitionTime"] == {"type": "string", "format": "date-time"}
    jobs = at(crds[TRAINJOB], "status.jobsStatus")
    assert (jobs["maxItems"], jobs["x-kubernetes-list-map-keys"]) == (100, ["name"])
    assert jobs["items"]["required"] == ["active", "failed", "name", "ready", "succeeded", "suspended"]
    assert jobs["items"]["properties"]["ready"] == {"type": "integer", "format": "int32", "minimum": 0}
    progress = at(crds[TRAINJOB], "status.trainerStatus.progressPercentage")
    assert (progress["minimum"], progress["maximum"]) == (0, 100)
    metrics = at(crds[TRAINJOB], "status.trainerStatus.metrics")
    assert (metrics["maxItems"], metrics["x-kubernetes-list-type"]) == (256, "atomic")


def test_trainjob_spec_fields(crds: dict[str, dict[str, Any]]) -> None:
    tj = crds[TRAINJOB]
    spec = at(tj, "spec")
    assert spec["required"] == ["runtimeRef"]
    assert sorted(spec["properties"]) == sorted(
        [
            "runtimeRef",
            "initializer",
            "trainer",
            "runtimePatches",
            "suspend",
            "activeDeadlineSeconds",
            "managedBy",
            "ttlSecondsAfterFinished",
            "startupDeadlineSeconds",
            "stallPolicy",
        ]
    )
    assert at(tj, "spec.ttlSecondsAfterFinished") == {"type": "integer", "format": "int32", "minimum": 0}
    startup = at(tj, "spec.startupDeadlineSeconds")
    assert (startup["minimum"], startup["format"], messages(startup)) == (1, "int64", ["field is immutable"])
    ref = at(tj, "spec.runtimeRef")
    assert ref["required"] == ["name"]
    assert ref["properties"]["name"] == {"type": "string", "minLength": 1, "maxLength": 253}
    assert ref["properties"]["apiGroup"] == {"type": "string", "maxLength": 253, "default": c.GROUP}
    assert ref["properties"]["kind"]["default"] == "ClusterTrainingRuntime"
    assert at(tj, "spec.suspend") == {"type": "boolean", "default": False}
    deadline = at(tj, "spec.activeDeadlineSeconds")
    assert (deadline["minimum"], deadline["format"]) == (1, "int64")
    managed_by = at(tj, "spec.managedBy")
    assert managed_by["default"] == "trainer.kubeflow.org/trainjob-controller"
    assert managed_by["maxLength"] == 253
    trainer = at(tj, "spec.trainer")
    assert trainer["properties"]["image"]["maxLength"] == 500
    assert trainer["properties"]["numNodes"]["minimum"] == 0
    for name in ("command", "args"):
        field = trainer["properties"][name]
        assert (field["maxItems"], field["x-kubernetes-list-type"]) == (128, "atomic")
        assert field["items"] == {"type": "string", "maxLength": 1048576}
    storage_uri = at(tj, "spec.initializer.model.storageUri")
    assert storage_uri["maxLength"] == 2048
    secret_ref = at(tj, "spec.initializer.dataset.secretRef")
    assert secret_ref["properties"]["name"] == {"type": "string", "default": ""}


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("spec.runtimeRef", ["field is immutable"]),
        ("spec.initializer", ["field is immutable"]),
        ("spec", ["field is immutable"]),
        ("spec.trainer", []),
        ("spec.activeDeadlineSeconds", ["field is immutable"]),
        (
            "spec.managedBy",
            [
                "ManagedBy must be trainer.kubeflow.org/trainjob-controller or kueue.x-k8s.io/multikueue if set",
                "field is immutable",
            ],
        ),
        ("spec.trainer.numProcPerNode", ["numProcPerNode must be greater than or equal to 1"]),
        (
            "spec.initializer.dataset.storageUri",
            ["storageUri may be empty, or it must be a valid URI (scheme://...)"],
        ),
        (
            "spec.initializer.model.storageUri",
            ["storageUri may be empty, or it must be a valid URI (scheme://...)"],
        ),
        ("spec.runtimePatches[].manager", ["field is immutable"]),
        ("spec.suspend", []),
    ],
)
def test_trainjob_cel_messages_verbatim(crds: dict[str, dict[str, Any]], path: str, expected: list[str]) -> None:
    assert messages(at(crds[TRAINJOB], path)) == expected


def test_trainer_rule_is_relaxed_for_a_resize_while_suspended(crds: dict[str, dict[str, Any]]) -> None:
    [rule] = at(crds[TRAINJOB], "spec")["x-kubernetes-validations"]
    assert (rule["fieldPath"], rule["message"]) == (".trainer", "field is immutable")
    assert rule["rule"].startswith(
        "!has(self.trainer) || !has(oldSelf.trainer) || self.trainer == oldSelf.trainer || "
        "(has(oldSelf.suspend) && oldSelf.suspend && "
    )
    suspended, elastic = rule["rule"].split(" || (has(oldSelf.trainer.elasticPolicy) && ")
    for fixed in ("image", "command", "args", "env", "numProcPerNode", "elasticPolicy"):
        assert f"self.trainer.{fixed} == oldSelf.trainer.{fixed}" in suspended
        assert f"self.trainer.{fixed} == oldSelf.trainer.{fixed}" in elastic
    for resizable in ("numNodes", "resourcesPerNode"):
        assert resizable not in suspended
    # An elastic trainer (docs/elastic.md) may change numNodes while running, not its resources.
    assert "numNodes" not in elastic and "self.trainer.resourcesPerNode == oldSelf.trainer.resourcesPerNode" in elastic


STALL_POLICY = {
    "type": "object",
    "properties": {
        "progressTimeoutSeconds": {"type": "integer", "format": "int64", "minimum": 1},
        "firstProgressTimeoutSeconds": {"type": "integer", "format": "int64", "minimum": 1},
        "action": {"type": "string", "enum": ["Report", "Restart", "Fail"]},
    },
}


def test_lifecycle_status_and_run_policy_fields(crds: dict[str, dict[str, Any]]) -> None:
    tj = crds[TRAINJOB]
    for name in ("startTime", "completionTime"):
        assert at(tj, f"status.{name}") == {"type": "string", "format": "date-time"}
    assert at(tj, "status.restarts") == {"type": "integer", "format": "int32", "minimum": 0}
    for runtime in RUNTIMES:
        policy = at(crds[runtime], "spec.runPolicy")
        assert policy["properties"] == {
            "activeDeadlineSeconds": {"type": "integer", "format": "int64", "minimum": 1},
            "ttlSecondsAfterFinished": {"type": "integer", "format": "int32", "minimum": 0},
            "startupDeadlineSeconds": {"type": "integer", "format": "int64", "minimum": 1},
            "stallPolicy": STALL_POLICY,
        }
    assert {k: v for k, v in at(tj, "spec.stallPolicy").items() if k != "description"} == STALL_POLICY
    goodput = at(tj, "status.goodput")
    assert (goodput["required"], goodput["properties"]["phase"]["enum"]) == (
        ["phase", "since"],
        ["Queued", "Starting", "Training", "Restarting", "Stalled", "Finished"],
    )
    assert "Stalled" in at(tj, "status.state")["enum"]


def test_storage_uri_rule_is_verbatim(crds: dict[str, dict[str, Any]]) -> None:
    assert at(crds[TRAINJOB], "spec.initializer.dataset.storageUri")["x-kubernetes-validations"] == [
        {
            "rule": "self == '' || self.matches('^[A-Za-z][A-Za-z0-9+.-]*://.+$')",
            "message": "storageUri may be empty, or it must be a valid URI (scheme://...)",
        }
    ]


def test_runtime_patches(crds: dict[str, dict[str, Any]]) -> None:
    tj = crds[TRAINJOB]
    patches = at(tj, "spec.runtimePatches")
    assert patches["maxItems"] == 16
    assert (patches["x-kubernetes-list-type"], patches["x-kubernetes-list-map-keys"]) == ("map", ["manager"])
    assert at(tj, "spec.runtimePatches[].time") == {"type": "string", "format": "date-time"}
    jobs = at(tj, "spec.runtimePatches[].trainingRuntimeSpec.template.spec.replicatedJobs")
    assert (jobs["maxItems"], jobs["x-kubernetes-list-map-keys"]) == (100, ["name"])
    pod = at(tj, f"spec.runtimePatches[].{PATCH_POD}")
    immutable = ["field is immutable"]
    for name, max_items in [
        ("volumes", 128),
        ("initContainers", 64),
        ("containers", 64),
        ("imagePullSecrets", 64),
    ]:
        field = pod["properties"][name]
        assert (field["maxItems"], field["x-kubernetes-list-type"]) == (max_items, "map"), name
        assert field["x-kubernetes-list-map-keys"] == ["name"]
        assert messages(field) == immutable, name
    for name in ("serviceAccountName", "securityContext", "terminationGracePeriodSeconds"):
        assert messages(pod["properties"][name]) == immutable, name
    for name in ("nodeSelector", "affinity", "tolerations", "schedulingGates"):
        assert messages(pod["properties"][name]) == [], name
    assert pod["properties"]["tolerations"]["x-kubernetes-list-type"] == "atomic"
    assert pod["properties"]["schedulingGates"]["x-kubernetes-list-map-keys"] == ["name"]
    container = pod["properties"]["containers"]["items"]
    assert sorted(container["properties"]) == ["env", "name", "securityContext", "volumeMounts"]
    assert container["properties"]["env"]["x-kubernetes-list-map-keys"] == ["name"]
    assert container["properties"]["volumeMounts"]["x-kubernetes-list-map-keys"] == ["name"]


def test_patch_dicts_are_typed_from_kubernetes(crds: dict[str, dict[str, Any]]) -> None:
    pod = at(crds[TRAINJOB], f"spec.runtimePatches[].{PATCH_POD}")["properties"]
    assert (
        "requiredDuringSchedulingIgnoredDuringExecution" in pod["affinity"]["properties"]["nodeAffinity"]["properties"]
    )
    assert {"key", "operator", "effect", "tolerationSeconds"} <= set(pod["tolerations"]["items"]["properties"])
    assert pod["schedulingGates"]["items"] == {
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "required": ["name"],
    }
    assert {"fsGroup", "runAsUser", "sysctls"} <= set(pod["securityContext"]["properties"])
    container_sc = pod["containers"]["items"]["properties"]["securityContext"]["properties"]
    assert {"privileged", "capabilities", "allowPrivilegeEscalation"} <= set(container_sc)


def test_env_vars_are_fully_typed(crds: dict[str, dict[str, Any]]) -> None:
    env = at(crds[TRAINJOB], "spec.trainer.env")
    assert (env["maxItems"], env["x-kubernetes-list-map-keys"]) == (128, ["name"])
    value_from = env["items"]["properties"]["valueFrom"]["properties"]
    assert value_from["secretKeyRef"]["required"] == ["key"]
    assert value_from["secretKeyRef"]["properties"]["name"]["default"] == ""
    resources = at(crds[TRAINJOB], "spec.trainer.resourcesPerNode")
    limit = resources["properties"]["limits"]["additionalProperties"]
    assert limit["x-kubernetes-int-or-string"] is True
    assert limit["anyOf"] == [{"type": "integer"}, {"type": "string"}]


# --------------------------------------------------------------------------------------------------- runtimes


@pytest.mark.parametrize("name", RUNTIMES)
def test_runtime_spec(crds: dict[str, dict[str, Any]], name: str) -> None:
    crd = crds[name]
    assert at(crd, "spec")["minProperties"] == 1
    assert at(crd, "spec.template")["minProperties"] == 1
    ml = at(crd, "spec.mlPolicy")
    assert ml["x-kubernetes-validations"] == [rules.ONE_ML_POLICY.wire()]
    assert sorted(ml["properties"]) == ["flux", "jax", "mpi", "numNodes", "torch", "xgboost"]
    assert at(crd, "spec.mlPolicy.jax") == {"type": "object"}
    mpi = at(crd, "spec.mlPolicy.mpi")["properties"]
    assert mpi["numProcPerNode"]["default"] == 1
    assert messages(mpi["numProcPerNode"]) == ["NumProcPerNode in mpiPolicy must be >= 1"]
    assert mpi["mpiImplementation"] == {"type": "string", "enum": ["OpenMPI", ""], "default": "OpenMPI"}
    assert mpi["sshAuthMountPath"] == {"type": "string", "maxLength": 4096, "default": "/root/.ssh"}
    assert mpi["runLauncherAsNode"] == {"type": "boolean", "default": False}
    flux = at(crd, "spec.mlPolicy.flux.numProcPerNode")
    assert messages(flux) == ["NumProcPerNode in fluxPolicy must be >= 1"]
    targets = at(crd, "spec.mlPolicy.torch.envInjection.targets")
    assert (targets["maxItems"], targets["x-kubernetes-list-map-keys"]) == (16, ["jobName"])
    names = targets["items"]["properties"]["containerNames"]
    assert (names["minItems"], names["maxItems"], names["x-kubernetes-list-type"]) == (1, 8, "set")
    assert names["items"] == {"type": "string", "maxLength": 63}
    assert names["x-kubernetes-validations"] == [rules.ENV_INJECTION_NOT_NODE.wire()]
    assert at(crd, "spec.podGroupPolicy.coscheduling.scheduleTimeoutSeconds")["default"] == 60
    topology = at(crd, "spec.podGroupPolicy.volcano.networkTopology")["properties"]
    assert topology["mode"] == {"type": "string", "enum": ["hard", "soft"], "default": "hard"}
    assert topology["highestTierAllowed"]["default"] == 1


@pytest.mark.parametrize("name", RUNTIMES)
def test_runtime_jobset_spec(crds: dict[str, dict[str, Any]], name: str) -> None:
    crd = crds[name]
    jobset = at(crd, "spec.template.spec")
    assert messages(jobset) == ["StartupPolicy and DependsOn APIs are mutually exclusive"]
    jobs = jobset["properties"]["replicatedJobs"]
    assert (jobs["x-kubernetes-list-type"], jobs["x-kubernetes-list-map-keys"]) == ("map", ["name"])
    job = jobs["items"]
    assert job["required"] == ["name", "template"]
    assert job["properties"]["replicas"]["default"] == 1
    assert job["properties"]["groupName"]["default"] == "default"
    depends_on = job["properties"]["dependsOn"]
    assert (depends_on["maxItems"], messages(depends_on)) == (5, ["Value is immutable"])
    assert depends_on["items"]["properties"]["status"]["enum"] == ["Ready", "Complete"]
    for policy in ("network", "successPolicy", "failurePolicy", "startupPolicy", "volumeClaimPolicies"):
        assert messages(jobset["properties"][policy]) == ["Value is immutable"], policy
    claims = jobset["properties"]["volumeClaimPolicies"]["items"]
    assert messages(claims) == ["namespace cannot be set for VolumeClaimPolicies templates"]
    pvc = claims["properties"]["templates"]["items"]
    assert {"accessModes", "resources", "storageClassName"} <= set(pvc["properties"]["spec"]["properties"])
    assert sorted(pvc["properties"]["metadata"]["properties"]) == [
        "annotations",
        "finalizers",
        "labels",
        "name",
        "namespace",
    ]


@pytest.mark.parametrize("name", RUNTIMES)
def test_runtime_pod_template_is_fully_typed(crds: dict[str, dict[str, Any]], name: str) -> None:
    crd = crds[name]
    job_spec = at(crd, "spec.template.spec.replicatedJobs[].template.spec")
    assert {"backoffLimit", "completionMode", "podFailurePolicy", "template"} <= set(job_spec["properties"])
    pod = at(crd, f"spec.{POD}")
    assert pod["required"] == ["containers"]
    containers = pod["properties"]["containers"]
    assert (containers["x-kubernetes-list-type"], containers["x-kubernetes-list-map-keys"]) == (
        "map",
        ["name"],
    )
    container = containers["items"]
    assert {"image", "command", "resources", "livenessProbe", "volumeMounts"} <= set(container["properties"])
    ports = container["properties"]["ports"]
    assert ports["x-kubernetes-list-map-keys"] == ["containerPort", "protocol"]
    assert ports["items"]["properties"]["protocol"] == {"type": "string", "default": "TCP"}
    probe_port = container["properties"]["livenessProbe"]["properties"]["httpGet"]["properties"]["port"]
    assert probe_port == {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "x-kubernetes-int-or-string": True,
    }
    volume = pod["properties"]["volumes"]["items"]["properties"]
    assert {"persistentVolumeClaim", "configMap", "emptyDir", "ephemeral"} <= set(volume)
    ephemeral_meta = volume["ephemeral"]["properties"]["volumeClaimTemplate"]["properties"]["metadata"]
    assert sorted(ephemeral_meta["properties"]) == [
        "annotations",
        "finalizers",
        "labels",
        "name",
        "namespace",
    ]


@pytest.mark.parametrize("name", RUNTIMES)
def test_embedded_object_meta_is_reduced(crds: dict[str, dict[str, Any]], name: str) -> None:
    crd = crds[name]
    for path in (
        "spec.template.metadata",
        "spec.template.spec.replicatedJobs[].template.metadata",
        "spec.template.spec.replicatedJobs[].template.spec.template.metadata",
    ):
        meta = at(crd, path)
        assert meta["properties"]["labels"] == {"type": "object", "additionalProperties": {"type": "string"}}
        assert sorted(meta["properties"]) == ["annotations", "finalizers", "labels", "name", "namespace"]


def test_every_rule_is_emitted_verbatim(crds: dict[str, dict[str, Any]]) -> None:
    emitted = {
        (r["rule"], r["message"])
        for crd in crds.values()
        for node in nodes(crd)
        if isinstance(node, dict)
        for r in node.get("x-kubernetes-validations", [])
    }
    for rule in all_rules():
        assert (rule.rule, rule.message) in emitted, rule


# ------------------------------------------------------------------------------------- models vs Kubernetes


def _k8s_models() -> list[type[K8sModel]]:
    seen: list[type[K8sModel]] = []
    stack: list[type[K8sModel]] = [K8sModel]
    while stack:
        cls = stack.pop()
        for sub in cls.__subclasses__():
            stack.append(sub)
            if getattr(sub, "k8s_definition", None):
                seen.append(sub)
    return sorted(set(seen), key=lambda m: m.__qualname__)


@pytest.mark.parametrize("model", _k8s_models(), ids=lambda m: m.__qualname__)
def test_k8s_models_name_real_fields(model: type[K8sModel]) -> None:
    """The fields our Kubernetes models name exist (under their alias) in the definition they claim."""
    name = getattr(model, "k8s_definition", None)
    assert isinstance(name, str)
    definition = crdgen.k8s_definitions()[name]
    properties = set(definition["properties"])
    for name, info in model.model_fields.items():
        assert (info.alias or name) in properties, f"{model.__qualname__}.{name}"


@pytest.mark.parametrize(("definition", "prop"), sorted(crdgen.K8S_DEFAULTS), ids=lambda v: v.rsplit(".", 1)[-1])
def test_kubernetes_defaults_name_real_fields(definition: str, prop: str) -> None:
    assert prop in crdgen.k8s_definitions()[definition]["properties"]


# ------------------------------------------------------------------------------------------------- pruning


def _unknown_fields(value: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """Fields of `value` the API server would prune with `schema` (a structural schema)."""
    out: list[str] = []
    if isinstance(value, dict):
        if "properties" in schema:
            for key, sub in value.items():
                if key not in schema["properties"]:
                    out.append(f"{path}.{key}")
                else:
                    out += _unknown_fields(sub, schema["properties"][key], f"{path}.{key}")
        elif "additionalProperties" in schema:
            for key, sub in value.items():
                out += _unknown_fields(sub, schema["additionalProperties"], f"{path}.{key}")
        elif schema.get("type") == "object" and path.count(".") > 1 and value:
            out.append(f"{path}: {sorted(value)}")
    elif isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            out += _unknown_fields(item, schema["items"], f"{path}[{i}]")
    return out


TORCH_RUNTIME: dict[str, Any] = {
    "apiVersion": c.API_VERSION,
    "kind": "ClusterTrainingRuntime",
    "metadata": {"name": "torch-distributed", "labels": {"trainer.kubeflow.org/framework": "torch"}},
    "spec": {
        "mlPolicy": {"numNodes": 1, "torch": {}},
        "podGroupPolicy": {"coscheduling": {"scheduleTimeoutSeconds": 120}},
        "template": {
            "spec": {
                "network": {"publishNotReadyAddresses": True},
                "successPolicy": {"operator": "All", "targetReplicatedJobs": ["node"]},
                "replicatedJobs": [
                    {
                        "name": "node",
                        "template": {
                            "metadata": {"labels": {c.ANCESTOR_LABEL: "trainer"}},
                            "spec": {
                                "backoffLimit": 0,
                                "template": {
                                    "spec": {
                                        "containers": [
                                            {
                                                "name": "node",
                                                "image": "pytorch/pytorch",
                                                "command": ["/bin/bash", "-c", "torchrun train.py"],
                                                "ports": [{"containerPort": 29400}],
                                                "resources": {"limits": {"nvidia.com/gpu": 1, "cpu": "2"}},
                                                "env": [
                                                    {
                                                        "name": "POD_IP",
                                                        "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}},
                                                    }
                                                ],
                                                "securityContext": {"runAsNonRoot": True},
                                            }
                                        ],
                                        "tolerations": [{"key": "gpu", "operator": "Exists"}],
                                        "volumes": [{"name": "shm", "emptyDir": {"medium": "Memory"}}],
                                    }
                                },
                            },
                        },
                    }
                ],
            }
        },
    },
}


def test_a_torch_runtime_is_not_pruned(crds: dict[str, dict[str, Any]]) -> None:
    assert _unknown_fields(TORCH_RUNTIME, schema_of(crds[CLUSTER_TRAINING_RUNTIME])) == []


def test_a_trainjob_with_patches_is_not_pruned(crds: dict[str, dict[str, Any]]) -> None:
    job: dict[str, Any] = {
        "apiVersion": c.API_VERSION,
        "kind": "TrainJob",
        "metadata": {"name": "job"},
        "spec": {
            "runtimeRef": {"name": "torch-distributed"},
            "trainer": {"numNodes": 2, "resourcesPerNode": {"requests": {"cpu": "4"}}},
            "runtimePatches": [
                {
                    "manager": "kueue.x-k8s.io/manager",
                    "trainingRuntimeSpec": {
                        "template": {
                            "spec": {
                                "replicatedJobs": [
                                    {
                                        "name": "node",
                                        "template": {
                                            "spec": {
                                                "template": {
                                                    "metadata": {"labels": {"a": "b"}},
                                                    "spec": {
                                                        "nodeSelector": {"pool": "gpu"},
                                                        "tolerations": [{"key": "k", "effect": "NoSchedule"}],
                                                        "schedulingGates": [{"name": "kueue"}],
                                                        "affinity": {"nodeAffinity": {}},
                                                    },
                                                }
                                            }
                                        },
                                    }
                                ]
                            }
                        }
                    },
                }
            ],
        },
        "status": {"conditions": [{"type": "Complete", "status": "True"}]},
    }
    assert _unknown_fields(job, schema_of(crds[TRAINJOB])) == []
    # ... while a field the API does not have would be pruned (the helper does see pruning):
    job["spec"]["trainer"]["numProcPerNodeTypo"] = 1
    assert _unknown_fields(job, schema_of(crds[TRAINJOB])) == [".spec.trainer.numProcPerNodeTypo"]


def test_the_crds_are_package_data_the_cli_reads() -> None:
    """`validate` prunes with the CRDs of the installed package (trainjob_operator/crds, a link to crds/), so an
    installed wheel needs neither the source tree nor the generator (tests/unit/shipped/test_dockerfile.py builds one)."""
    from importlib import resources

    from trainjob_operator.offline.check import crd_schema

    shipped = resources.files("trainjob_operator").joinpath("crds")
    assert sorted(p.name for p in shipped.iterdir() if p.name.endswith(".yaml")) == sorted(
        p.name for p in crdgen.CRD_DIR.glob("*.yaml")
    )
    for kind in crdgen.KINDS:
        on_disk = yaml.safe_load((crdgen.CRD_DIR / kind.filename).read_text(encoding="utf-8").split("---\n", 1)[1])
        # less the descriptions, whose lines the CLI skips before parsing (a third of the text; pruning needs none)
        assert crd_schema(kind.kind) == undescribed(on_disk["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
    assert crd_schema("JobSet") is None
