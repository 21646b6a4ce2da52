"""The chaos suite's tools: a local load balancer for the webhook replicas, an object tracker that notices
re-created, mutated and regenerated children, log scans (tracebacks, leaked Secret material) and the one line of
figures every scenario prints.

Sizes: TRAINJOB_CHAOS_SIZE=ci (default, `make test`) or full (`make chaos`). TRAINJOB_CHAOS_REPORT: a file the
figure lines are appended to.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import os
import random
import statistics
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from harness.plumbing import free_port
from trainjob_operator.api import constants as c
from trainjob_operator.k8s import connection as k8s_config
from trainjob_operator.k8s.client import ApiError, Client
from trainjob_operator.runtime.plugins.jobset import rebuildable

FULL = os.environ.get("TRAINJOB_CHAOS_SIZE", "ci") == "full"
RUN_FOR = "trainjob-operator.test/run-for"
CHILD_KINDS = (("jobset.x-k8s.io/v1alpha2", "JobSet"), ("v1", "Secret"), ("v1", "ConfigMap"))


def size(ci: int, full: int) -> int:
    return full if FULL else ci


# --- figures --------------------------------------------------------------------------------------------------


@dataclass
class Figures:
    scenario: str
    counts: dict[str, int] = field(default_factory=dict)
    measures: dict[str, float] = field(default_factory=dict)

    def line(self) -> str:
        counts = " ".join(f"{k}={v}" for k, v in self.counts.items())
        measures = " ".join(f"{k}={v:.1f}" for k, v in self.measures.items())
        return f"chaos {self.scenario}: {counts} {measures}".strip()

    def report(self) -> None:
        """Print the line (and append it to $TRAINJOB_CHAOS_REPORT); fail on any nonzero count."""
        line = self.line()
        print(f"\n{line}")
        target = os.environ.get("TRAINJOB_CHAOS_REPORT")
        if target:
            with open(target, "a", encoding="utf-8") as out:
                out.write(
                    f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} size={'full' if FULL else 'ci'} {line}\n"
                )
        bad = {k: v for k, v in self.counts.items() if v}
        assert not bad, f"{self.scenario}: nonzero counts {bad}"


def p50(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


# --- the API, for the driver ----------------------------------------------------------------------------------


class Api:
    """A blocking facade over the operator's own async client (fast bursts without a kubectl per object)."""

    def __init__(self, kubeconfig: str) -> None:
        self.kubeconfig = kubeconfig
        self.loop = asyncio.new_event_loop()
        self.client = Client(k8s_config.load(kubeconfig), qps=0, burst=0, timeout=20)
        self.webhook_failures: list[str] = []
        """Every "failed calling webhook" answer create_all retried (the API server could not call ours)."""

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def close(self) -> None:
        self.run(self.client.close())
        self.loop.close()

    def list(self, api_version: str, kind: str, namespace: str) -> list[dict[str, Any]]:
        for attempt in range(60):
            try:
                items: list[dict[str, Any]] = self.run(self.client.list(api_version, kind, namespace))
                return items
            except (ApiError, OSError, Exception) as err:  # the API server may be restarting
                if attempt == 59:
                    raise AssertionError(f"cannot list {kind}: {err}") from err
                time.sleep(1)
        return []

    def create_all(
        self, objects: list[dict[str, Any]], concurrency: int = 16, attempts: int = 60, spread_seconds: float = 0.0
    ) -> dict[str, str]:
        """Create every object, the i-th not before i/len × `spread_seconds` (a burst lasting that long), retrying
        refusals of a webhook mid-failover and connection errors; returns what the API server refused for good
        (name → message)."""
        refused: dict[str, str] = {}

        async def one(obj: dict[str, Any]) -> None:
            for attempt in range(attempts):
                try:
                    await self.client.create(obj)
                    return
                except ApiError as err:
                    if err.conflict:
                        return
                    if "failed calling webhook" in err.message:
                        self.webhook_failures.append(err.message)
                    if err.status in (400, 403, 422) and "failed calling webhook" not in err.message:
                        refused[obj["metadata"]["name"]] = err.message
                        return
                except Exception:  # connection errors while the API server restarts
                    pass
                await asyncio.sleep(min(0.2 * (attempt + 1), 2))
            refused[obj["metadata"]["name"]] = "gave up after retries"

        async def all_of() -> None:
            gate = asyncio.Semaphore(concurrency)
            start = asyncio.get_running_loop().time()
            gap = spread_seconds / max(len(objects), 1)

            async def paced(index: int, obj: dict[str, Any]) -> None:
                await asyncio.sleep(max(0.0, start + index * gap - asyncio.get_running_loop().time()))
                async with gate:
                    await one(obj)

            await asyncio.gather(*(paced(i, o) for i, o in enumerate(objects)))

        self.run(all_of())
        return refused

    def patch_all(self, kind: str, namespace: str, names: Iterable[str], patch: dict[str, Any]) -> None:
        async def all_of() -> None:
            for name in names:
                for _ in range(30):
                    try:
                        await self.client.merge_patch(c.API_VERSION, kind, name, namespace, patch)
                        break
                    except Exception:
                        await asyncio.sleep(0.5)

        self.run(all_of())


