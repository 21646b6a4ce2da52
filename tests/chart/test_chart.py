"""The Helm chart charts/trainjob-operator: generated copies in sync, lint, golden renderings, schema-rejected
values, what each object must say, and (marked `cluster`) a real install plus the operator running under the
chart's own RBAC."""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from cluster_fixtures import wait_for
from operator_fixtures import Kube, free_port
from pss import restricted_violations
from trainjob_operator.config import OperatorConfig

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "trainjob-operator"
GOLDEN = Path(__file__).parent / "golden"
RUNTIME_NAMES = sorted(p.stem for p in (REPO / "runtimes").glob("*.yaml"))

FULL_VALUES: dict[str, Any] = {
    "replicas": 2,
    "commonLabels": {"team": "ml-platform"},
    "crds": {"enabled": True, "keep": False},
    "image": {"registry": "registry.example.com", "repository": "ml/trainjob-operator", "tag": "1.2.3"},
    "config": {
        "namespaces": ["team-a", "team-b"],
        "concurrency": 16,
        "log_level": "DEBUG",
        "webhook": {"port": 10250, "failure_policy": "Ignore", "cert_secret_name": "tjo-cert"},
        "health": {"port": 9090},
        "leader_election": {"lease_name": "tjo-leader", "lease_duration_seconds": 30},
    },
    "service": {"webhookPort": 8443, "metricsPort": 9090},
    "nodeSelector": {"kubernetes.io/os": "linux"},
    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "control-plane", "effect": "NoSchedule"}],
    "priorityClassName": "system-cluster-critical",
    "podDisruptionBudget": {"enabled": True, "minAvailable": 1},
    "metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}}},
    "runtimes": {
        "defaultEnabled": True,
        "imageOverrides": {"nvcr.io/nvidia/jax:25.10-py3": "mirror.example.com/jax:25.10-py3"},
    },
}
MINIMAL_VALUES: dict[str, Any] = {
    "crds": {"enabled": False},
    "serviceAccount": {"create": False, "name": "existing-sa"},
    "config": {"webhook": {"enabled": False}, "leader_election": {"enabled": False}},
    "publicConfigMap": {"enabled": False},
}
SCENARIOS = {"default": {}, "full": FULL_VALUES, "minimal": MINIMAL_VALUES}


