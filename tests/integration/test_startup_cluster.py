"""`trainjob-operator run` against a bare cluster — a kube-apiserver with etcd and nothing else, no controllers — as a
new user meets it: it starts and serves, or exits within 30 s with one line naming what is missing and its fix.
Credentials as kubectl takes them: the admin's client certificate, a ServiceAccount token, an exec plugin.

The bare cluster is this module's own (kwokctl without controller-manager and scheduler), next to the session
cluster, so CRDs can come and go without disturbing other tests. Without a namespace controller nothing here can
delete a namespace: only the README test uses kubeflow-system, the others `default`."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from cluster_fixtures import wait_for
from harness import cluster as cluster_lib
from operator_fixtures import REPO, Kube, OperatorProcess, free_port
from trainjob_operator.runtime import startup
from trainjob_operator.runtime.plugins.workload import GATE

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(600)]

# A start-up that cannot succeed ends on its own: the operator's budget is `startup.CONNECT_DEADLINE` (20 s, which
# the messages' "after N s" and the retry schedule check); the wall-clock limit only catches a hang, with room for
# the interpreter's start-up when `make test`'s three lanes share 2 cores (37 s seen there, 2026-11-25).
START_LIMIT = 60.0
TRAINER_CRDS = sorted((REPO / "crds").glob("*.yaml"))
RBAC = REPO / "manifests" / "base" / "operator" / "rbac.yaml"


@dataclass
class Bare:
    name: str
    kubeconfig: Path
    kubectl_path: Path
    env: dict[str, str]
    kwokctl: Path
    config: Path

    @property
    def kube(self) -> Kube:
        return Kube(self)


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bare]:
    bin_dir = cluster_lib.build_tools(quiet=True)
    tmp = tmp_path_factory.mktemp("bare")
    name = f"{cluster_lib.cluster_name()}-bare"
    config = tmp / "kwokctl.yaml"
    config.write_text(
        json.dumps(
            {
                "kind": "KwokctlConfiguration",
                "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
                "options": {
                    "runtime": "binary",
                    "bindAddress": "127.0.0.1",
                    "kubeBinaryPrefix": str(bin_dir),
                    "kubectlBinary": str(bin_dir / "kubectl"),
                    "etcdBinary": str(bin_dir / "etcd"),
                    "kwokControllerBinary": str(bin_dir / "kwok"),
                    "kubeAuthorization": True,
                    "kubeVersion": cluster_lib._version_of(bin_dir, "kubernetes"),
                    "etcdVersion": cluster_lib._version_of(bin_dir, "etcd"),
                },
            }
        )
    )
    env = {**os.environ, "KWOK_WORKDIR": str(tmp / "kwok"), "KWOK_KUBECTL_BINARY": str(bin_dir / "kubectl")}
    info = Bare(name, tmp / "kubeconfig", bin_dir / "kubectl", env, bin_dir / "kwokctl", config)
    created = subprocess.run(
        [
            str(info.kwokctl),
            "--name",
            name,
            "--config",
            str(config),
            "create",
            "cluster",
            "--kubeconfig",
            str(info.kubeconfig),
            "--wait",
            "120s",
            "--disable-kube-scheduler",
            "--disable-kube-controller-manager",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    try:
        assert created.returncode == 0, created.stdout[-2000:] + created.stderr[-3000:]
        wait_for(
            lambda: info.kube.run("get", "--raw", "/readyz", check=False).returncode == 0,
            timeout=60,
            what="the bare API server",
        )
        yield info
    finally:
        subprocess.run(
            [str(info.kwokctl), "--name", name, "delete", "cluster", "--kubeconfig", str(info.kubeconfig)],
            env=env,
            capture_output=True,
            timeout=120,
        )


def jobset_crd(bare: Bare) -> dict[str, Any]:
    """JobSet's CRD from its release manifest (without the controller or webhooks)."""
    share = bare.kubectl_path.parent / "share" / "jobset.yaml"
    (crd,) = [d for d in yaml.safe_load_all(share.read_text()) if d and d["kind"] == "CustomResourceDefinition"]
    crd["spec"].pop("conversion", None)
    return crd


def served(bare: Bare, group_version: str, plural: str) -> bool:
    result = bare.kube.run("get", "--raw", f"/apis/{group_version}", check=False)
    return result.returncode == 0 and any(r["name"] == plural for r in json.loads(result.stdout)["resources"])