# --- workloads ------------------------------------------------------------------------------------------------


def _pod(command: list[str], run_for: str) -> dict[str, Any]:
    return {
        "metadata": {"annotations": {RUN_FOR: run_for}},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "node", "image": "trainer:x", "command": command}]},
    }


def runtimes(namespace: str, run_for: str = "900s") -> list[dict[str, Any]]:
    """torch; MPI (launcher + nodes, an SSH Secret each); torch with dataset and model initializers."""

    def rjob(name: str, ancestor: str | None, pod: dict[str, Any]) -> dict[str, Any]:
        meta = {"labels": {c.ANCESTOR_LABEL: ancestor}} if ancestor else {}
        return {"name": name, "template": {"metadata": meta, "spec": {"backoffLimit": 0, "template": pod}}}

    def runtime(name: str, policy: dict[str, Any], jobs: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "apiVersion": c.API_VERSION,
            "kind": "TrainingRuntime",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"mlPolicy": policy, "template": {"spec": {"replicatedJobs": jobs}}},
        }

    init_pod = _pod(["init"], "1s")
    init_pod["spec"]["containers"][0]["volumeMounts"] = [{"name": "initializer", "mountPath": "/workspace"}]
    init_pod["spec"]["volumes"] = [{"name": "initializer", "emptyDir": {}}]
    dataset = json.loads(json.dumps(init_pod))
    dataset["spec"]["containers"][0]["name"] = c.DATASET_INITIALIZER
    model = json.loads(json.dumps(init_pod))
    model["spec"]["containers"][0]["name"] = c.MODEL_INITIALIZER
    node = _pod(["torchrun", "train.py"], run_for)
    node["spec"]["containers"][0]["volumeMounts"] = [{"name": "initializer", "mountPath": "/workspace"}]
    node["spec"]["volumes"] = [{"name": "initializer", "emptyDir": {}}]
    init_node = rjob("node", "trainer", node)
    init_node["dependsOn"] = [
        {"name": c.DATASET_INITIALIZER, "status": "Complete"},
        {"name": c.MODEL_INITIALIZER, "status": "Complete"},
    ]
    return [
        runtime("torch", {"numNodes": 1, "torch": {}}, [rjob("node", "trainer", _pod(["torchrun", "t.py"], run_for))]),
        runtime(
            "mpi",
            {"numNodes": 1, "mpi": {"numProcPerNode": 1}},
            [
                rjob("launcher", "trainer", _pod(["mpirun", "hostname"], run_for)),
                rjob("node", None, _pod(["sshd"], run_for)),
            ],
        ),
        runtime(
            "torch-init",
            {"numNodes": 1, "torch": {}},
            [
                rjob(c.DATASET_INITIALIZER, c.DATASET_INITIALIZER, dataset),
                rjob(c.MODEL_INITIALIZER, c.MODEL_INITIALIZER, model),
                init_node,
            ],
        ),
    ]


STALL_RUNTIME = "torch-stall"


def stall_runtime(namespace: str, run_for: str = "900s") -> dict[str, Any]:
    """A torch runtime whose JobSet may restart once (`failurePolicy.maxRestarts: 1`) and whose TrainJobs never
    report progress but ask for a first report within 3 s, restarting on a stall (issue 35): each stalls, restarts
    once, stalls again and fails (no restart left). Exactly one restart each, whoever leads."""
    pod = _pod(["torchrun", "hang.py"], run_for)
    job = {
        "name": "node",
        "template": {
            "metadata": {"labels": {c.ANCESTOR_LABEL: "trainer"}},
            "spec": {"backoffLimit": 0, "template": pod},
        },
    }
    return {
        "apiVersion": c.API_VERSION,
        "kind": "TrainingRuntime",
        "metadata": {"name": STALL_RUNTIME, "namespace": namespace},
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {}},
            "runPolicy": {"stallPolicy": {"firstProgressTimeoutSeconds": 3, "action": "Restart"}},
            "template": {"spec": {"failurePolicy": {"maxRestarts": 1}, "replicatedJobs": [job]}},
        },
    }