def template(
    helm: str,
    values: dict[str, Any] | None = None,
    *args: str,
    release: str = "trainjob-operator",
    namespace: str = "kubeflow-system",
    tmp: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    cmd = [helm, "template", release, str(CHART), "--namespace", namespace, *args]
    if values:
        path = (tmp or Path("/tmp")) / f"values-{uuid.uuid4().hex[:8]}.yaml"
        path.write_text(yaml.safe_dump(values))
        cmd += ["--values", str(path)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_RENDERED: dict[str, list[dict[str, Any]]] = {}


def objects(helm: str, values: dict[str, Any] | None = None, tmp: Path | None = None) -> list[dict[str, Any]]:
    """The rendered objects (cached per values; callers must not modify them)."""
    key = json.dumps(values or {}, sort_keys=True)
    if key not in _RENDERED:
        result = template(helm, values, tmp=tmp)
        assert result.returncode == 0, result.stderr
        _RENDERED[key] = [d for d in yaml.load_all(result.stdout, Loader=Loader) if d]
    return copy.deepcopy(_RENDERED[key])


def find(objs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} found"
    return found[0]


def installed_runtimes(objs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """What the runtimes-installer Job applies (from its ConfigMap), by name."""
    maps = [o for o in objs if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-runtimes-installer")]
    if not maps:
        return {}
    (cm,) = maps
    return {d["metadata"]["name"]: d for d in yaml.safe_load_all(cm["data"]["runtimes.yaml"]) if d}


def kinds(objs: list[dict[str, Any]]) -> list[str]:
    return sorted(f"{o['kind']}/{o['metadata']['name']}" for o in objs)


def golden_text(stream: str) -> str:
    """The rendering with each CRD's (huge, generated) spec replaced by its digest."""
    docs = []
    for obj in (d for d in yaml.load_all(stream, Loader=Loader) if d):
        if obj["kind"] == "CustomResourceDefinition":
            digest = hashlib.sha256(json.dumps(obj["spec"], sort_keys=True).encode()).hexdigest()
            obj = {**obj, "spec": {"sha256": digest}}
        docs.append(yaml.safe_dump(obj, sort_keys=False, width=120))
    return "---\n".join(docs)


# --- generated copies (no helm needed) ----------------------------------------------------------------


def test_chart_copies_match_their_sources(sync_chart: ModuleType) -> None:
    """files/crds == crds/, files/runtimes == runtimes/, values.schema.json's config == OperatorConfig."""
    drift = sync_chart.stale(sync_chart.expected())
    assert drift == [], f"run hack/sync-chart-crds.py: {[str(p.relative_to(REPO)) for p in drift]}"


def test_sync_check_mode_reports_drift(sync_chart: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = tmp_path / "crds"
    fake.mkdir()
    (fake / "extra.yaml").write_text("kind: X\n")
    monkeypatch.setattr(sync_chart, "COPIES", ((fake, CHART / "files" / "crds"),))
    drift = sync_chart.stale(sync_chart.expected())
    assert CHART / "files" / "crds" / "extra.yaml" in drift  # missing copy
    assert CHART / "files" / "crds" / "trainer.kubeflow.org_trainjobs.yaml" in drift  # orphan copy


def test_values_validate_against_their_schema() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    jsonschema.validate(values, schema)
    for scenario in (FULL_VALUES, MINIMAL_VALUES):
        merged = copy.deepcopy(values)
        merged.update(scenario)
        jsonschema.validate(merged, schema)


def test_chart_app_version_is_the_package_version() -> None:
    import tomllib

    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert chart["appVersion"] == project["version"]


def test_default_config_is_a_valid_operator_config() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    OperatorConfig.model_validate(values["config"])


# --- helm lint and template ------------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_helm_lint(helm: str, scenario: str, tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump(SCENARIOS[scenario]))
    result = subprocess.run(
        [helm, "lint", "--strict", str(CHART), "--namespace", "kubeflow-system", "--values", str(values)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_golden(helm: str, scenario: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    result = template(helm, SCENARIOS[scenario], tmp=tmp_path)
    assert result.returncode == 0, result.stderr
    text = golden_text(result.stdout)
    path = GOLDEN / f"{scenario}.yaml"
    if os.environ.get("TRAINJOB_UPDATE_GOLDEN") == "1" or request.config.getoption("--update-golden", default=False):
        path.write_text(text)
        return
    assert path.exists(), f"no golden file {path.name}: run with TRAINJOB_UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"{path.name} differs: rerun with TRAINJOB_UPDATE_GOLDEN=1 and review the diff"


BAD_VALUES = {
    "negative replicas": {"replicas": -1},
    "unknown top-level key": {"replica": 1},
    "unknown config key": {"config": {"concurrency_limit": 3}},
    "config out of range": {"config": {"concurrency": 0}},
    "bad failure policy": {"config": {"webhook": {"failure_policy": "Maybe"}}},
    "bad log format": {"config": {"log_format": "xml"}},
    "runtime flag not a boolean": {"runtimes": {"torchDistributed": {"enabled": "yes"}}},
    "data cache namespace not a DNS label": {"dataCache": {"enabled": True, "namespaces": ["Team_A"]}},
    "unknown data cache key": {"dataCache": {"lws": {"install": True}}},
    "unknown runtime": {"runtimes": {"pytorchDistributed": {"enabled": True}}},
    "bad pull policy": {"image": {"pullPolicy": "Sometimes"}},
    "bad service port": {"service": {"webhookPort": 70000}},
    "label values must be strings": {"commonLabels": {"tier": 1}},
}


@pytest.mark.parametrize("case", sorted(BAD_VALUES))
def test_bad_values_fail(helm: str, case: str, tmp_path: Path) -> None:
    result = template(helm, BAD_VALUES[case], tmp=tmp_path)
    assert result.returncode != 0
    assert "values don't meet the specifications of the schema" in result.stderr, result.stderr


def test_default_objects(helm: str) -> None:
    objs = objects(helm)
    assert kinds(objs) == [
        "ClusterRole/trainjob-operator",
        "ClusterRoleBinding/trainjob-operator",
        "ConfigMap/kubeflow-trainer-public",
        "ConfigMap/trainjob-operator-config",
        "CustomResourceDefinition/clustertrainingruntimes.trainer.kubeflow.org",
        "CustomResourceDefinition/trainingruntimes.trainer.kubeflow.org",
        "CustomResourceDefinition/trainjobs.trainer.kubeflow.org",
        "Deployment/trainjob-operator",
        "Role/kubeflow-trainer-public",
        "Role/trainjob-operator",
        "RoleBinding/kubeflow-trainer-public",
        "RoleBinding/trainjob-operator",
        "Service/trainjob-operator",
        "ServiceAccount/trainjob-operator",
    ]
    for obj in objs:
        if obj["kind"] not in ("CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding"):
            assert obj["metadata"]["namespace"] == "kubeflow-system", obj["kind"]


def test_crds_are_the_generated_ones(helm: str) -> None:
    rendered = {o["metadata"]["name"]: o for o in objects(helm) if o["kind"] == "CustomResourceDefinition"}
    for path in sorted((REPO / "crds").glob("*.yaml")):
        (source,) = [d for d in yaml.safe_load_all(path.read_text()) if d]
        got = rendered.pop(source["metadata"]["name"])
        assert got["spec"] == source["spec"]
        assert got["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}
        assert got["metadata"]["labels"]["app.kubernetes.io/name"] == "trainjob-operator"
    assert rendered == {}


def test_deployment(helm: str) -> None:
    deploy = find(objects(helm), "Deployment")
    pod = deploy["spec"]["template"]["spec"]
    assert restricted_violations(pod) == []
    (ctr,) = pod["containers"]
    assert ctr["image"] == "trainjob-operator:0.1.0"
    assert ctr["args"] == ["run", "--config", "/etc/trainjob-operator/config.yaml"]
    assert ctr["securityContext"]["readOnlyRootFilesystem"] is True
    assert {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}} in ctr["env"]
    assert ctr["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert ctr["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    assert {p["name"]: p["containerPort"] for p in ctr["ports"]} == {"webhook": 9443, "health": 8081, "status": 10443}
    assert {m["mountPath"] for m in ctr["volumeMounts"]} == {"/tmp", "/etc/trainjob-operator"}
    assert {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}} in pod["volumes"]
    assert ctr["resources"]["requests"] and ctr["resources"]["limits"]
    assert pod["serviceAccountName"] == "trainjob-operator"


def test_service(helm: str) -> None:
    svc = find(objects(helm), "Service")
    assert {p["name"]: (p["port"], p["targetPort"]) for p in svc["spec"]["ports"]} == {
        "webhook": (443, "webhook"),
        "status": (10443, "status"),
        "http-metrics": (8081, "health"),
    }


def test_config_file_points_the_webhooks_at_the_service(helm: str) -> None:
    cm = find(objects(helm), "ConfigMap", "trainjob-operator-config")
    cfg = OperatorConfig.model_validate(yaml.safe_load(cm["data"]["config.yaml"]))
    assert cfg.operator_namespace == "kubeflow-system"
    assert (cfg.webhook.service_name, cfg.webhook.service_port) == ("trainjob-operator", 443)
    assert (cfg.webhook.host, cfg.health.host) == ("0.0.0.0", "0.0.0.0")
    assert (cfg.webhook.port, cfg.health.port) == (9443, 8081)
    assert (cfg.status_server.enabled, cfg.status_server.host, cfg.status_server.port) == (True, "0.0.0.0", 10443)
    assert cfg.leader_election.enabled and cfg.leader_election.lease_name == "trainer.kubeflow.org"


def test_full_values_flow_through(helm: str, tmp_path: Path) -> None:
    objs = objects(helm, FULL_VALUES, tmp=tmp_path)
    deploy = find(objs, "Deployment")
    pod = deploy["spec"]["template"]["spec"]
    (ctr,) = pod["containers"]
    assert deploy["spec"]["replicas"] == 2
    assert ctr["image"] == "registry.example.com/ml/trainjob-operator:1.2.3"
    assert {p["name"]: p["containerPort"] for p in ctr["ports"]} == {"webhook": 10250, "health": 9090, "status": 10443}
    assert pod["nodeSelector"] == {"kubernetes.io/os": "linux"} and pod["priorityClassName"]
    cfg = OperatorConfig.model_validate(
        yaml.safe_load(find(objs, "ConfigMap", "trainjob-operator-config")["data"]["config.yaml"])
    )
    assert cfg.namespaces == ["team-a", "team-b"] and cfg.concurrency == 16
    assert (cfg.webhook.port, cfg.webhook.service_port, cfg.webhook.failure_policy) == (10250, 8443, "Ignore")
    role = find(objs, "Role", "trainjob-operator")
    assert {
        "apiGroups": [""],
        "resources": ["secrets"],
        "resourceNames": ["tjo-cert"],
        "verbs": ["get", "update"],
    } in role["rules"]
    assert {
        "apiGroups": ["coordination.k8s.io"],
        "resources": ["leases"],
        "resourceNames": ["tjo-leader"],
        "verbs": ["get", "update"],
    } in role["rules"]
    assert find(objs, "PodDisruptionBudget")["spec"]["minAvailable"] == 1
    monitor = find(objs, "ServiceMonitor")
    assert monitor["spec"]["endpoints"][0]["port"] == "http-metrics"
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    crd = find(objs, "CustomResourceDefinition", "trainjobs.trainer.kubeflow.org")
    assert "annotations" not in crd["metadata"] and crd["metadata"]["labels"]["team"] == "ml-platform"
    runtimes = installed_runtimes(objs)
    assert sorted(runtimes) == RUNTIME_NAMES
    jax = runtimes["jax-distributed"]["spec"]["template"]["spec"]["replicatedJobs"][0]
    assert jax["template"]["spec"]["template"]["spec"]["containers"][0]["image"] == "mirror.example.com/jax:25.10-py3"


def test_minimal_values(helm: str, tmp_path: Path) -> None:
    objs = objects(helm, MINIMAL_VALUES, tmp=tmp_path)
    assert kinds(objs) == [
        "ClusterRole/trainjob-operator",
        "ClusterRoleBinding/trainjob-operator",
        "ConfigMap/trainjob-operator-config",
        "Deployment/trainjob-operator",
        # the status server (on) rotates its certificate Secret here; the SDK's ConfigMap is published here
        "Role/trainjob-operator",
        "RoleBinding/trainjob-operator",
        "Service/trainjob-operator",
    ]
    rules = find(objs, "ClusterRole")["rules"]
    assert not any("admissionregistration.k8s.io" in r["apiGroups"] for r in rules)
    assert find(objs, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"] == "existing-sa"
    assert find(objs, "ClusterRoleBinding")["subjects"][0]["name"] == "existing-sa"


def test_cluster_role_is_exactly_what_the_operator_uses(helm: str) -> None:
    rules = find(objects(helm), "ClusterRole")["rules"]
    granted = {(g, r, v) for rule in rules for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
    assert granted == {
        *{
            ("trainer.kubeflow.org", r, v)
            for r in ("trainjobs", "trainingruntimes", "clustertrainingruntimes")
            for v in ("get", "list", "watch")
        },
        ("trainer.kubeflow.org", "trainjobs", "delete"),  # ttlSecondsAfterFinished (issue 13)
        ("trainer.kubeflow.org", "trainjobs/status", "patch"),
        ("trainer.kubeflow.org", "trainjobs/finalizers", "update"),
        ("", "pods", "list"),  # the startup deadline (issue 13)
        ("", "pods", "watch"),  # STATE from the JobSets' pods (issue 27, runtime/health.py)
        ("kueue.x-k8s.io", "workloads", "list"),  # why Kueue suspended a TrainJob (issue 26, runtime/kueue.py)
        ("scheduling.k8s.io", "priorityclasses", "list"),  # the Volcano PriorityClass check in the webhook
        *{("jobset.x-k8s.io", "jobsets", v) for v in ("get", "list", "watch", "create", "patch", "delete")},
        # delete: a previous TrainJob's object under a child's name (issue 28), only that incarnation
        *{("", "configmaps", v) for v in ("get", "create", "patch", "delete")},
        # every Secret the operator writes is created once (MPI's SSH keys, Flux's CURVE keys): never patched
        *{("", "secrets", v) for v in ("get", "create", "delete")},
        *{
            (g, "podgroups", v)
            for g in ("scheduling.x-k8s.io", "scheduling.volcano.sh")
            for v in ("get", "create", "patch", "delete")
        },
        # The Workload API (issue 36, TrainJobWorkloadAwareScheduling): created once (so never patched, issue 33),
        # deleted as any child.
        *{("scheduling.k8s.io", r, v) for r in ("workloads", "podgroups") for v in ("get", "create", "delete")},
        # elastic PyTorch's rendezvous Service (issue 34): created once
        *{("", "services", v) for v in ("get", "create", "delete")},
        ("", "events", "create"),
        ("authentication.k8s.io", "tokenreviews", "create"),
        ("", "pods", "get"),
        *{
            ("admissionregistration.k8s.io", r, v)
            for r in ("validatingwebhookconfigurations", "mutatingwebhookconfigurations")
            # delete: taken away when the operator stops on a fatal error (components.remove_if_fatal)
            for v in ("get", "create", "patch", "delete")
        },
    }
    webhook_rules = [r for r in rules if r["apiGroups"] == ["admissionregistration.k8s.io"]]
    assert [(r["resources"], r["resourceNames"]) for r in webhook_rules] == [
        (["validatingwebhookconfigurations"], ["validator.trainer.kubeflow.org"]),
        (["mutatingwebhookconfigurations"], ["defaulter.trainer.kubeflow.org"]),
    ]
    assert not any("*" in r["verbs"] or "*" in r["resources"] for r in rules)


RBAC_SCENARIOS: dict[str, tuple[dict[str, Any], set[tuple[str, str | None]]]] = {
    # values, and the (verb, namespace) of Secret needs the values deliberately leave ungranted
    "default": ({}, set()),
    "watching two namespaces": ({"config": {"namespaces": ["team-a", "team-b"]}}, set()),
    "watching its own namespace too": ({"config": {"namespaces": ["kubeflow-system", "team-a"]}}, set()),
    "no Secrets (neither MPI nor Flux)": (
        {"rbac": {"secrets": False}},
        {(v, None) for v in ("get", "create", "delete")},
    ),
    "no Secrets, two namespaces": (
        {"rbac": {"secrets": False}, "config": {"namespaces": ["team-a", "team-b"]}},
        {(v, ns) for v in ("get", "create", "delete") for ns in ("team-a", "team-b")},
    ),
    "minimal": (MINIMAL_VALUES, set()),
    "no status server": ({"config": {"status_server": {"enabled": False}}}, set()),
    "webhooks and status server off": (
        {"config": {"webhook": {"enabled": False}, "status_server": {"enabled": False}}},
        set(),
    ),
    "metrics.auth.enabled": ({"config": {"metrics": {"auth": {"enabled": True}}}}, set()),
    "full": (FULL_VALUES, set()),
}


@pytest.mark.parametrize("scenario", list(RBAC_SCENARIOS))
def test_rbac_grants_every_permission_the_code_checks_and_nothing_else(
    helm: str, scenario: str, tmp_path: Path
) -> None:
    """Both ways, for each values: the needs are derived from the code's declarations (runtime/startup.py's
    permissions(): the plugins' child kinds and how each is written, the settings rendered into the config file),
    the grants from the rendered Roles and bindings as the API server evaluates them (rbac_check). Every need is
    granted where it is needed; no grant is broader than a need (cluster-wide where namespaces are listed, or
    unnamed where a name is used)."""
    from rbac_check import denied, grants, unused
    from trainjob_operator.controller.settings import plan_of
    from trainjob_operator.runtime import startup

    values, withheld = RBAC_SCENARIOS[scenario]
    objs = objects(helm, values, tmp=tmp_path)
    config = find(objs, "ConfigMap", "trainjob-operator-config")["data"]["config.yaml"]
    plan = plan_of(OperatorConfig.model_validate(yaml.safe_load(config)))
    needs = startup.permissions(plan)
    account = find(objs, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"]
    found = grants(objs, account, "kubeflow-system")
    missing = denied(found, needs)
    assert {(n.verb, n.namespace) for n in missing if n.resource == "secrets"} == withheld
    assert [n.describe() for n in missing if n.resource != "secrets"] == []
    assert unused(found, needs) == []
    assert not [g for g in found if g.resource == "secrets" and g.verb in ("patch", "list", "watch")]
    served = {api.group_version: frozenset({a.plural for a in startup.REQUIRED_APIS}) for api in startup.REQUIRED_APIS}
    decision = startup.decide(plan, startup.Facts(served=served, denied=tuple(missing)))
    assert decision.ok, decision.fatal  # withheld Secrets: a warning, the operator starts
    assert len(decision.warnings) == len(withheld)
    assert all("MPI SSH key Secrets" in w and "Flux CURVE" in w for w in decision.warnings)


def test_watched_namespaces_get_their_own_roles_and_nothing_namespaced_cluster_wide(helm: str, tmp_path: Path) -> None:
    objs = objects(helm, {"config": {"namespaces": ["team-a", "team-b"]}}, tmp=tmp_path)
    cluster = find(objs, "ClusterRole")["rules"]
    assert {r for rule in cluster for r in rule["resources"]} == {
        "clustertrainingruntimes",
        "tokenreviews",
        "validatingwebhookconfigurations",
        "mutatingwebhookconfigurations",
        "priorityclasses",
    }
    watched = [o for o in objs if o["kind"] in ("Role", "RoleBinding") and o["metadata"]["name"].endswith("-watched")]
    assert sorted((o["kind"], o["metadata"]["namespace"]) for o in watched) == [
        ("Role", "team-a"),
        ("Role", "team-b"),
        ("RoleBinding", "team-a"),
        ("RoleBinding", "team-b"),
    ]


def test_the_secrets_switch_drops_only_the_child_secret_rules(helm: str, tmp_path: Path) -> None:
    objs = objects(helm, {"rbac": {"secrets": False}}, tmp=tmp_path)
    assert not [r for r in find(objs, "ClusterRole")["rules"] if "secrets" in r["resources"]]
    own = [r for r in find(objs, "Role", "trainjob-operator")["rules"] if "secrets" in r["resources"]]
    assert own == [
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "resourceNames": ["trainjob-operator-webhook-cert"],
            "verbs": ["get", "update"],
        },
    ]


def test_metrics_auth_serves_tls_metrics_and_offers_a_reader_role(helm: str, tmp_path: Path) -> None:
    values = {"config": {"metrics": {"auth": {"enabled": True}}}, "metrics": {"serviceMonitor": {"enabled": True}}}
    objs = objects(helm, values, tmp=tmp_path)
    ports = {p["name"]: p for p in find(objs, "Service")["spec"]["ports"]}
    assert "http-metrics" not in ports and ports["https-metrics"]["port"] == 8443
    (endpoint,) = find(objs, "ServiceMonitor")["spec"]["endpoints"]
    assert (endpoint["port"], endpoint["scheme"]) == ("https-metrics", "https")
    assert endpoint["tlsConfig"]["serverName"] == "trainjob-operator.kubeflow-system.svc"
    assert find(objs, "ClusterRole", "trainjob-operator-metrics-reader")["rules"] == [
        {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}
    ]
    assert "trainjob-operator-metrics-reader" not in {
        o["roleRef"]["name"] for o in objs if o["kind"] in ("ClusterRoleBinding", "RoleBinding")
    }
    assert "metrics-reader" not in str([o["metadata"]["name"] for o in objects(helm) if o["kind"] == "ClusterRole"])


def test_network_policy_admits_only_the_serving_ports(helm: str, tmp_path: Path) -> None:
    assert not [o for o in objects(helm) if o["kind"] == "NetworkPolicy"]
    prometheus = [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]
    objs = objects(
        helm,
        {
            "networkPolicy": {"enabled": True, "metricsFrom": prometheus},
            "config": {"metrics": {"auth": {"enabled": True}}},
        },
        tmp=tmp_path,
    )
    policy = find(objs, "NetworkPolicy")["spec"]
    assert policy["policyTypes"] == ["Ingress"]
    assert policy["podSelector"]["matchLabels"] == find(objs, "Deployment")["spec"]["selector"]["matchLabels"] | {
        "app.kubernetes.io/component": "controller"
    }
    container = find(objs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert sorted(p["port"] for rule in policy["ingress"] for p in rule["ports"]) == sorted(
        p["containerPort"] for p in container["ports"]
    )
    by_port = {rule["ports"][0]["port"]: rule.get("from") for rule in policy["ingress"]}
    assert by_port == {9443: None, 10443: None, 8443: prometheus, 8081: None}


def test_status_server_off_drops_its_port_and_rbac(helm: str, tmp_path: Path) -> None:
    objs = objects(helm, {"config": {"status_server": {"enabled": False}}}, tmp=tmp_path)
    assert "status" not in {p["name"] for p in find(objs, "Service")["spec"]["ports"]}
    rules = find(objs, "ClusterRole")["rules"]
    assert not any("authentication.k8s.io" in r["apiGroups"] for r in rules)
    # `get` on pods is the status server's; `list` stays for the startup deadline (issue 13), `watch` for STATE
    assert [r["verbs"] for r in rules if "pods" in r["resources"]] == [["list", "watch"]]


def test_grafana_dashboard_is_off_by_default_and_the_shipped_json_when_on(helm: str, tmp_path: Path) -> None:
    assert not [o for o in objects(helm) if o["metadata"]["name"].endswith("-dashboard")]
    cm = find(
        objects(helm, {"metrics": {"grafanaDashboard": {"enabled": True}}}, tmp=tmp_path),
        "ConfigMap",
        "trainjob-operator-dashboard",
    )
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    shipped = Path(__file__).resolve().parents[2] / "charts/trainjob-operator/files/dashboards/trainjob-operator.json"
    assert json.loads(cm["data"]["trainjob-operator.json"]) == json.loads(shipped.read_text())


def test_public_configmap_is_readable_by_every_authenticated_user(helm: str) -> None:
    objs = objects(helm)
    cm = find(objs, "ConfigMap", "kubeflow-trainer-public")
    assert cm["data"] == {"kubeflow_trainer_version": "v2.3.0"}
    role = find(objs, "Role", "kubeflow-trainer-public")
    assert role["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "resourceNames": ["kubeflow-trainer-public"],
            "verbs": ["get", "list", "watch"],
        }
    ]
    binding = find(objs, "RoleBinding", "kubeflow-trainer-public")
    assert binding["subjects"] == [
        {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "system:authenticated"}
    ]


def test_runtimes_are_off_by_default(helm: str) -> None:
    objs = objects(helm)
    assert installed_runtimes(objs) == {}
    assert not [o for o in objs if "runtimes-installer" in o["metadata"]["name"]]


def test_runtimes_installer(helm: str) -> None:
    objs = objects(helm, {"runtimes": {"defaultEnabled": True}})
    name = "trainjob-operator-runtimes-installer"
    job = find(objs, "Job", name)
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "post-install,post-upgrade"
    pod = job["spec"]["template"]["spec"]
    assert restricted_violations(pod) == []
    assert pod["serviceAccountName"] == name
    assert (
        pod["containers"][0]["image"] == find(objs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["image"]
    )
    assert pod["containers"][0]["command"] == [
        "python",
        "/runtimes/install-runtimes.py",
        "/runtimes/runtimes.yaml",
        "trainjob-operator",
    ]
    script = find(objs, "ConfigMap", name)["data"]["install-runtimes.py"]
    assert script == (CHART / "files" / "scripts" / "install-runtimes.py").read_text()
    assert find(objs, "ClusterRole", name)["rules"] == [
        {
            "apiGroups": ["trainer.kubeflow.org"],
            "resources": ["clustertrainingruntimes"],
            "verbs": ["list", "create", "patch", "delete"],
        }
    ]
    assert find(objs, "ClusterRoleBinding", name)["subjects"][0]["name"] == name
    # the installer's identity and its cluster-wide role are hooks: made before the Job, deleted with it
    for kind in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Job"):
        annotations = find(objs, kind, name)["metadata"]["annotations"]
        assert annotations["helm.sh/hook"] == "post-install,post-upgrade"
        assert annotations["helm.sh/hook-delete-policy"] == "before-hook-creation,hook-succeeded"
        assert int(annotations["helm.sh/hook-weight"]) == (0 if kind == "Job" else -1)


@pytest.mark.parametrize(
    ("flag", "name"),
    [
        ("torchDistributed", "torch-distributed"),
        ("deepspeedDistributed", "deepspeed-distributed"),
        ("mlxDistributed", "mlx-distributed"),
        ("jaxDistributed", "jax-distributed"),
        ("xgboostDistributed", "xgboost-distributed"),
        ("tensorflowDistributed", "tensorflow-distributed"),
        ("horovodDistributed", "horovod-distributed"),
        ("torchtuneDistributed.llama3_2_1B", "torchtune-llama3.2-1b"),
        ("torchtuneDistributed.llama3_2_3B", "torchtune-llama3.2-3b"),
        ("torchtuneDistributed.qwen2_5_1_5B", "torchtune-qwen2.5-1.5b"),
    ],
)
def test_each_runtime_has_its_own_toggle(helm: str, flag: str, name: str) -> None:
    result = template(helm, None, "--set", f"runtimes.{flag}.enabled=true", "--set", "crds.enabled=false")
    assert result.returncode == 0, result.stderr
    (rt,) = installed_runtimes([d for d in yaml.safe_load_all(result.stdout) if d]).values()
    source = yaml.safe_load((REPO / "runtimes" / f"{name}.yaml").read_text())
    assert rt["spec"] == source["spec"]
    assert rt["metadata"]["name"] == name
    labels = rt["metadata"]["labels"]
    assert labels["trainer.kubeflow.org/framework"] == source["metadata"]["labels"]["trainer.kubeflow.org/framework"]
    assert labels["trainer.kubeflow.org/webhook-validation"] == "disabled"
    assert labels["trainer.kubeflow.org/managed-by"] == "runtimes-installer"
    assert labels["app.kubernetes.io/instance"] == "trainjob-operator"


# --- the data cache (opt-in) -----------------------------------------------------------------------------

CACHE_ROLE = "kubeflow-trainer-cache-initializer"


def test_data_cache_is_off_by_default_and_not_a_default_runtime(helm: str) -> None:
    for values in (None, {"runtimes": {"defaultEnabled": True}}):
        objs = objects(helm, values)
        assert "torch-distributed-with-cache" not in installed_runtimes(objs)
        assert not [o for o in objs if o["metadata"]["name"] == CACHE_ROLE]


def test_data_cache_installs_the_runtime_and_the_initializers_rbac(helm: str, tmp_path: Path) -> None:
    values = {
        "dataCache": {
            "enabled": True,
            "namespaces": ["team-a", "team-b"],
            "cacheImage": {"registry": "mirror.example.com", "repository": "kf/data-cache", "tag": "v9"},
        }
    }
    objs = objects(helm, values, tmp=tmp_path)
    assert sorted(installed_runtimes(objs)) == ["torch-distributed-with-cache"]
    runtime = installed_runtimes(objs)["torch-distributed-with-cache"]
    source = yaml.safe_load((REPO / "runtimes" / "data-cache" / "torch-distributed-with-cache.yaml").read_text())
    init = source["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    init["containers"][0]["env"][0]["value"] = "mirror.example.com/kf/data-cache:v9"
    assert runtime["spec"] == source["spec"]
    assert runtime["metadata"]["labels"]["trainer.kubeflow.org/managed-by"] == "runtimes-installer"
    role = find(objs, "ClusterRole", CACHE_ROLE)
    assert role["rules"] == [
        {"apiGroups": ["trainer.kubeflow.org"], "resources": ["trainjobs"], "verbs": ["get"]},
        {
            "apiGroups": ["leaderworkerset.x-k8s.io"],
            "resources": ["leaderworkersets"],
            "verbs": ["create", "get", "list", "watch"],
        },
        {"apiGroups": [""], "resources": ["services"], "verbs": ["create", "get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["create", "delete", "get", "list", "watch"]},
    ]
    for ns in ("team-a", "team-b"):
        accounts = [
            o
            for o in objs
            if o["kind"] == "ServiceAccount"
            and o["metadata"]["name"] == CACHE_ROLE
            and o["metadata"]["namespace"] == ns
        ]
        assert len(accounts) == 1
        (binding,) = [
            o
            for o in objs
            if o["kind"] == "RoleBinding" and o["metadata"]["name"] == CACHE_ROLE and o["metadata"]["namespace"] == ns
        ]
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": CACHE_ROLE,
        }
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": CACHE_ROLE, "namespace": ns}]


# --- kustomize manifests rendered from the chart ---------------------------------------------------------


def test_manifests_are_rendered_from_the_chart(helm: str, render_manifests: ModuleType) -> None:
    drift = render_manifests.stale(render_manifests.expected(helm=helm))
    assert drift == [], f"run hack/render-manifests.py: {[str(p.relative_to(REPO)) for p in drift]}"


def _kustomize(kubectl: str, path: Path) -> list[dict[str, Any]]:
    result = subprocess.run([kubectl, "kustomize", str(path)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


@pytest.fixture(scope="session")
def kubectl_bin(render_manifests: ModuleType) -> str:
    bin_dir = subprocess.run(
        ["bash", str(REPO / "hack" / "harness" / "tools" / "build.sh"), "--print-bin-dir"],
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout.strip()
    path = Path(bin_dir) / "kubectl"
    if not path.exists():
        pytest.skip("kubectl not built: make tools")
    return str(path)


def test_kustomize_builds_what_helm_renders(helm: str, kubectl_bin: str, render_manifests: ModuleType) -> None:
    want = [
        o
        for _, o in render_manifests.kustomize_objects(
            render_manifests.helm_template(*render_manifests.VALUES, helm=helm)
        )
    ]
    got = _kustomize(kubectl_bin, REPO / "manifests" / "overlays" / "default") + _kustomize(
        kubectl_bin, REPO / "manifests" / "overlays" / "runtimes"
    )
    namespaces = [o for o in got if o["kind"] == "Namespace"]
    assert [o["metadata"]["name"] for o in namespaces] == ["kubeflow-system"]
    got = [o for o in got if o["kind"] != "Namespace"]

    def key(o: dict[str, Any]) -> str:
        return f"{o['kind']}/{o['metadata'].get('namespace', '')}/{o['metadata']['name']}"

    assert sorted(map(key, got)) == sorted(map(key, want))
    by_key = {key(o): o for o in got}
    for obj in want:
        assert by_key[key(obj)] == obj, key(obj)


def test_kustomize_data_cache_overlay_builds_what_helm_renders(
    helm: str, kubectl_bin: str, render_manifests: ModuleType
) -> None:
    want = [
        o
        for _, o in render_manifests.data_cache_objects(
            render_manifests.helm_template(*render_manifests.DATA_CACHE_VALUES, helm=helm)
        )
    ]
    got = _kustomize(kubectl_bin, REPO / "manifests" / "overlays" / "data-cache")
    assert sorted(f"{o['kind']}/{o['metadata']['name']}" for o in got) == [
        "ClusterRole/kubeflow-trainer-cache-initializer",
        "ClusterTrainingRuntime/torch-distributed-with-cache",
        "RoleBinding/kubeflow-trainer-cache-initializer",
        "ServiceAccount/kubeflow-trainer-cache-initializer",
    ]
    assert sorted(got, key=json.dumps) == sorted(want, key=json.dumps)


# --- the real API server ---------------------------------------------------------------------------------


def _installer_identity(helm: str, cluster: Any, release: dict[str, str]) -> list[dict[str, Any]]:
    """The hook Job's ServiceAccount, ClusterRole and binding as the release rendered them (`helm get hooks`):
    Helm deleted them with the Job (issue 33), so a run of the installer here makes them again and removes them."""
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig)}
    hooks = subprocess.run(
        [helm, "get", "hooks", release["name"], "--namespace", release["namespace"]],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert hooks.returncode == 0, hooks.stderr
    objs = [d for d in yaml.safe_load_all(hooks.stdout) if d]
    assert sorted(o["kind"] for o in objs) == ["ClusterRole", "ClusterRoleBinding", "Job", "ServiceAccount"]
    return [o for o in objs if o["kind"] != "Job"]


def _run_installer(
    kube: Kube, cluster: Any, release: dict[str, str], runtimes: str, tmp: Path, helm: str | None = None
) -> str:
    """What the chart's post-install Job runs, run here (kwok never executes pods) under the Job's own
    ServiceAccount and RBAC (the release's hook objects, made for the run and removed after it), with the script
    and runtimes from the rendered ConfigMap."""
    name, ns = release["name"], release["namespace"]
    installer = f"{name}-runtimes-installer"
    cm = kube.get("configmap", installer, ns)
    assert cm is not None
    script, data = tmp / "install-runtimes.py", tmp / "runtimes.yaml"
    script.write_text(cm["data"]["install-runtimes.py"])
    data.write_text(runtimes or cm["data"]["runtimes.yaml"])
    identity = _installer_identity(helm or release["helm"], cluster, release)
    kube.apply(*identity, namespace=ns)
    try:
        config = tmp / "installer.kubeconfig"
        _token_kubeconfig(cluster, kube, installer, ns, config)
        env = {**os.environ, "KUBECONFIG": str(config)}
        result = subprocess.run(
            [sys.executable, str(script), str(data), name], capture_output=True, text=True, timeout=120, env=env
        )
    finally:
        for obj in identity:
            kube.run(
                "delete", obj["kind"].lower(), obj["metadata"]["name"], "-n", ns, "--ignore-not-found", check=False
            )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def release(helm: str, cluster: Any, kube: Kube, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The chart installed into a fresh namespace with every runtime enabled (CRDs taken over if another test
    applied them already), and the runtimes installed the way its post-install Job does."""
    tmp = tmp_path_factory.mktemp("release")
    suffix = uuid.uuid4().hex[:6]
    name, ns = f"tjo-{suffix}", f"tjo-chart-{suffix}"
    values = tmp / "values.yaml"
    values.write_text(yaml.safe_dump({"fullnameOverride": name, "runtimes": {"defaultEnabled": True}}))
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig)}
    info = {"name": name, "namespace": ns, "helm": helm}
    try:  # cleans up after a failed install too
        result = subprocess.run(
            [
                helm,
                "install",
                name,
                str(CHART),
                "--namespace",
                ns,
                "--create-namespace",
                "--take-ownership",
                "--values",
                str(values),
                "--timeout",
                "120s",
            ],
            capture_output=True,
            text=True,
            timeout=180,
            env=env,
        )
        assert result.returncode == 0, result.stderr
        _run_installer(kube, cluster, info, "", tmp)
        yield info
    finally:
        subprocess.run(
            [helm, "uninstall", name, "--namespace", ns, "--wait=false"], capture_output=True, timeout=120, env=env
        )
        kube.run("delete", "namespace", ns, "--wait=false", "--ignore-not-found", check=False)
        kube.run(
            "delete",
            "clustertrainingruntimes",
            "-l",
            f"app.kubernetes.io/instance={name}",
            "--ignore-not-found",
            check=False,
        )


@pytest.mark.cluster
def test_install_is_accepted_by_the_api_server(release: dict[str, str], kube: Kube, helm: str, cluster: Any) -> None:
    ns, name = release["namespace"], release["name"]
    for crd in ("trainjobs", "trainingruntimes", "clustertrainingruntimes"):
        kube.run("wait", "--for=condition=Established", f"crd/{crd}.trainer.kubeflow.org", "--timeout=60s")
    runtimes = {
        o["metadata"]["name"]
        for o in json.loads(
            kube.run("get", "clustertrainingruntimes", "-l", f"app.kubernetes.io/instance={name}", "-o", "json").stdout
        )["items"]
    }
    assert sorted(runtimes) == RUNTIME_NAMES
    # the post-install hook Job ran (kwok completes it) and was deleted on success, its identity with it
    assert kube.get("job", f"{name}-runtimes-installer", ns) is None
    assert kube.get("serviceaccount", f"{name}-runtimes-installer", ns) is None
    assert kube.get("clusterrole", f"{name}-runtimes-installer") is None
    assert kube.get("clusterrolebinding", f"{name}-runtimes-installer") is None
    for kind, obj in (
        ("deployment", name),
        ("service", name),
        ("serviceaccount", name),
        ("configmap", f"{name}-config"),
        ("configmap", "kubeflow-trainer-public"),
        ("role", name),
        ("rolebinding", name),
    ):
        assert kube.get(kind, obj, ns) is not None, f"{kind}/{obj}"
    assert kube.get("clusterrole", name) is not None and kube.get("clusterrolebinding", name) is not None
    # the Deployment's pod is admitted and scheduled (kwok nodes "run" it; the image is never pulled)
    wait_for(
        lambda: [p for p in kube.items("pods", ns) if (p.get("spec") or {}).get("nodeName")],
        timeout=60,
        what="the operator pod scheduled",
    )
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig)}
    status = subprocess.run(
        [helm, "status", name, "--namespace", ns, "-o", "json"], capture_output=True, text=True, timeout=60, env=env
    )
    assert json.loads(status.stdout)["info"]["status"] == "deployed"


@pytest.mark.cluster
def test_runtimes_installer_applies_and_prunes(
    release: dict[str, str], kube: Kube, cluster: Any, tmp_path: Path
) -> None:
    ns, name = release["namespace"], release["name"]
    cm = kube.get("configmap", f"{name}-runtimes-installer", ns)
    assert cm is not None
    every = cm["data"]["runtimes.yaml"]
    torch_only = "---\n" + (REPO / "runtimes" / "torch-distributed.yaml").read_text()
    selector = f"app.kubernetes.io/instance={name},trainer.kubeflow.org/managed-by=runtimes-installer"

    def names() -> list[str]:
        items = json.loads(kube.run("get", "clustertrainingruntimes", "-l", selector, "-o", "json").stdout)["items"]
        return sorted(o["metadata"]["name"] for o in items)

    try:
        out = _run_installer(kube, cluster, release, torch_only, tmp_path)
        assert names() == ["torch-distributed"]
        assert out.count("pruned") == len(RUNTIME_NAMES) - 1
        # what the API server stored is what the chart rendered (nothing pruned by the schema)
        stored = kube.get("clustertrainingruntime", "torch-distributed")
        assert stored is not None
        assert _contains(
            stored["spec"], yaml.safe_load((REPO / "runtimes" / "torch-distributed.yaml").read_text())["spec"]
        )
    finally:
        _run_installer(kube, cluster, release, every, tmp_path)
    assert names() == RUNTIME_NAMES


@pytest.mark.cluster
def test_authenticated_users_can_read_the_public_configmap(release: dict[str, str], kube: Kube) -> None:
    ns = release["namespace"]
    allowed = kube.run(
        "auth",
        "can-i",
        "get",
        "configmap/kubeflow-trainer-public",
        "-n",
        ns,
        "--as",
        "system:serviceaccount:default:default",
        check=False,
    )
    assert allowed.stdout.strip() == "yes"
    other = kube.run(
        "auth",
        "can-i",
        "get",
        "configmap/other",
        "-n",
        ns,
        "--as",
        "system:serviceaccount:default:default",
        check=False,
    )
    assert other.stdout.strip() == "no"


def _pod_from(template_spec: dict[str, Any], name: str) -> dict[str, Any]:
    """A Pod of a JobSet pod template; volumes of volumeClaimPolicies are added as JobSet does (PVCs)."""
    spec = copy.deepcopy(template_spec)
    have = {v["name"] for v in spec.get("volumes") or []}
    for ctr in spec.get("initContainers", []) + spec.get("containers", []):
        for mount in ctr.get("volumeMounts") or []:
            if mount["name"] not in have:
                have.add(mount["name"])
                spec.setdefault("volumes", []).append(
                    {"name": mount["name"], "persistentVolumeClaim": {"claimName": f"{mount['name']}-{name}"}}
                )
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def _contains(stored: Any, source: Any) -> bool:
    """`stored` holds everything `source` says (the API server may add defaults)."""
    if isinstance(source, dict):
        return isinstance(stored, dict) and all(k in stored and _contains(stored[k], v) for k, v in source.items())
    if isinstance(source, list):
        return (
            isinstance(stored, list)
            and len(stored) == len(source)
            and all(_contains(a, b) for a, b in zip(stored, source, strict=True))
        )
    return bool(stored == source)


@pytest.mark.cluster
def test_runtime_pods_pass_the_api_servers_restricted_pod_security(cluster: Any, kube: Kube, helm: str) -> None:
    """The API server's own PodSecurity admission agrees with tests/pss.py: every runtime pod, the operator pod
    and the runtime installer pod are admitted in an enforce=restricted namespace; an unhardened pod is refused."""
    sys.path.insert(0, str(REPO / "tests" / "unit" / "shipped"))
    import test_runtimes as rt

    ns = f"tjo-pss-{uuid.uuid4().hex[:6]}"
    kube.run("create", "namespace", ns)
    try:
        kube.run(
            "label",
            "namespace",
            ns,
            "pod-security.kubernetes.io/enforce=restricted",
            "pod-security.kubernetes.io/enforce-version=latest",
        )
        for name in RUNTIME_NAMES:
            for job, spec in rt.pod_specs(rt.jobset_of(rt.render(name))).items():
                pod = _pod_from(spec, f"{name}-{job}".replace(".", "-"))
                result = kube.run("create", "--dry-run=server", "-n", ns, "-f", "-", stdin=json.dumps(pod), check=False)
                assert result.returncode == 0, f"{name}/{job}: {result.stderr}"
        chart = objects(helm, {"runtimes": {"defaultEnabled": True}})
        for kind, pod_name in (("Deployment", "operator"), ("Job", "installer")):
            spec = find(chart, kind)["spec"]["template"]["spec"]
            pod = _pod_from(spec, pod_name)
            pod["spec"]["serviceAccountName"] = "default"
            result = kube.run("create", "--dry-run=server", "-n", ns, "-f", "-", stdin=json.dumps(pod), check=False)
            assert result.returncode == 0, f"{kind}: {result.stderr}"
        bad = _pod_from({"containers": [{"name": "node", "image": "x"}]}, "unhardened")
        refused = kube.run("create", "--dry-run=server", "-n", ns, "-f", "-", stdin=json.dumps(bad), check=False)
        assert refused.returncode != 0 and "violates PodSecurity" in refused.stderr
        assert restricted_violations(bad["spec"])
    finally:
        kube.run("delete", "namespace", ns, "--wait=false", "--ignore-not-found", check=False)


@pytest.mark.cluster
def test_full_values_are_accepted_by_the_api_server(helm: str, kube: Kube, tmp_path: Path) -> None:
    """Every object of the fullest rendering (but the ServiceMonitor, whose CRD this cluster lacks, and the CRDs,
    already there) passes a server-side dry-run with strict field validation."""
    ns = f"tjo-full-{uuid.uuid4().hex[:6]}"
    kube.run("create", "namespace", ns)
    watched: list[str] = []
    try:
        result = template(helm, FULL_VALUES, release="tjo-full", namespace=ns, tmp=tmp_path)
        assert result.returncode == 0, result.stderr
        docs = [
            d
            for d in yaml.safe_load_all(result.stdout)
            if d and d["kind"] not in ("ServiceMonitor", "CustomResourceDefinition")
        ]
        assert len(docs) > 15
        # the watched namespaces' Roles and RoleBindings (config.namespaces, issue 33) need their namespaces
        watched = sorted({d["metadata"].get("namespace") for d in docs} - {ns, None})
        for other in watched:
            kube.run("create", "namespace", other, check=False)
        applied = kube.run(
            "apply",
            "--dry-run=server",
            "--validate=strict",
            "--server-side",
            "-f",
            "-",
            stdin=yaml.safe_dump_all(docs),
            check=False,
        )
        assert applied.returncode == 0, applied.stderr
    finally:
        for name in [ns, *watched]:
            kube.run("delete", "namespace", name, "--wait=false", "--ignore-not-found", check=False)


@pytest.mark.cluster
def test_data_cache_objects_are_accepted_by_the_api_server(
    helm: str, kube: Kube, installed: None, tmp_path: Path
) -> None:
    """The data cache's RBAC (in a namespace of dataCache.namespaces) and its runtime pass a strict server-side
    dry-run; the runtime also passes our runtime webhook when the operator runs (tests/e2e/test_sdk.py)."""
    ns = f"tjo-cache-{uuid.uuid4().hex[:6]}"
    kube.run("create", "namespace", ns)
    try:
        objs = objects(
            helm, {"dataCache": {"enabled": True, "namespaces": [ns]}, "crds": {"enabled": False}}, tmp=tmp_path
        )
        docs = [o for o in objs if o["metadata"]["name"] == CACHE_ROLE]
        docs += list(installed_runtimes(objs).values())
        assert sorted(o["kind"] for o in docs) == [
            "ClusterRole",
            "ClusterTrainingRuntime",
            "RoleBinding",
            "ServiceAccount",
        ]
        applied = kube.run(
            "apply",
            "--dry-run=server",
            "--validate=strict",
            "--server-side",
            "-f",
            "-",
            stdin=yaml.safe_dump_all(docs),
            check=False,
        )
        assert applied.returncode == 0, applied.stderr
    finally:
        kube.run("delete", "namespace", ns, "--wait=false", "--ignore-not-found", check=False)


def _token_kubeconfig(cluster: Any, kube: Kube, sa: str, ns: str, path: Path) -> None:
    admin = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    context = next(c for c in admin["contexts"] if c["name"] == admin["current-context"])["context"]
    server = next(c for c in admin["clusters"] if c["name"] == context["cluster"])["cluster"]
    token = kube.run("create", "token", sa, "-n", ns, "--duration", "1h").stdout.strip()
    server = dict(server)
    if "certificate-authority" in server:  # inline it, so the file stands alone
        server["certificate-authority-data"] = base64.b64encode(
            Path(server.pop("certificate-authority")).read_bytes()
        ).decode()
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "sa",
                "clusters": [{"name": "local", "cluster": server}],
                "users": [{"name": sa, "user": {"token": token}}],
                "contexts": [{"name": "sa", "context": {"cluster": "local", "user": sa, "namespace": ns}}],
            }
        )
    )


@pytest.mark.cluster
@pytest.mark.timeout(420)
def test_operator_runs_under_the_charts_rbac(
    release: dict[str, str], cluster: Any, kube: Kube, namespace: str, tmp_path: Path
) -> None:
    """`trainjob-operator run` with the chart's ServiceAccount token and the chart's config (URL-mode webhooks on
    127.0.0.1 instead of the Service): webhooks, leader election, TrainJobs of a torch and an MPI runtime
    reconcile to JobSets, and no request is forbidden."""
    ns, name = release["namespace"], release["name"]
    sa_config = tmp_path / "sa.kubeconfig"
    _token_kubeconfig(cluster, kube, name, ns, sa_config)
    cm = kube.get("configmap", f"{name}-config", ns)
    assert cm is not None
    cfg = yaml.safe_load(cm["data"]["config.yaml"])
    health_port, webhook_port, status_port = free_port(), free_port(), free_port()
    cfg["webhook"].update(host="127.0.0.1", port=webhook_port, service_name=None)
    cfg["status_server"].update(host="127.0.0.1", port=status_port)
    cfg["health"].update(host="127.0.0.1", port=health_port)
    cfg["leader_election"].update(lease_duration_seconds=4, renew_deadline_seconds=3, retry_period_seconds=1)
    cfg["log_format"] = "json"
    config_path = tmp_path / "config.yaml"
    config_path.write_text(yaml.safe_dump(cfg))
    log_path = tmp_path / "operator.log"
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "POD_NAMESPACE")}
    with log_path.open("wb") as log_file:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "trainjob_operator.cli",
                "run",
                "--kubeconfig",
                str(sa_config),
                "--config",
                str(config_path),
            ],
            stdout=log_file,
            stderr=subprocess.STDOUT,
            cwd=REPO,
            env=env,
        )
    try:
        import urllib.request

        def ready() -> bool:
            assert proc.poll() is None, log_path.read_text()[-4000:]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{health_port}/readyz", timeout=2) as resp:
                    return resp.status == 200
            except OSError:
                return False

        def leader() -> bool:
            with urllib.request.urlopen(f"http://127.0.0.1:{health_port}/metrics", timeout=2) as resp:
                return "trainjob_operator_leader 1.0" in resp.read().decode()

        wait_for(ready, timeout=90, what="operator readiness under the chart's ServiceAccount")
        wait_for(leader, timeout=30, what="leadership (Lease create/get/update)")
        jobs = {"torch": "torch-distributed", "mpi": "deepspeed-distributed"}
        for job, runtime in jobs.items():
            kube.create(
                {
                    "apiVersion": "trainer.kubeflow.org/v1alpha1",
                    "kind": "TrainJob",
                    "metadata": {"name": job, "namespace": namespace},
                    "spec": {"runtimeRef": {"name": runtime}, "trainer": {"numNodes": 2}},
                }
            )
        for job in jobs:
            wait_for(lambda job=job: kube.get("jobset", job, namespace), timeout=60, what=f"JobSet {job}")
        assert kube.get("secret", "mpi-mpi-ssh-auth", namespace) is not None
        assert kube.get("configmap", "mpi-mpi-hostfile", namespace) is not None

        def status_written() -> bool:
            obj = kube.get("trainjob", "torch", namespace)
            return bool(
                ((obj or {}).get("status") or {}).get("conditions") or ((obj or {}).get("status") or {}).get("state")
            )

        wait_for(status_written, timeout=60, what="TrainJob status (trainjobs/status patch)")
        assert kube.get("secret", cfg["webhook"]["cert_secret_name"], ns) is not None
        assert kube.get("validatingwebhookconfiguration", cfg["webhook"]["validating_name"]) is not None
    except BaseException as err:
        raise AssertionError(f"{err}\n--- operator log (tail) ---\n{log_path.read_text()[-5000:]}") from err
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        for kind, obj in (
            ("validatingwebhookconfiguration", cfg["webhook"]["validating_name"]),
            ("mutatingwebhookconfiguration", cfg["webhook"]["mutating_name"]),
        ):
            kube.delete(kind, obj)
    log = log_path.read_text()
    denied = [
        line
        for line in log.splitlines()
        # whole words: a random port such as 40341 is no 403
        if re.search(r"forbidden|permission|unauthorized|\b40[13]\b", line.lower())
    ]
    if os.environ.get("TRAINJOB_KEEP_OPERATOR_LOG"):  # for a look at what the operator did
        Path(os.environ["TRAINJOB_KEEP_OPERATOR_LOG"]).write_text(log)
    assert denied == [], "\n".join(denied[:20])
    # and nothing more than that: a few things the operator must not be able to do
    who = f"system:serviceaccount:{ns}:{name}"
    # (`delete` on trainjobs is granted now: the TTL deletes the finished TrainJob itself, issue 13)
    for verb, resource, extra in (
        ("list", "secrets", []),
        ("update", "trainjobs", []),
        ("create", "pods", []),
        ("update", "leases", ["-n", namespace]),
        ("delete", "clustertrainingruntimes", []),
    ):
        answer = kube.run("auth", "can-i", verb, resource, "--as", who, *extra, check=False).stdout.strip()
        assert answer == "no", f"{verb} {resource}"


SDK_SCRIPT = """
import json, logging, sys
from kubeflow.common.types import KubernetesBackendConfig
from kubeflow.trainer import TrainerClient

records = []
handler = logging.Handler()
handler.emit = lambda record: records.append(record.getMessage())
logging.getLogger().addHandler(handler)
logging.getLogger().setLevel(logging.WARNING)
client = TrainerClient(KubernetesBackendConfig(namespace=sys.argv[2], config_file=sys.argv[1]))
runtimes = {rt.name: [rt.trainer.framework, rt.trainer.trainer_type.value, rt.trainer.image, rt.trainer.num_nodes,
                      rt.trainer.device, rt.trainer.device_count] for rt in client.list_runtimes()}
default = client.get_runtime("torch-distributed")
print(json.dumps({"runtimes": runtimes, "default": default.name, "warnings": records}))
"""


@pytest.mark.cluster
def test_the_kubeflow_sdk_lists_the_installed_runtimes(
    release: dict[str, str], cluster: Any, kube: Kube, namespace: str
) -> None:
    """The unmodified SDK against the real API server: verify_backend finds kubeflow-trainer-public (no warning),
    list_runtimes parses every installed runtime as stored (CRD defaults included), get_runtime finds the default."""
    pytest.importorskip("kubeflow.trainer")
    env = {**os.environ, "KUBEFLOW_SYSTEM_NAMESPACE": release["namespace"]}
    result = subprocess.run(
        [sys.executable, "-c", SDK_SCRIPT, str(cluster.kubeconfig), namespace],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen["warnings"] == []
    assert seen["default"] == "torch-distributed"
    runtimes = seen["runtimes"]
    assert sorted(runtimes) == RUNTIME_NAMES
    assert runtimes["torch-distributed"] == [
        "torch",
        "CustomTrainer",
        "pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime",
        1,
        "Unknown",
        "Unknown",
    ]
    assert runtimes["torchtune-qwen2.5-1.5b"][:2] == ["torchtune", "BuiltinTrainer"]
    assert runtimes["torchtune-qwen2.5-1.5b"][4:] == ["gpu", "2"]
    assert runtimes["deepspeed-distributed"][5] == "1"


@pytest.mark.cluster
def test_helm_upgrade_reruns_the_installer_and_prunes(
    release: dict[str, str], helm: str, kube: Kube, cluster: Any, tmp_path: Path
) -> None:
    """Last in this module (it changes the shared release): an upgrade that keeps only torch-distributed runs the
    hook Job again (Helm waits for it) and the installer prunes the seven others."""
    ns, name = release["namespace"], release["name"]
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig)}
    result = subprocess.run(
        [
            helm,
            "upgrade",
            name,
            str(CHART),
            "--namespace",
            ns,
            "--reuse-values",
            "--set",
            "runtimes.defaultEnabled=false",
            "--set",
            "runtimes.torchDistributed.enabled=true",
            "--timeout",
            "120s",
        ],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    cm = kube.get("configmap", f"{name}-runtimes-installer", ns)
    assert cm is not None
    assert [d["metadata"]["name"] for d in yaml.safe_load_all(cm["data"]["runtimes.yaml"]) if d] == [
        "torch-distributed"
    ]
    out = _run_installer(kube, cluster, release, "", tmp_path)
    assert out.count("pruned") == len(RUNTIME_NAMES) - 1
    items = json.loads(
        kube.run("get", "clustertrainingruntimes", "-l", f"app.kubernetes.io/instance={name}", "-o", "json").stdout
    )["items"]
    assert [o["metadata"]["name"] for o in items] == ["torch-distributed"]
    history = json.loads(
        subprocess.run(
            [helm, "history", name, "--namespace", ns, "-o", "json"],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        ).stdout
    )
    assert [h["status"] for h in history] == ["superseded", "deployed"]
