"""`make demo`: the operator on a real local control plane, start to finish, with readable progress.

Builds (or reuses) the control plane, installs the CRDs and runtimes, runs the operator, submits the example
TrainJobs and follows them to Complete; then prints the commands to look around. `make demo-down` stops it.

Where this machine can run containers (`realnodes.check_machine`: root, the Debian tools, overlayfs) the control
plane gets 2 real nodes (kubelet, containerd), the images the examples need are built here (first run) and loaded,
the runtimes are rewritten for the real nodes (`harness.realexamples`) and every example TrainJob trains for
real: the demo prints each pod's node, container and the key line of its log, and exits 1 unless every pod ran in
containerd on a real node, wrote a log and its TrainJob is Complete. Elsewhere it says why in one line and runs the
examples on kwok's fake nodes, as before.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "hack"))

import yaml  # noqa: E402

from harness import cluster, images, realexamples, realnodes  # noqa: E402

EXAMPLES = [
    REPO / "examples" / "trainjobs.yaml",
    REPO / "examples" / "initializers.yaml",
    REPO / "examples" / "frameworks.yaml",
]
#: `TRAINJOB_DEMO_HANG=1`: also a torch job that hangs after reporting progress (real nodes only: a fake node's pods
#: never report), its stall caught and acted on (issue 35). It ends Failed, reason ProgressStalled, as it should.
HANG_EXAMPLE = REPO / "examples" / "stall.yaml"
HANG_NAME = "hang-example"
REAL_NODES = 2
#: Real training on a shared 2-core machine: TensorFlow's import alone takes a while.
REAL_TIMEOUT = 900.0
#: What a framework prints that the demo shows (the last matching line of a pod's log; else its last line);
#: torchrun's teed output carries a `[default0]:` prefix.
KEY_LINE = re.compile(
    r"^(?:\[\w+\]:)?((?:rank=|jax |xgboost |tensorflow |trainer |initializer: |mpi rank=).*)$", re.MULTILINE
)
HEALTH_PORT = 18081
WEBHOOK_PORT = 19443
TIMEOUT = 240.0


def say(text: str) -> None:
    print(f"demo: {text}", flush=True)


def kubectl(info: cluster.ClusterInfo, *args: str, input: str | None = None) -> str:
    return info.kubectl(*args, input=input).stdout


def runtime_files() -> list[Path]:
    shipped = sorted((REPO / "runtimes").glob("*.yaml")) if (REPO / "runtimes").is_dir() else []
    return shipped or [REPO / "examples" / "runtimes.yaml"]


def ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


def start_operator(info: cluster.ClusterInfo, real: bool) -> subprocess.Popen[bytes]:
    state = cluster.state_dir()
    config = state / "operator.yaml"
    settings: dict[str, Any] = {
        "operator_namespace": "kubeflow-system",
        "log_format": "console",
        "health": {"port": HEALTH_PORT},
        "webhook": {"port": WEBHOOK_PORT},
    }
    if real:  # the pods report progress to the status server on the address they reach, not on loopback
        settings["status_server"] = {"host": realnodes.HOST_FOR_PODS}
    config.write_text(json.dumps(settings))
    log = (state / "logs" / "operator.log").open("wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "trainjob_operator.cli",
            "run",
            "--kubeconfig",
            str(info.kubeconfig),
            "--config",
            str(config),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=REPO,
        start_new_session=True,
    )
    (state / "operator.pid").write_text(str(proc.pid))
    deadline = time.monotonic() + 60
    while not ready(HEALTH_PORT):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"demo: the operator did not become ready; see {state / 'logs' / 'operator.log'}")
        time.sleep(0.25)
    return proc


def stop_operator() -> None:
    """Stop the demo's operator and wait until it is gone: a new one started while the old one still holds the
    health port exits at once (`address already in use`), and the old one's /readyz would pass for it."""
    pid_file = cluster.state_dir() / "operator.pid"
    if not pid_file.exists():
        return
    with contextlib.suppress(ProcessLookupError, ValueError, PermissionError):
        pgid = int(pid_file.read_text())
        os.killpg(pgid, 15)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            os.killpg(pgid, 0)  # ProcessLookupError once every process of the group has exited
            time.sleep(0.2)
        os.killpg(pgid, 9)
    pid_file.unlink()