def stalling_trainjobs(namespace: str, count: int) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": c.API_VERSION,
            "kind": "TrainJob",
            "metadata": {"name": f"stall-{index:05d}", "namespace": namespace},
            "spec": {"runtimeRef": {"name": STALL_RUNTIME, "kind": "TrainingRuntime"}},
        }
        for index in range(count)
    ]


def stall_counts(api: Api, namespace: str, names: set[str], tracker: Tracker) -> dict[str, int]:
    """Of the stalling TrainJobs: those not Failed for the stall (`stalls_missed`) and those restarted other than
    exactly once (`stall_restarts_wrong`: the status says so, or more than two JobSets were seen)."""
    jobs = {j["metadata"]["name"]: j for j in api.list(c.API_VERSION, "TrainJob", namespace)}
    missed = wrong = 0
    for name in names:
        status = (jobs.get(name) or {}).get("status") or {}
        failed = [
            cond for cond in status.get("conditions") or [] if cond.get("type") == "Failed" and cond["status"] == "True"
        ]
        if not failed or failed[0].get("reason") != c.REASON_PROGRESS_STALLED:
            missed += 1
        seen = tracker.jobsets.get(name)
        if status.get("restarts") != 1 or (seen is not None and len(seen.uids) > 2):
            wrong += 1
    return {"stalls_missed": missed, "stall_restarts_wrong": wrong}


def trainjobs(namespace: str, count: int, seed: int, suspended_share: float = 0.2) -> list[dict[str, Any]]:
    """A mixed burst: torch, MPI (2 nodes) and initializer jobs; some created suspended."""
    rng = random.Random(seed)
    jobs = []
    for index in range(count):
        kind = ("torch", "mpi", "torch-init")[index % 3]
        spec: dict[str, Any] = {"runtimeRef": {"name": kind, "kind": "TrainingRuntime"}}
        if kind == "mpi":
            spec["trainer"] = {"numNodes": 2}
        if kind == "torch-init":
            spec["initializer"] = {"dataset": {"storageUri": "hf://datasets/x/y"}, "model": {"storageUri": "hf://x/m"}}
        if rng.random() < suspended_share:
            spec["suspend"] = True
        jobs.append(
            {
                "apiVersion": c.API_VERSION,
                "kind": "TrainJob",
                "metadata": {"name": f"{kind}-{index:05d}", "namespace": namespace},
                "spec": spec,
            }
        )
    return jobs


# --- the object tracker ---------------------------------------------------------------------------------------


@dataclass
class Seen:
    uids: set[str] = field(default_factory=set)
    running_generation: dict[str, int] = field(default_factory=dict)
    """uid → generation when first seen running (not suspended)."""
    data: set[str] = field(default_factory=set)
    order: list[str] = field(default_factory=list)
    """uids in the order first seen."""
    never_ran: dict[str, bool] = field(default_factory=dict)
    """JobSets: uid → suspended and never ran at every sighting (`rebuildable`, docs/compatibility.md D24)."""

    def replaced(self) -> list[str]:
        """The uids another one replaced (every one but the newest)."""
        return self.order[:-1]


class Poller:
    """A thread that calls `observe` with an Api of its own every `interval` seconds until stopped (lists survive
    API server restarts; a watch would need re-listing anyway)."""

    def __init__(self, api_factory: Callable[[], Api], namespace: str, interval: float = 1.0) -> None:
        self.namespace, self.interval = namespace, interval
        self._stop = threading.Event()
        self._api_factory = api_factory
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    def _run(self) -> None:
        api = self._api_factory()
        try:
            while not self._stop.is_set():
                with contextlib.suppress(Exception):
                    self.observe(api)
                self._stop.wait(self.interval)
        finally:
            api.close()

    def observe(self, api: Api) -> None:
        raise NotImplementedError


