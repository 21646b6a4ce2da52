"""`make demo`: the operator on a real local control plane, start to finish, with readable progress.

Builds (or reuses) the control plane, installs the CRDs and runtimes, runs the operator, submits the example
TrainJobs and follows them to Complete; then prints the commands to look around. `make demo-down` stops it.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "hack"))

from trainjob_dev import cluster  # noqa: E402

EXAMPLES = [REPO / "examples" / "trainjobs.yaml", REPO / "examples" / "initializers.yaml"]
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


def start_operator(info: cluster.ClusterInfo) -> subprocess.Popen[bytes]:
    state = cluster.state_dir()
    config = state / "operator.yaml"
    config.write_text(
        json.dumps(
            {
                "operator_namespace": "kubeflow-system",
                "log_format": "console",
                "health": {"port": HEALTH_PORT},
                "webhook": {"port": WEBHOOK_PORT},
            }
        )
    )
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
    pid_file = cluster.state_dir() / "operator.pid"
    if pid_file.exists():
        with contextlib.suppress(ProcessLookupError, ValueError, PermissionError):
            os.killpg(int(pid_file.read_text()), 15)
        pid_file.unlink()


def table(info: cluster.ClusterInfo) -> tuple[str, bool]:
    jobs = json.loads(kubectl(info, "get", "trainjobs", "-A", "-o", "json"))["items"]
    rows, done = [], bool(jobs)
    for job in jobs:
        status = job.get("status") or {}
        state = status.get("state") or "Pending"
        steps = ", ".join(f"{s['name']} {s['succeeded']}✓ {s['active']}▶" for s in status.get("jobsStatus") or [])
        rows.append(f"  {job['metadata']['name']:30s} {state:10s} nodes={status.get('nodes', '-')!s:3s} {steps}")
        done = done and state in ("Complete", "Failed")
    return "\n".join(rows), done


def main() -> int:
    started = time.monotonic()
    if len(sys.argv) > 1 and sys.argv[1] == "down":
        stop_operator()
        cluster.down()
        return 0
    say("building or reusing the local control plane (first run builds from Go modules; see docs/development.md)")
    info = cluster.status()
    if info is None:
        info = cluster.up()
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
    start_operator(info)
    for path in runtime_files():
        kubectl(info, "apply", "--server-side", "--force-conflicts", "-f", str(path))
    say("submitting the example TrainJobs: " + ", ".join(p.name for p in EXAMPLES))
    for path in EXAMPLES:
        kubectl(info, "delete", "-f", str(path), "--ignore-not-found", "--wait=true", "--timeout=60s")
        kubectl(info, "apply", "-f", str(path))
    deadline = time.monotonic() + TIMEOUT
    last = ""
    while True:
        text, done = table(info)
        if text != last:
            print(f"--- {time.monotonic() - started:5.1f}s\n{text}", flush=True)
            last = text
        if done:
            break
        if time.monotonic() > deadline:
            say(f"not all TrainJobs finished within {TIMEOUT:.0f}s; see {cluster.state_dir() / 'logs'}")
            return 1
        time.sleep(1)
    say(f"all TrainJobs finished in {time.monotonic() - started:.0f}s. Look around:")
    kc = info.kubeconfig
    for command in (
        f"export KUBECONFIG={kc}",
        f"alias kubectl={info.kubectl_path}",
        "kubectl get trainjobs,jobsets,jobs,pods",
        "kubectl get trainjob multi-node-example -o yaml",
        "kubectl get configmap deepspeed-example-mpi-hostfile -o yaml",
        f"curl -s 127.0.0.1:{HEALTH_PORT}/metrics | grep trainjob_operator_",
        "make demo-down    # stop the operator and the cluster",
    ):
        print(f"  {command}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