def table(info: cluster.ClusterInfo) -> tuple[str, bool]:
    jobs = json.loads(kubectl(info, "get", "trainjobs", "-A", "-o", "json"))["items"]
    rows, done = [], bool(jobs)
    for job in jobs:
        status = job.get("status") or {}
        state = status.get("state") or "Pending"
        steps = ", ".join(f"{s['name']} {s['succeeded']}✓ {s['active']}▶" for s in status.get("jobsStatus") or [])
        progress = (status.get("trainerStatus") or {}).get("progressPercentage")
        goodput = (status.get("goodput") or {}).get("percent")
        extra = (f" progress={progress}%" if progress is not None else "") + (
            f" goodput={goodput}%" if goodput is not None and state in ("Complete", "Failed") else ""
        )
        why = f" ({status['reason']})" if status.get("reason") in ("ProgressStalled", "NoFirstProgressReport") else ""
        rows.append(
            f"  {job['metadata']['name']:30s} {state:10s} nodes={status.get('nodes', '-')!s:3s} {steps}{extra}{why}"
        )
        done = done and state in ("Complete", "Failed")
    return "\n".join(rows), done


def real_nodes_unavailable() -> str | None:
    """Why the examples cannot run on real nodes here (None: they can)."""
    if os.environ.get("TRAINJOB_DEMO_KWOK"):
        return "TRAINJOB_DEMO_KWOK is set"
    try:
        realnodes.check_machine()
    except cluster.ClusterError as exc:
        return str(exc)
    return None


def example_docs() -> list[dict[str, Any]]:
    return [doc for path in EXAMPLES for doc in yaml.safe_load_all(path.read_text()) if doc]


def runtime_docs() -> list[dict[str, Any]]:
    return [doc for path in runtime_files() for doc in yaml.safe_load_all(path.read_text()) if doc]


def build_images(info: cluster.ClusterInfo, names: list[str]) -> dict[str, str]:
    """Build (first run) and load into both real nodes' containerd the images `names`, a line for each."""
    refs = {}
    for name in names:
        t0 = time.monotonic()
        cached = images.archive(name).exists()
        if not cached:
            say(f"building image {name} (first run only; Debian packages and PyPI wheels, minutes for big ones)")
        refs[name] = realnodes.load_image(info, name)
        size = images.metadata(name)["size"] / 2**20
        how = "cached" if cached else "built"
        say(f"image {name}: {how}, {size:.0f} MiB, loaded into the real nodes in {time.monotonic() - t0:.0f}s")
    return refs


def used_runtimes() -> list[dict[str, Any]]:
    """The runtimes the example TrainJobs name."""
    used = {
        (doc["spec"]["runtimeRef"].get("kind", "ClusterTrainingRuntime"), doc["spec"]["runtimeRef"]["name"])
        for doc in example_docs()
        if doc["kind"] == "TrainJob"
    }
    runtimes = [doc for doc in runtime_docs() + example_docs() if doc["kind"].endswith("TrainingRuntime")]
    return [r for r in runtimes if (r["kind"], r["metadata"]["name"]) in used]


def demo_images() -> list[str]:
    """The examples' images, torch with the kubeflow SDK (`torch-sdk`): the torch example reports its progress
    (issue 35)."""
    return ["torch-sdk" if name == "torch" else name for name in realexamples.images_needed(used_runtimes())]


def images_needed() -> list[str]:
    """Every image the demo loads: the nodes' own (pause, busybox), then its examples', the biggest downloads first
    (`make demo` builds them in the background while the control plane compiles)."""
    examples = images.downloads_first(demo_images())
    return [*examples, *(n for n in ("pause", "busybox") if n not in examples)]


def apply_for_real(info: cluster.ClusterInfo) -> None:
    """The runtimes rewritten for the real nodes, the initializers' local source and shared volume."""
    runtimes = [doc for doc in runtime_docs() + example_docs() if doc["kind"].endswith("TrainingRuntime")]
    refs = build_images(info, demo_images())
    if "torch-sdk" in refs:  # the torch runtime runs the image with the SDK
        refs["torch"] = refs["torch-sdk"]
    shared = cluster.state_dir() / "demo-initializer"
    shared.mkdir(mode=0o777, parents=True, exist_ok=True)
    shared.chmod(0o777)
    objects = [
        *realexamples.shared_volume("initializer", "default", str(shared), "demo-initializer"),
        {
            **realexamples.source_configmap(),
            "metadata": {"name": realexamples.INITIALIZER_SOURCE, "namespace": "default"},
        },
        *(realexamples.for_real_nodes(r, refs, shared_claim="initializer") for r in runtimes),
    ]
    kubectl(info, "apply", "--server-side", "--force-conflicts", "-f", "-", input=yaml.safe_dump_all(objects))