def crds(bare: Bare, *, trainer: bool, jobset: bool) -> None:
    """Install or remove our CRDs and JobSet's, and wait until discovery says so."""
    kube = bare.kube
    for wanted, files, gv, plural in (
        (trainer, [str(p) for p in TRAINER_CRDS], "trainer.kubeflow.org/v1alpha1", "clustertrainingruntimes"),
        (jobset, None, "jobset.x-k8s.io/v1alpha2", "jobsets"),
    ):
        if wanted:
            if files:
                for path in files:
                    kube.run("apply", "--server-side", "-f", path)
            else:
                kube.run("apply", "--server-side", "-f", "-", stdin=json.dumps(jobset_crd(bare)))
        else:
            names = (
                ["jobsets.jobset.x-k8s.io"]
                if files is None
                else [f"{p}.trainer.kubeflow.org" for p in ("trainjobs", "trainingruntimes", "clustertrainingruntimes")]
            )
            kube.run("delete", "crd", *names, "--ignore-not-found", "--wait=true")
        wait_for(
            lambda gv=gv, plural=plural, wanted=wanted: served(bare, gv, plural) == wanted,
            timeout=60,
            what=f"{gv} {plural} {'served' if wanted else 'gone'}",
        )


def run_operator(kubeconfig: Path, tmp: Path, *args: str) -> tuple[int, float, list[str]]:
    """`trainjob-operator run` expected to give up: its exit code, seconds, and its stderr lines."""
    started = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainjob_operator.cli",
            "run",
            "--kubeconfig",
            str(kubeconfig),
            "--health-port",
            str(free_port()),
            "--webhook-port",
            str(free_port()),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=90,
        cwd=tmp,
        env={k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "POD_NAMESPACE")},
    )
    return proc.returncode, time.monotonic() - started, proc.stderr.strip().splitlines()


def error_line(lines: list[str]) -> str:
    errors = [line for line in lines if line.startswith("trainjob-operator: error: ")]
    assert len(errors) == 1, "\n".join(lines[-20:])
    assert lines[-1] == errors[0]  # the last thing said
    return errors[0].removeprefix("trainjob-operator: error: ")


# --- identities ----------------------------------------------------------------------------------------------------


def operator_rules(drop: tuple[str, str] | None = None, extra: list[dict[str, Any]] | None = None) -> list[Any]:
    """The shipped ClusterRole's and Role's rules as one ClusterRole, maybe without one (verb, resource)."""
    rules = [
        dict(rule)
        for doc in yaml.safe_load_all(RBAC.read_text())
        if doc and doc["kind"] in ("ClusterRole", "Role")
        for rule in doc["rules"]
    ]
    if drop is not None:
        verb, resource = drop
        for rule in rules:
            if resource in rule["resources"] and verb in rule["verbs"]:
                rule["verbs"] = [v for v in rule["verbs"] if v != verb]
    return [r for r in rules if r["verbs"]] + (extra or [])


def service_account(bare: Bare, name: str, rules: list[Any]) -> str:
    """A ServiceAccount bound to a ClusterRole of `rules`; a token for it (TokenRequest)."""
    kube = bare.kube
    kube.apply(
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": "default"}},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name},
            "rules": rules,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": "default"}],
        },
    )
    return kube.run("create", "token", name, "-n", "default", "--duration", "1h").stdout.strip()


def user_kubeconfig(bare: Bare, path: Path, user: dict[str, Any], server: str | None = None) -> Path:
    """The bare cluster's server and CA (inlined) with another user."""
    admin = yaml.safe_load(bare.kubeconfig.read_text())
    context = next(c for c in admin["contexts"] if c["name"] == admin["current-context"])["context"]
    cluster = dict(next(c for c in admin["clusters"] if c["name"] == context["cluster"])["cluster"])
    if "certificate-authority" in cluster:
        cluster["certificate-authority-data"] = base64.b64encode(
            Path(cluster.pop("certificate-authority")).read_bytes()
        ).decode()
    if server:
        cluster["server"] = server
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "me",
                "clusters": [{"name": "bare", "cluster": cluster}],
                "users": [{"name": "me", "user": user}],
                "contexts": [{"name": "me", "context": {"cluster": "bare", "user": "me"}}],
            }
        )
    )
    return path