class Tracker(Poller):
    """Polls JobSets and Secrets of a namespace and remembers every uid, the generation of each JobSet once running
    and every Secret's data."""

    def __init__(self, api_factory: Callable[[], Api], namespace: str, interval: float = 1.0) -> None:
        super().__init__(api_factory, namespace, interval)
        self.jobsets: dict[str, Seen] = {}
        self.secrets: dict[str, Seen] = {}
        self.secret_values: set[str] = set()

    def observe(self, api: Api) -> None:
        for js in api.run(api.client.list("jobset.x-k8s.io/v1alpha2", "JobSet", self.namespace)):
            meta = js["metadata"]
            seen = self.jobsets.setdefault(meta["name"], Seen())
            if meta["uid"] not in seen.uids:
                seen.order.append(meta["uid"])
            seen.uids.add(meta["uid"])
            seen.never_ran[meta["uid"]] = seen.never_ran.get(meta["uid"], True) and rebuildable(js)
            if not (js.get("spec") or {}).get("suspend"):
                seen.running_generation.setdefault(meta["uid"], int(meta.get("generation") or 0))
            elif meta["uid"] in seen.running_generation:  # suspended again after running: a mutation
                seen.running_generation[meta["uid"]] = -1
        for secret in api.run(api.client.list("v1", "Secret", self.namespace)):
            meta = secret["metadata"]
            if not meta["name"].endswith("-mpi-ssh-auth"):
                continue
            seen = self.secrets.setdefault(meta["name"], Seen())
            seen.uids.add(meta["uid"])
            data = secret.get("data") or {}
            seen.data.add(hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest())
            self.secret_values.update(str(v) for v in data.values())

    def recreated_jobsets(self, restarted: frozenset[str] = frozenset()) -> int:
        """JobSets deleted and created again although they had run (or were not seen suspended and never run):
        real duplicates. `restarted`: TrainJobs whose JobSet a stall restart re-creates on purpose (counted apart)."""
        return sum(
            1
            for name, seen in self.jobsets.items()
            if name not in restarted and any(not seen.never_ran.get(uid, False) for uid in seen.replaced())
        )

    def rebuilt_suspended(self) -> int:
        """JobSets re-created only ever having been suspended and never run: the rebuild of D24 (an older shape
        JobSet refuses in place) or of a resize while suspended; nothing had started."""
        return sum(
            1
            for seen in self.jobsets.values()
            if seen.replaced() and all(seen.never_ran.get(uid, False) for uid in seen.replaced())
        )

    def mutated_jobsets(self, final: list[dict[str, Any]]) -> int:
        """Running JobSets whose generation moved after they were first seen running."""
        mutated = 0
        for js in final:
            meta = js["metadata"]
            first = self.jobsets.get(meta["name"], Seen()).running_generation.get(meta["uid"])
            if first is not None and (first == -1 or int(meta.get("generation") or 0) != first):
                mutated += 1
        return mutated

    def regenerated_secrets(self) -> int:
        return sum(1 for seen in self.secrets.values() if len(seen.uids) > 1 or len(seen.data) > 1)


# --- logs -----------------------------------------------------------------------------------------------------


def secret_needles(values: Iterable[str]) -> set[str]:
    """What must never appear in a log: each Secret value (base64, as stored) and the key lines it decodes to."""
    needles = {"PRIVATE KEY-----", "LS0tLS1CRUdJTi"}
    for value in values:
        if len(value) >= 24:
            needles.add(value[:40])
            with contextlib.suppress(ValueError):
                for line in base64.b64decode(value).decode("utf-8", "replace").splitlines():
                    if len(line) >= 40 and not line.startswith("-----") and not line.startswith("ssh-"):
                        needles.add(line[:40])
    return needles


TRACEBACK = "Traceback (most recent call last)"
#: Lines of each traceback printed with the counts (pytest shows them when the count fails the test).
TRACEBACK_LINES = 40


def scan_logs(paths: Iterable[Path], needles: set[str]) -> tuple[int, int]:
    """(tracebacks, leaks) over the given log files. Each traceback is printed with its log's path and the line
    before it, so a failed count carries its evidence (pytest deletes old temporary directories, logs included)."""
    tracebacks = leaks = 0
    for path in paths:
        if not path.exists():
            continue
        text = path.read_text(errors="replace")
        tracebacks += text.count(TRACEBACK)
        leaks += sum(text.count(needle) for needle in needles)
        lines = text.splitlines()
        for i, line in enumerate(lines):
            if TRACEBACK in line:
                print(f"--- traceback in {path}, line {i + 1}:")
                print("\n".join(lines[max(i - 1, 0) : i + TRACEBACK_LINES]))
    return tracebacks, leaks