class Pods:
    """Every pod of the example TrainJobs seen while they run (JobSet removes some once a job succeeds): its node,
    container and log, kept by uid."""

    def __init__(self, info: cluster.ClusterInfo) -> None:
        self.info = info
        self.seen: dict[str, dict[str, Any]] = {}
        self.logs: dict[str, str] = {}
        self.ended: set[str] = set()
        self.kwok_nodes = {
            n["metadata"]["name"]
            for n in json.loads(kubectl(info, "get", "nodes", "-o", "json"))["items"]
            if (n["metadata"].get("annotations") or {}).get("kwok.x-k8s.io/node") == "fake"
        }

    def poll(self, final: bool = False) -> None:
        """Record the pods; read a pod's log once while it runs (JobSet may remove it after success: the MPI
        nodes' sshd) and once more when it has ended (`final`: every pod still there), not on every poll."""
        pods = json.loads(kubectl(self.info, "get", "pods", "-n", "default", "-o", "json"))["items"]
        for pod in pods:
            labels = pod["metadata"].get("labels") or {}
            if "jobset.sigs.k8s.io/jobset-name" not in labels:
                continue
            uid = pod["metadata"]["uid"]
            self.seen[uid] = pod
            states = [s["state"] for s in pod["status"].get("containerStatuses") or []]
            ended = bool(states) and all("terminated" in s for s in states)
            started = any("running" in s or "terminated" in s for s in states)
            if uid in self.ended or not started or (uid in self.logs and not ended and not final):
                continue
            log = self.info.kubectl("logs", "-n", "default", pod["metadata"]["name"], "--all-containers", check=False)
            if log.returncode == 0 and log.stdout.strip():
                self.logs[uid] = log.stdout
                if ended:
                    self.ended.add(uid)

    def report(self, jobs: dict[str, str]) -> bool:
        """The table proving where each pod ran; True when every pod ran for real and every TrainJob is Complete
        (the hanging example: Failed for its stall)."""
        ok = all(state == ("Failed" if job == HANG_NAME else "Complete") for job, state in jobs.items())
        print(f"  {'TRAINJOB':28s} {'STATE':9s} {'POD':40s} {'NODE':12s} {'CONTAINER':22s} {'LOG':>5s}  KEY LINE")
        for uid, pod in sorted(self.seen.items(), key=lambda kv: kv[1]["metadata"]["name"]):
            job = pod["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-name"]
            node = pod["spec"].get("nodeName") or "-"
            ids = [s.get("containerID") or "" for s in pod["status"].get("containerStatuses") or []]
            container = ids[0][:22] if ids else "-"
            log = self.logs.get(uid, "")
            keys = KEY_LINE.findall(log) or [line for line in log.splitlines() if line.strip()][-1:] or ["-"]
            real = (
                node not in self.kwok_nodes and node != "-" and ids and all(i.startswith("containerd://") for i in ids)
            )
            # The hanging example's pods are stopped by its stall (action Fail): one may go before it printed.
            ok = ok and bool(real) and (bool(log.strip()) or job == HANG_NAME)
            lines = len(log.splitlines())
            print(
                f"  {job:28s} {jobs.get(job, '?'):9s} {pod['metadata']['name']:40s} {node:12s} {container:22s} "
                f"{lines:5d}  {keys[-1][:100]}"
            )
        missing = [
            job
            for job in jobs
            if not any(p["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-name"] == job for p in self.seen.values())
        ]
        for job in missing:
            print(f"  {job:28s} {jobs[job]:9s} (no pod seen)")
        return ok and not missing