# --- TrainJobs -----------------------------------------------------------------------------------------------------


def runtime(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {"name": "torch", "namespace": namespace},
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {}},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                                "spec": {
                                    "template": {
                                        "spec": {"containers": [{"name": "node", "image": "pytorch/pytorch:2.13.0"}]}
                                    }
                                },
                            },
                        }
                    ]
                }
            },
        },
    }


def trainjob(namespace: str, name: str, **trainer: Any) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"runtimeRef": {"name": "torch", "kind": "TrainingRuntime"}, "trainer": trainer},
    }


def fresh_namespace(kube: Kube) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    kube.run("create", "namespace", name)
    return name


# --- the tests -----------------------------------------------------------------------------------------------------


def test_missing_jobset_crd_names_it_and_the_release_to_install(bare: Bare, tmp_path: Path) -> None:
    crds(bare, trainer=True, jobset=False)
    code, took, lines = run_operator(bare.kubeconfig, tmp_path)
    assert (code, error_line(lines)) == (3, f"CRDs not installed: jobsets.jobset.x-k8s.io; {startup.JOBSET_FIX}")
    assert took < START_LIMIT


def test_missing_trainer_crds_name_them_and_how_to_install_them(bare: Bare, tmp_path: Path) -> None:
    crds(bare, trainer=False, jobset=True)
    code, took, lines = run_operator(bare.kubeconfig, tmp_path)
    assert (code, error_line(lines)) == (
        3,
        "CRDs not installed: trainjobs.trainer.kubeflow.org, "
        "trainingruntimes.trainer.kubeflow.org, clustertrainingruntimes."
        f"trainer.kubeflow.org; {startup.TRAINER_CRDS_FIX}",
    )
    assert took < START_LIMIT


def test_unreachable_api_server_is_retried_then_named(bare: Bare, tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    kubeconfig = user_kubeconfig(bare, tmp_path / "kubeconfig", {"token": "unused"}, f"https://127.0.0.1:{port}")
    code, took, lines = run_operator(kubeconfig, tmp_path, "--log-format", "json")
    line = error_line(lines)
    assert code == 3 and took < START_LIMIT
    assert re.fullmatch(
        rf"cannot reach the API server https://127\.0\.0\.1:{port} \(context me of {kubeconfig}\) "
        r"after 1\d s: .*[Cc]onnect.*; is the cluster up and is this the right "
        r"--kubeconfig/--context\? \(`kubectl cluster-info` tries the same\)",
        line,
    ), line
    retries = [json.loads(entry) for entry in lines if '"API server not reachable yet; retrying"' in entry]
    assert [r["retry_in"] for r in retries] == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0]


def test_operator_namespace_missing_and_not_creatable(bare: Bare, tmp_path: Path) -> None:
    crds(bare, trainer=True, jobset=True)
    read_namespaces = {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"]}
    token = service_account(bare, "no-ns-create", operator_rules(extra=[read_namespaces]))
    kubeconfig = user_kubeconfig(bare, tmp_path / "kubeconfig", {"token": token})
    code, took, lines = run_operator(kubeconfig, tmp_path, "--operator-namespace", "nowhere")
    assert (code, error_line(lines)) == (
        3,
        "operator namespace nowhere does not exist and system:serviceaccount:"
        "default:no-ns-create may not create it: `kubectl create namespace "
        "nowhere`, or pass --operator-namespace <an existing namespace>",
    )
    assert took < START_LIMIT


def test_a_verb_it_needs_is_denied(bare: Bare, tmp_path: Path) -> None:
    crds(bare, trainer=True, jobset=True)
    token = service_account(bare, "no-jobset-watch", operator_rules(drop=("watch", "jobsets")))
    kubeconfig = user_kubeconfig(bare, tmp_path / "kubeconfig", {"token": token})
    code, took, lines = run_operator(kubeconfig, tmp_path, "--operator-namespace", "default")
    assert (code, error_line(lines)) == (
        3,
        "RBAC: system:serviceaccount:default:no-jobset-watch may not watch "
        f"jobsets.jobset.x-k8s.io cluster-wide; {startup.RBAC_FIX}",
    )
    assert took < START_LIMIT


def test_webhooks_the_api_server_cannot_call_are_named_and_taken_away(bare: Bare, tmp_path: Path) -> None:
    """Webhook configurations pointing where the API server cannot connect would refuse every TrainJob write: the
    operator finds out with a dry-run TrainJob, removes them and exits with the line saying what to set."""
    crds(bare, trainer=True, jobset=True)
    config = tmp_path / "config.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "webhook": {
                    "url_host": "127.0.0.2",
                    "validating_name": "probe-validator.example.com",
                    "mutating_name": "probe-defaulter.example.com",
                },
                "leader_election": {"enabled": False},
            }
        )
    )
    code, took, lines = run_operator(
        bare.kubeconfig, tmp_path, "--config", str(config), "--operator-namespace", "default"
    )
    line = error_line(lines)
    assert code == 3 and took < START_LIMIT
    assert re.match(
        r"the API server cannot call the operator's webhooks at https://127\.0\.0\.2:\d+ \(Internal error "
        r'occurred: failed calling webhook "',
        line,
    ), line
    assert line.endswith(
        "); set webhook.host and webhook.url_host in --config to an address of this machine the "
        "API server reaches, or run with --no-webhooks"
    )
    assert bare.kube.get("validatingwebhookconfiguration", "probe-validator.example.com") is None
    assert bare.kube.get("mutatingwebhookconfiguration", "probe-defaulter.example.com") is None