def webhook_cert_values(api: Api, namespace: str, name: str = "trainjob-operator-webhook-cert") -> list[str]:
    try:
        secret = api.run(api.client.get("v1", "Secret", name, namespace)) or {}
    except Exception:
        return []
    return [str(v) for k, v in (secret.get("data") or {}).items() if k.endswith(".key")]


# --- orphans --------------------------------------------------------------------------------------------------


ORPHAN_KINDS = (("jobset.x-k8s.io/v1alpha2", "JobSet"), ("v1", "Secret"), ("v1", "ConfigMap"))


def children_left(api: Api, namespace: str, show: bool = False) -> int:
    left: list[str] = []
    for api_version, kind in ORPHAN_KINDS:
        for obj in api.list(api_version, kind, namespace):
            meta = obj["metadata"]
            owners = meta.get("ownerReferences") or []
            if any(o.get("kind") in (c.TRAINJOB_KIND, c.JOBSET_KIND) for o in owners):
                left.append(
                    f"{kind}/{meta['name']} (created {meta.get('creationTimestamp')}, "
                    f"deleting {bool(meta.get('deletionTimestamp'))}, finalizers {meta.get('finalizers')})"
                )
    if show and left:
        print("children left:", *left, sep="\n  ")
    return len(left)


# --- a local load balancer ------------------------------------------------------------------------------------


class Balancer:
    """A TCP forwarder on 127.0.0.1 in front of the replicas' webhook servers (TLS passes through), as a Service
    would be: each new connection goes to the first backend that accepts it."""

    def __init__(self, backends: list[int]) -> None:
        self.backends = backends
        self.port = free_port()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.AbstractServer | None = None

    def start(self) -> Balancer:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._handle, "127.0.0.1", self.port), self._loop
        ).result(10)
        return self

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for port in random.sample(self.backends, len(self.backends)):
            try:
                up_reader, up_writer = await asyncio.open_connection("127.0.0.1", port)
                break
            except OSError:
                continue
        else:
            writer.close()
            return

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(Exception):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            with contextlib.suppress(Exception):
                dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)


def process_cpu_seconds(pid: int) -> float:
    """utime + stime of a process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def kwokctl(cluster: Any, *args: str) -> subprocess.CompletedProcess[str]:
    from harness import cluster as cluster_lib

    return subprocess.run(
        [str(Path(cluster.bin_dir) / "kwokctl"), "--name", cluster.name, *args],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, **cluster_lib._kwok_env(Path(cluster.bin_dir))},
    )


class Watchdog:
    """What a kubelet would do for static pods: restart control-plane components that exit after a cluster restart
    (kube-controller-manager gives up when the API server is slow to become healthy, and kwok's binary runtime does
    not supervise it). Revived processes are written to kwok's pid files, so `cluster down` stops them."""

    def __init__(self, cluster: Any) -> None:
        from harness import cluster as cluster_lib

        self.root = cluster_lib.state_dir() / "kwok" / "clusters" / cluster.name
        self.revived: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Watchdog:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)

    def _components(self) -> dict[str, dict[str, Any]]:
        import yaml

        for doc in yaml.safe_load_all((self.root / "kwok.yaml").read_text()):
            if doc and doc.get("kind") == "KwokctlConfiguration":
                return {comp["name"]: comp for comp in doc.get("components") or []}
        return {}

    def _run(self) -> None:
        while not self._stop.wait(3):
            with contextlib.suppress(OSError, ValueError):
                for pid_file in (self.root / "pids").glob("*.pid"):
                    pid = int(pid_file.read_text().strip() or 0)
                    if pid and Path(f"/proc/{pid}").exists():
                        continue
                    comp = self._components().get(pid_file.stem)
                    if comp is None:
                        continue
                    log = (self.root / "logs" / f"{comp['name']}.log").open("ab")
                    proc = subprocess.Popen(
                        [comp["binary"], *comp.get("args", [])],
                        cwd=comp.get("workDir"),
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                    pid_file.write_text(str(proc.pid))
                    self.revived.append(comp["name"])