def main() -> int:
    started = time.monotonic()
    if len(sys.argv) > 1 and sys.argv[1] == "down":
        stop_operator()
        cluster.down()
        return 0
    why_not = real_nodes_unavailable()
    real = why_not is None
    if why_not is not None:
        say(f"kwok fake nodes only (pods never run): {why_not}")
    say("building or reusing the local control plane (first run builds from Go modules; see docs/harness.md)")
    info = cluster.status()
    if info is not None and info.real_nodes != (REAL_NODES if real else 0):
        say("the running cluster has other nodes than this demo needs: restarting it")
        stop_operator()
        cluster.down()
        info = None
    if info is None:
        if real:
            say(f"with {REAL_NODES} real nodes (kubelet, containerd; the first run builds them from Go modules)")
        info = cluster.up(real_nodes=REAL_NODES if real else 0)
    else:
        say(f"reusing the running cluster ({info.kubeconfig})")
    say("installing the CRDs and runtimes")
    kubectl(info, "apply", "--server-side", "--force-conflicts", "-f", str(REPO / "crds"))
    deadline = time.monotonic() + 60
    while not cluster.crds_established(info, "trainer.kubeflow.org", 3):
        if time.monotonic() > deadline:
            raise SystemExit("demo: the CRDs did not become Established within 60 s")
        time.sleep(0.25)
    info.kubectl("create", "namespace", "kubeflow-system", check=False)
    stop_operator()
    say(f"starting the operator (logs: {cluster.state_dir() / 'logs' / 'operator.log'})")
    start_operator(info, real)
    for path in [*EXAMPLES, HANG_EXAMPLE]:
        kubectl(info, "delete", "-f", str(path), "--ignore-not-found", "--wait=true", "--timeout=120s")
    if real:
        say("the runtimes on the real nodes: images built here, pinned to the real nodes (harness/realexamples.py)")
        apply_for_real(info)
    else:
        for path in runtime_files():
            kubectl(info, "apply", "--server-side", "--force-conflicts", "-f", str(path))
    examples = EXAMPLES + ([HANG_EXAMPLE] if real and os.environ.get("TRAINJOB_DEMO_HANG") else [])
    say("submitting the example TrainJobs: " + ", ".join(p.name for p in examples))
    for path in examples:
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d and (d["kind"] == "TrainJob" or not real)]
        kubectl(info, "apply", "-f", "-", input=yaml.safe_dump_all(docs))
    pods = Pods(info) if real else None
    timeout = REAL_TIMEOUT if real else TIMEOUT
    deadline = time.monotonic() + timeout
    last = ""
    while True:
        text, done = table(info)
        if pods is not None:
            pods.poll()
        if text != last:
            print(f"--- {time.monotonic() - started:5.1f}s\n{text}", flush=True)
            last = text
        if done:
            break
        if time.monotonic() > deadline:
            say(f"not all TrainJobs finished within {timeout:.0f}s; see {cluster.state_dir() / 'logs'}")
            return 1
        time.sleep(1)
    if pods is not None:
        jobs = {
            j["metadata"]["name"]: (j.get("status") or {}).get("state") or "Pending"
            for j in json.loads(kubectl(info, "get", "trainjobs", "-n", "default", "-o", "json"))["items"]
        }
        pods.poll(final=True)
        say("where each pod ran (containerd on the real nodes) and what its framework reported:")
        if not pods.report(jobs):
            say("not every example TrainJob ran for real to Complete (the table above says which)")
            return 1
    where = "on the real nodes" if real else "on kwok's fake nodes"
    say(f"all TrainJobs finished {where} in {time.monotonic() - started:.0f}s. Look around:")
    kc = info.kubeconfig
    for command in (
        f"export KUBECONFIG={kc}",
        f"alias kubectl={info.kubectl_path}",
        "kubectl get trainjobs,jobsets,jobs,pods",
        "kubectl get trainjobs -o wide    # GOODPUT: the share of each TrainJob's time spent training",
        f"{REPO / '.venv/bin/trainjob-operator'} goodput    # where the time went: queued, starting, training, ...",
        f"{REPO / '.venv/bin/trainjob-operator'} ui --open    # the progress bars and each TrainJob's goodput timeline",
        "kubectl get trainjob multi-node-example -o yaml",
        "kubectl get configmap deepspeed-example-mpi-hostfile -o yaml",
        f"curl -s 127.0.0.1:{HEALTH_PORT}/metrics | grep trainjob_operator_",
        "make demo-down    # stop the operator and the cluster",
    ):
        print(f"  {command}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