def start(kubeconfig: Path, tmp: Path, name: str, **config: Any) -> OperatorProcess:
    process = OperatorProcess(str(kubeconfig), name, config)
    process.start(tmp)
    return process


def full_log(process: OperatorProcess) -> str:
    assert process.log_path is not None
    return process.log_path.read_text()


def readyz(process: OperatorProcess) -> tuple[int, str]:
    if process.proc is not None and process.proc.poll() is not None:
        pytest.fail(f"operator {process.name} exited with {process.proc.returncode}:\n{process.log()}")
    return process.http("/readyz")


def test_on_a_bare_cluster_as_the_readme_says(bare: Bare, tmp_path: Path) -> None:
    """Only the CRDs installed, the admin's kubeconfig (client certificate), `run --kubeconfig`: the operator creates
    kubeflow-system, registers its webhooks, is ready only then, reconciles a valid TrainJob and the API server
    rejects an invalid one; a second replica stands by, ready, and says so."""
    kube = bare.kube
    crds(bare, trainer=True, jobset=True)
    assert kube.get("namespace", "kubeflow-system") is None  # (no namespace controller here to delete one)
    first = start(bare.kubeconfig, tmp_path, "first", operator_namespace="kubeflow-system")
    second: OperatorProcess | None = None
    try:
        wait_for(lambda: readyz(first)[0] == 200, timeout=60, what="readiness")
        # Ready means serving: the webhooks were registered before, the namespace was created
        assert kube.get("validatingwebhookconfiguration", "validator.trainer.kubeflow.org") is not None
        assert kube.get("mutatingwebhookconfiguration", "defaulter.trainer.kubeflow.org") is not None
        assert kube.get("namespace", "kubeflow-system") is not None
        assert '"created the operator namespace"' in full_log(first)
        checked = [json.loads(line) for line in full_log(first).splitlines() if '"cluster checked"' in line]
        # v1.36 streams a watch's initial events: the watches start from the watch cache, no paged LISTs
        assert checked and checked[0]["streaming_lists"] is True, checked
        wait_for(lambda: readyz(first)[1] == "ok: leader, reconciling; serving webhooks", timeout=30, what="leadership")

        ns = fresh_namespace(kube)
        kube.apply(runtime(ns), trainjob(ns, "valid", numNodes=2))
        jobset = wait_for(lambda: kube.get("jobset", "valid", ns), timeout=60, what="the JobSet")
        assert jobset["metadata"]["ownerReferences"][0]["name"] == "valid"
        invalid = trainjob(ns, "invalid", numNodes=2)
        invalid["spec"]["runtimeRef"]["name"] = "nope"
        rejected = kube.create(invalid, check=False)
        assert rejected.returncode != 0
        assert 'admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request' in rejected.stderr
        assert "spec.runtimeRef" in rejected.stderr

        second = start(bare.kubeconfig, tmp_path, "second", operator_namespace="kubeflow-system")
        standing_by = "ok: standing by, not the leader (Lease kubeflow-system/trainer.kubeflow.org held by "
        status, body = wait_for(
            lambda: (lambda r: r if r[1].startswith(standing_by) else None)(readyz(second)),
            timeout=60,
            what="the standby's readiness",
        )
        assert status == 200 and body.endswith("); serving webhooks; not reconciling"), body
        assert '"standing by: another replica holds the Lease; serving webhooks, not reconciling"' in full_log(second)
    except BaseException as err:
        raise AssertionError(f"{err}\n--- operator log (tail) ---\n{full_log(first)[-4000:]}") from err
    finally:
        for process in (second, first):
            if process is not None:
                process.stop()
        kube.delete("validatingwebhookconfiguration", "validator.trainer.kubeflow.org")
        kube.delete("mutatingwebhookconfiguration", "defaulter.trainer.kubeflow.org")


def test_gang_scheduling_without_the_workload_api_is_said_once_and_refused_naming_the_field_and_the_api(
    bare: Bare, tmp_path: Path
) -> None:
    """Kubernetes 1.36 serves no `scheduling.k8s.io/v1beta1` Workload API. With the TrainJobWorkloadAwareScheduling
    gate on the operator finds that at start-up, says it once, serves, and refuses a TrainJob whose runtime sets
    `spec.scheduling`, naming the field and the missing API; a runtime without it runs as today."""
    kube = bare.kube
    crds(bare, trainer=True, jobset=True)
    assert not served(bare, "scheduling.k8s.io/v1beta1", "workloads"), "this test needs a cluster without the API"
    gang = start(
        bare.kubeconfig,
        tmp_path,
        "gang",
        operator_namespace="default",
        feature_gates={GATE: True},
        leader_election={"enabled": False},
    )
    try:
        wait_for(lambda: readyz(gang)[0] == 200, timeout=60, what="readiness")
        ns = fresh_namespace(kube)
        gang_runtime = runtime(ns)
        gang_runtime["metadata"]["name"] = "gang"
        gang_runtime["spec"]["scheduling"] = {"schedulingPolicy": {"gang": {}}}
        kube.apply(runtime(ns), gang_runtime)
        refused = trainjob(ns, "gang", numNodes=2)
        refused["spec"]["runtimeRef"]["name"] = "gang"
        answer = wait_for(
            lambda: (lambda r: r if "spec.scheduling" in r.stderr else None)(kube.create(refused, check=False)),
            timeout=30,
            what="the TrainJob refused (once the webhook's runtime cache has the runtime)",
        )
        assert answer.returncode != 0
        assert 'admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request' in answer.stderr
        assert (
            "runtime gang sets spec.scheduling (gang scheduling by the Workload API), but this cluster's API server "
            "does not serve workloads and podgroups of scheduling.k8s.io/v1beta1 (needs Kubernetes 1.37 or later"
        ) in answer.stderr, answer.stderr
        assert kube.get("trainjob", "gang", ns) is None
        kube.apply(trainjob(ns, "plain", numNodes=2))
        wait_for(lambda: kube.get("jobset", "plain", ns), timeout=60, what="the JobSet of a runtime without it")
        said = [json.loads(line) for line in full_log(gang).splitlines() if "does not serve workloads and" in line]
        assert [(e["level"], e["event"].startswith(f"{GATE} is on, but the API server")) for e in said] == [
            ("warning", True)
        ], said
    except BaseException as err:
        raise AssertionError(f"{err}\n--- operator log (tail) ---\n{full_log(gang)[-4000:]}") from err
    finally:
        gang.stop()
        kube.delete("validatingwebhookconfiguration", "validator.trainer.kubeflow.org")
        kube.delete("mutatingwebhookconfiguration", "defaulter.trainer.kubeflow.org")


def test_exec_credential_plugin(bare: Bare, tmp_path: Path) -> None:
    """A kubeconfig whose user is an exec plugin (as EKS, GKE and OIDC set up) printing an ExecCredential with a
    ServiceAccount token that expires in 61 s: the operator starts under that identity, asks the plugin again as the
    token nears its expiry (every 10 s at most), and reconciles with the fresh tokens."""
    crds(bare, trainer=True, jobset=True)
    token = service_account(bare, "by-exec", operator_rules())
    plugin = tmp_path / "credential-plugin.py"
    calls = tmp_path / "calls"
    plugin.write_text(
        f"#!{sys.executable}\nimport datetime, json, os\n"
        f"assert json.loads(os.environ['KUBERNETES_EXEC_INFO'])['kind'] == 'ExecCredential'\n"
        f"open({str(calls)!r}, 'a').write('x')\n"
        "expiry = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=61)\n"
        "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1', 'kind': 'ExecCredential', "
        f"'status': {{'token': {token!r}, 'expirationTimestamp': expiry.strftime('%Y-%m-%dT%H:%M:%SZ')}}}}))\n"
    )
    plugin.chmod(0o755)
    kubeconfig = user_kubeconfig(
        bare,
        tmp_path / "kubeconfig",
        {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": str(plugin), "interactiveMode": "Never"}},
    )
    ns = fresh_namespace(bare.kube)
    process = start(
        kubeconfig,
        tmp_path,
        "exec",
        operator_namespace="default",
        namespaces=[ns],
        webhook={"enabled": False},
        leader_election={"lease_duration_seconds": 8, "renew_deadline_seconds": 6, "retry_period_seconds": 1},
    )
    try:
        wait_for(lambda: readyz(process)[0] == 200, timeout=60, what="readiness")
        assert '"user": "system:serviceaccount:default:by-exec"' in full_log(process)
        # The Lease is renewed every second: each request past the 10 s floor finds the token near its expiry.
        wait_for(lambda: calls.exists() and len(calls.read_text()) >= 3, timeout=60, what="the plugin asked again")
        bare.kube.apply(runtime(ns), trainjob(ns, "by-exec", numNodes=1))
        wait_for(lambda: bare.kube.get("jobset", "by-exec", ns), timeout=60, what="the JobSet")
        assert readyz(process) == (200, "ok: leader, reconciling; webhooks disabled")
    except BaseException as err:
        raise AssertionError(f"{err}\n--- operator log (tail) ---\n{full_log(process)[-4000:]}") from err
    finally:
        process.stop()


class ConnectProxy:
    """An HTTP CONNECT proxy (what corporate proxies and `kubectl proxy`-less setups offer) on its own thread;
    counts the tunnels it opened."""

    def __init__(self) -> None:
        self.tunnels: list[str] = []
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        server = asyncio.run_coroutine_threadsafe(asyncio.start_server(self._handle, "127.0.0.1", 0), self.loop)
        self.server = server.result(timeout=10)
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        method, target, _ = (await reader.readline()).decode().split()
        while (await reader.readline()) not in (b"\r\n", b""):
            pass
        if method != "CONNECT":
            writer.write(b"HTTP/1.1 405 Method Not Allowed\r\n\r\n")
            writer.close()
            return
        host, port = target.rsplit(":", 1)
        upstream_reader, upstream_writer = await asyncio.open_connection(host, int(port))
        self.tunnels.append(target)
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await writer.drain()

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            try:
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            finally:
                sink.close()

        await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer), return_exceptions=True)

    def close(self) -> None:
        self.server.close()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)


def test_through_the_kubeconfigs_proxy(bare: Bare, tmp_path: Path) -> None:
    """`proxy-url` in the kubeconfig's cluster: the operator's client and kopf's watches both tunnel through it."""
    crds(bare, trainer=True, jobset=True)
    proxy = ConnectProxy()
    admin = yaml.safe_load(bare.kubeconfig.read_text())
    for cluster in admin["clusters"]:
        cluster["cluster"]["proxy-url"] = proxy.url
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(admin))
    ns = fresh_namespace(bare.kube)
    process = start(
        kubeconfig,
        tmp_path,
        "proxied",
        operator_namespace="default",
        namespaces=[ns],
        webhook={"enabled": False},
        leader_election={"enabled": False},
    )
    try:
        wait_for(lambda: readyz(process)[0] == 200, timeout=60, what="readiness")
        bare.kube.apply(runtime(ns), trainjob(ns, "proxied", numNodes=1))
        wait_for(lambda: bare.kube.get("jobset", "proxied", ns), timeout=60, what="the JobSet")
        server = admin["clusters"][0]["cluster"]["server"].removeprefix("https://")
        assert len(proxy.tunnels) >= 2 and set(proxy.tunnels) == {server}  # ours and kopf's sessions, nothing else
    finally:
        process.stop()
        proxy.close()
