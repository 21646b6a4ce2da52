"""Proven under faults, on the real local control plane (kube-apiserver, etcd, kube-controller-manager with its
garbage collector, the JobSet controller, kwok nodes): each scenario prints one line of counts and fails on any
nonzero count. CI size by default (`make test`); `make chaos` runs the full size (TRAINJOB_CHAOS_SIZE=full).

- replica kills: two replicas with leader election and webhooks behind one local load balancer; the leader is
  SIGKILLed at random moments during a mixed burst (torch, MPI, initializers, some suspended and resumed later).
- API server and etcd restart mid-burst: the operator converges without being restarted, without a hot loop.
- fuzzed input through the real admission path: generated TrainJob/runtime pairs applied with webhooks on.
Every scenario also counts tracebacks and Secret material (MPI SSH keys, webhook keys) in every operator log.
"""

from __future__ import annotations

import json
import os
import random
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from chaos_support import (
    FULL,
    Api,
    Balancer,
    Figures,
    Tracker,
    Watchdog,
    children_left,
    kwokctl,
    p50,
    process_cpu_seconds,
    runtimes,
    scan_logs,
    secret_needles,
    size,
    stall_counts,
    stall_runtime,
    stalling_trainjobs,
    trainjobs,
    webhook_cert_values,
)

from operator_fixtures import OPERATOR_NAMESPACE, Kube, OperatorProcess, free_port
from trainjob_operator.api import constants as c

pytestmark = [pytest.mark.cluster, pytest.mark.chaos, pytest.mark.timeout(size(600, 3600))]

LEADER_ELECTION = {
    "lease_name": "trainjob-operator-chaos",
    "lease_duration_seconds": 4,
    "renew_deadline_seconds": 3,
    "retry_period_seconds": 1,
}


@dataclass
class Slot:
    name: str
    health_port: int = field(default_factory=free_port)
    webhook_port: int = field(default_factory=free_port)
    status_port: int = field(default_factory=free_port)
    incarnation: int = 0
    process: OperatorProcess | None = None


class Replicas:
    """Operator replicas with fixed ports (a killed one comes back on the same ports, as a restarted pod would).
    Their status servers sit behind one local load balancer, as behind a Service: every replica writes the same
    KUBEFLOW_TRAINER_SERVER_URL into trainer pods (with one URL per replica, a suspended JobSet built by one could
    not be resumed in place by another: JobSet refuses pod template changes, and D24 rebuilt it)."""

    def __init__(
        self,
        kubeconfig: str,
        tmp: Path,
        count: int,
        url_port: int | None = None,
        webhook: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        self.kubeconfig, self.tmp, self.url_port = kubeconfig, tmp, url_port
        self.webhook = webhook or {}
        """Per replica name: more `webhook` settings."""
        self.slots = [Slot(f"replica-{chr(97 + i)}") for i in range(count)]
        self.logs: list[Path] = []
        self.status_balancer = Balancer([s.status_port for s in self.slots])
        self._balancing = False

    def start(self, slot: Slot) -> OperatorProcess:
        if not self._balancing:
            self.status_balancer.start()
            self._balancing = True
        slot.incarnation += 1
        webhook: dict[str, Any] = {"port": slot.webhook_port, **self.webhook.get(slot.name, {})}
        if self.url_port:
            webhook["url_port"] = self.url_port
        status = {"port": slot.status_port, "url_port": self.status_balancer.port}
        slot.process = OperatorProcess(
            self.kubeconfig,
            f"{slot.name}-{slot.incarnation}",
            {"leader_election": LEADER_ELECTION, "webhook": webhook, "status_server": status},
            health_port=slot.health_port,
            webhook_port=slot.webhook_port,
            status_port=slot.status_port,
        ).start(self.tmp)
        assert slot.process.log_path is not None
        self.logs.append(slot.process.log_path)
        return slot.process

    def start_all(self) -> None:
        for slot in self.slots:
            self.start(slot)
        for slot in self.slots:
            assert slot.process is not None
            wait(slot.process.ready, 90, f"{slot.name} ready")
        wait(lambda: self.leader() is not None, 30, "a leader")

    def leader(self) -> Slot | None:
        for slot in self.slots:
            if (
                slot.process is not None
                and slot.process.proc is not None
                and slot.process.proc.poll() is None
                and slot.process.metric("trainjob_operator_leader") == 1
            ):
                return slot
        return None

    def stop_all(self) -> None:
        for slot in self.slots:
            if slot.process is not None:
                slot.process.stop()
        if self._balancing:
            self.status_balancer.stop()
            self._balancing = False


def wait(fn: Any, timeout: float, what: str, interval: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = fn()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def converged(api: Api, namespace: str, want: set[str]) -> tuple[set[str], list[dict[str, Any]]]:
    """The TrainJobs of `want` that have their JobSet (owned by them, running), and the JobSets."""
    jobs = {j["metadata"]["name"]: j for j in api.list(c.API_VERSION, "TrainJob", namespace)}
    jobsets = api.list("jobset.x-k8s.io/v1alpha2", "JobSet", namespace)
    done = set()
    for js in jobsets:
        name = js["metadata"]["name"]
        job = jobs.get(name)
        owners = js["metadata"].get("ownerReferences") or []
        if (
            job is not None
            and name in want
            and not (js.get("spec") or {}).get("suspend")
            and any(o.get("uid") == job["metadata"]["uid"] and o.get("controller") for o in owners)
        ):
            done.add(name)
    return done, jobsets


def delete_all_and_count_orphans(kube: Kube, api: Api, namespace: str, timeout: float) -> int:
    """Delete every TrainJob; the real garbage collector must remove every child (JobSets, Secrets, ConfigMaps)."""
    del kube  # deletecollection requests, not a kubectl call per TrainJob; the server goes on past our timeout
    for _ in range(10):
        try:
            api.run(api.client.request("DELETE", f"/apis/{c.API_VERSION}/namespaces/{namespace}/trainjobs"))
            break
        except Exception:
            time.sleep(2)
    deadline = time.monotonic() + timeout
    left = children_left(api, namespace)
    while left and time.monotonic() < deadline:
        time.sleep(1)
        left = children_left(api, namespace)
    return children_left(api, namespace, show=True) if left else 0


def needles_for(tracker: Tracker, api: Api) -> set[str]:
    return secret_needles([*tracker.secret_values, *webhook_cert_values(api, OPERATOR_NAMESPACE)])


# --- replica kills --------------------------------------------------------------------------------------------


def test_replica_kills_during_a_burst(
    exclusive: None, kube: Kube, kubeconfig: str, namespace: str, tmp_path: Path
) -> None:
    count, kills = size(30, 1000), size(2, 10)
    spread = size(12.0, 150.0)
    rng = random.Random(17)
    replicas = Replicas(kubeconfig, tmp_path, 2)
    balancer = Balancer([s.webhook_port for s in replicas.slots]).start()
    replicas.url_port = balancer.port
    api = Api(kubeconfig)
    tracker = Tracker(lambda: Api(kubeconfig), namespace, interval=size(1, 3)).start()
    failovers: list[float] = []
    kill_errors: list[str] = []
    try:
        replicas.start_all()
        refused = api.create_all([*runtimes(namespace), stall_runtime(namespace)], concurrency=1)
        assert not refused, refused
        jobs = trainjobs(namespace, count, seed=17)
        suspended = [j["metadata"]["name"] for j in jobs if j["spec"].get("suspend")]
        stalling = stalling_trainjobs(namespace, size(4, 40))  # issue 35: stalls seen and restarted once each
        jobs = [job for pair in zip(jobs, stalling, strict=False) for job in pair] + jobs[len(stalling) :]

        def killer() -> None:
            try:
                for _ in range(kills):
                    time.sleep(rng.uniform(1.0, spread / kills))
                    leader = wait(replicas.leader, 60, "a leader to kill")
                    standby = next(s for s in replicas.slots if s is not leader)
                    assert leader.process is not None and leader.process.proc is not None
                    leader.process.proc.kill()
                    killed = time.monotonic()
                    wait(
                        lambda standby=standby: replicas.leader() is standby,
                        60,
                        "the standby taking the Lease",
                        interval=0.05,
                    )
                    failovers.append(time.monotonic() - killed)
                    leader.process.proc.wait(timeout=10)
                    restarted = replicas.start(leader)
                    wait(restarted.ready, 90, "the killed replica back")
            except BaseException as err:  # reported by the main thread
                kill_errors.append(repr(err))

        thread = threading.Thread(target=killer, daemon=True)
        thread.start()
        refused = api.create_all(jobs, spread_seconds=spread * 0.6)
        api.patch_all("TrainJob", namespace, suspended, {"spec": {"suspend": False}})
        thread.join(timeout=spread + 300)
        assert not kill_errors, kill_errors
        stalls = {j["metadata"]["name"] for j in stalling} - set(refused)
        want = {j["metadata"]["name"] for j in jobs} - set(refused) - stalls
        deadline = time.monotonic() + size(180, 900)
        done, jobsets = converged(api, namespace, want)
        while done != want and time.monotonic() < deadline:
            time.sleep(2)
            done, jobsets = converged(api, namespace, want)
        while stall_counts(api, namespace, stalls, tracker)["stalls_missed"] and time.monotonic() < deadline:
            time.sleep(2)
        tracker.observe(api)
        figures = Figures(
            "replica-kills",
            {
                "trainjobs": 0,
                "refused": len(refused),
                "lost": len(want - done),
                "duplicates": tracker.recreated_jobsets(restarted=frozenset(stalls)),
                "mutated": tracker.mutated_jobsets([js for js in jobsets if js["metadata"]["name"] not in stalls]),
                **stall_counts(api, namespace, stalls, tracker),
                # nothing is resized here and every replica writes the same pod template: no rebuild is due either
                "rebuilt_suspended": tracker.rebuilt_suspended(),
                "regenerated": tracker.regenerated_secrets(),
            },
        )
        figures.counts.pop("trainjobs")
        figures.measures.update(
            {
                "trainjobs": float(len(want)),
                "kills": float(len(failovers)),
                "mpi_secrets": float(len(tracker.secrets)),
                "failover_p50_s": p50(failovers),
                "max_failover_s": max(failovers, default=0.0),
            }
        )
        print(f"\n(before deleting) {figures.line()}")
        figures.counts["orphans"] = delete_all_and_count_orphans(kube, api, namespace, size(120, 600))
        tracker.stop()
        tracebacks, leaks = scan_logs(replicas.logs, needles_for(tracker, api))
        figures.counts.update({"tracebacks": tracebacks, "leaks": leaks})
        figures.report()
    finally:
        tracker.stop()
        replicas.stop_all()
        balancer.stop()
        api.close()


# --- API server and etcd restart ------------------------------------------------------------------------------


def test_api_server_and_etcd_restart_mid_burst(
    exclusive: None, kube: Kube, cluster: Any, kubeconfig: str, namespace: str, tmp_path: Path
) -> None:
    count = size(24, 300)
    spread = size(10.0, 40.0)
    replicas = Replicas(kubeconfig, tmp_path, 1)
    api = Api(kubeconfig)
    tracker = Tracker(lambda: Api(kubeconfig), namespace, interval=1).start()
    watchdog = Watchdog(cluster)
    try:
        replicas.start_all()
        slot = replicas.slots[0]
        assert slot.process is not None and slot.process.proc is not None
        pid = slot.process.proc.pid
        assert not api.create_all(runtimes(namespace), concurrency=1)
        jobs = trainjobs(namespace, count, seed=23, suspended_share=0.0)
        outage: dict[str, float] = {}

        def restart() -> None:
            time.sleep(spread / 3)
            outage["cpu_before"] = process_cpu_seconds(pid)
            outage["stopped"] = time.monotonic()
            stopped = kwokctl(cluster, "stop", "cluster")
            assert stopped.returncode == 0, stopped.stderr
            time.sleep(size(5, 20))  # the outage itself: nothing answers
            outage["cpu_during"] = process_cpu_seconds(pid) - outage["cpu_before"]
            outage["down_s"] = time.monotonic() - outage["stopped"]
            started = kwokctl(cluster, "start", "cluster")
            assert started.returncode == 0, started.stderr
            watchdog.start()
            wait(
                lambda: cluster.kubectl("get", "--raw", "/readyz", check=False).returncode == 0,
                120,
                "the API server back",
            )
            outage["back"] = time.monotonic()

        thread = threading.Thread(target=restart, daemon=True)
        thread.start()
        refused = api.create_all(jobs, spread_seconds=spread, attempts=200)
        thread.join(timeout=300)
        assert "back" in outage, "the control plane did not come back"
        want = {j["metadata"]["name"] for j in jobs} - set(refused)
        done, jobsets = converged(api, namespace, want)
        deadline = time.monotonic() + size(180, 600)
        while done != want and time.monotonic() < deadline:
            time.sleep(1)
            done, jobsets = converged(api, namespace, want)
        recovery = time.monotonic() - outage["back"]
        tracker.observe(api)
        assert slot.process.proc.poll() is None and slot.process.proc.pid == pid, "the operator was restarted"
        log_lines = sum(1 for _ in replicas.logs[0].open(errors="replace"))
        figures = Figures(
            "apiserver-restart",
            {
                "refused": len(refused),
                "lost": len(want - done),
                "duplicates": tracker.recreated_jobsets(),
                "mutated": tracker.mutated_jobsets(jobsets),
                "regenerated": tracker.regenerated_secrets(),
                "operator_restarts": 0,
            },
            {
                "trainjobs": float(len(want)),
                "outage_s": outage["down_s"],
                "recovery_s": recovery,
                "cpu_s_per_min_in_outage": outage["cpu_during"] / outage["down_s"] * 60,
                "log_lines": float(log_lines),
            },
        )
        figures.counts["orphans"] = delete_all_and_count_orphans(kube, api, namespace, size(120, 600))
        figures.measures["components_revived"] = float(len(watchdog.revived))
        tracker.stop()
        tracebacks, leaks = scan_logs(replicas.logs, needles_for(tracker, api))
        figures.counts.update(
            {
                "tracebacks": tracebacks,
                "leaks": leaks,
                "hot_loop": int(outage["cpu_during"] / outage["down_s"] * 60 > 30),
            }
        )
        figures.report()
    finally:
        watchdog.stop()
        tracker.stop()
        replicas.stop_all()
        api.close()


# --- certificate rotation under load ---------------------------------------------------------------------------


def force_rotation(api: Api, now: float) -> tuple[str, str]:
    """Make the webhook certificate look due for rotation, as time would: the same CA and key, a serving certificate
    expiring in a day (inside `rotate_before_days`). Returns (the CA written, the certificate written)."""
    import base64
    import datetime as dt

    from trainjob_operator import certs

    secret = api.run(api.client.get("v1", "Secret", "trainjob-operator-webhook-cert", OPERATOR_NAMESPACE))
    assert secret is not None
    data = secret["data"]
    bundle = certs.Bundle(*(base64.b64decode(data[k]) for k in ("ca.crt", "ca.key", "tls.crt", "tls.key")))
    stamp = dt.datetime.fromtimestamp(now, dt.UTC) - dt.timedelta(days=364)
    due = certs.generate(sorted(bundle.sans()), stamp, days=365, ca_of=bundle)
    data = {
        k: base64.b64encode(v).decode()
        for k, v in (("ca.crt", due.ca_cert), ("ca.key", due.ca_key), ("tls.crt", due.cert), ("tls.key", due.key))
    }
    api.run(api.client.replace({**secret, "data": data}))
    return data["ca.crt"], data["tls.crt"]


def test_certificate_rotation_during_a_burst(
    exclusive: None, kube: Kube, kubeconfig: str, namespace: str, tmp_path: Path
) -> None:
    """Two replicas behind one balancer; the certificate comes due during a burst, several times. One replica checks
    every 2 s and rotates; the other keeps its default (5 minutes) and goes on serving the certificate it loaded:
    the API server must keep trusting both (no webhook call failing on TLS), nothing refused, nothing lost."""
    count, rotations = size(24, 300), size(2, 5)
    spread = float(size(12, 120))
    replicas = Replicas(kubeconfig, tmp_path, 2, webhook={"replica-a": {"cert_check_seconds": 2}})
    balancer = Balancer([s.webhook_port for s in replicas.slots]).start()
    replicas.url_port = balancer.port
    api = Api(kubeconfig)
    tracker = Tracker(lambda: Api(kubeconfig), namespace, interval=2).start()
    cas: set[str] = set()
    keys: set[str] = set()
    took: list[float] = []
    errors: list[str] = []
    try:
        replicas.start_all()
        assert not api.create_all(runtimes(namespace), concurrency=1)
        jobs = trainjobs(namespace, count, seed=31, suspended_share=0.0)

        def secret_data() -> dict[str, str]:
            secret = (
                api_rot.run(api_rot.client.get("v1", "Secret", "trainjob-operator-webhook-cert", OPERATOR_NAMESPACE))
                or {}
            )
            data = dict(secret.get("data") or {})
            cas.add(data.get("ca.crt", ""))
            keys.add(data.get("tls.key", ""))
            return data

        api_rot = Api(kubeconfig)

        def rotate() -> None:
            try:
                secret_data()
                for _ in range(rotations):
                    time.sleep(spread / (rotations + 1))
                    _, written = force_rotation(api_rot, time.time())
                    began = time.monotonic()
                    wait(
                        lambda written=written: secret_data().get("tls.crt") not in (written, None),
                        60,
                        "the replica rotating the certificate",
                    )
                    took.append(time.monotonic() - began)
            except BaseException as err:
                errors.append(repr(err))
            finally:
                api_rot.close()

        thread = threading.Thread(target=rotate, daemon=True)
        thread.start()
        refused = api.create_all(jobs, spread_seconds=spread)
        thread.join(timeout=spread + 120)
        assert not errors, errors
        want = {j["metadata"]["name"] for j in jobs} - set(refused)
        done, jobsets = converged(api, namespace, want)
        deadline = time.monotonic() + size(180, 600)
        while done != want and time.monotonic() < deadline:
            time.sleep(2)
            done, jobsets = converged(api, namespace, want)
        tracker.observe(api)
        mutated = tracker.mutated_jobsets(jobsets)
        tls = [m for m in api.webhook_failures if "x509" in m or "certificate" in m or "tls" in m.lower()]
        if api.webhook_failures:
            print("webhook call failures:", api.webhook_failures[:3])
        figures = Figures(
            "cert-rotation",
            {
                "refused": len(refused),
                "tls_failures": len(tls),
                "ca_changed": len(cas - {""}) - 1,
                "lost": len(want - done),
                "duplicates": tracker.recreated_jobsets(),
                "mutated": mutated,
                "regenerated": tracker.regenerated_secrets(),
            },
            {
                "trainjobs": float(len(want)),
                "rotations": float(len(took)),
                "webhook_call_failures": float(len(api.webhook_failures)),
                "max_rotation_s": max(took, default=0.0),
            },
        )
        figures.counts["orphans"] = delete_all_and_count_orphans(kube, api, namespace, size(120, 600))
        tracker.stop()
        needles = secret_needles(
            [*tracker.secret_values, *(k for k in keys if k), *webhook_cert_values(api, OPERATOR_NAMESPACE)]
        )
        tracebacks, leaks = scan_logs(replicas.logs, needles)
        figures.counts.update({"tracebacks": tracebacks, "leaks": leaks})
        figures.report()
    finally:
        tracker.stop()
        replicas.stop_all()
        balancer.stop()
        api.close()


# --- fuzzed input through the real admission path -------------------------------------------------------------

FIELD = re.compile(r"\b(spec|metadata|status|apiVersion|kind)\b|<root>|<nil>|Go struct field \w")


def outcome(job: dict[str, Any] | None, jobset_names: set[str]) -> bool:
    """An accepted TrainJob either has its JobSet or says why not (ReconcileFailed, Failed), or waits on purpose
    (suspended, managed by another controller)."""
    if job is None:
        return True
    spec, status = job.get("spec") or {}, job.get("status") or {}
    if job["metadata"]["name"] in jobset_names or spec.get("suspend"):
        return True
    if spec.get("managedBy") not in (None, c.DEFAULT_MANAGED_BY):
        return True
    return any(
        cond.get("type") in (c.CONDITION_RECONCILE_FAILED, c.CONDITION_FAILED, c.CONDITION_COMPLETE)
        and cond.get("status") == "True"
        and cond.get("message")
        for cond in status.get("conditions") or []
    )


def test_fuzzed_input_through_the_admission_path(
    exclusive: None, kube: Kube, kubeconfig: str, namespace: str, tmp_path: Path
) -> None:
    """Full size: 10,000 pairs in rounds of 2,000 (each round created, waited on, then deleted, so the cluster
    holds about one round), generated in a thread while the previous round is created."""
    from hypothesis import HealthCheck, given, settings
    from test_fuzz import hostile_pairs

    cases = size(int(os.environ.get("TRAINJOB_CHAOS_FUZZ_CASES", "30")), 10_000)
    batch = int(os.environ.get("TRAINJOB_CHAOS_FUZZ_BATCH", size(cases, 2000)))
    concurrency = int(os.environ.get("TRAINJOB_CHAOS_FUZZ_CONCURRENCY", size(8, 32)))
    replicas = Replicas(kubeconfig, tmp_path, 1)
    api = Api(kubeconfig)
    token = f"{random.randrange(16**6):06x}"
    """Names and the label of this run's runtimes (half of them are cluster-scoped)."""
    pairs: list[tuple[dict[str, Any], dict[str, Any]]] = []
    generated = threading.Event()

    @settings(max_examples=cases, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(hostile_pairs())
    def collect(pair: tuple[dict[str, Any], dict[str, Any]]) -> None:
        pairs.append(pair)

    def generate() -> None:
        try:
            collect()
        finally:
            generated.set()

    started = time.monotonic()
    threading.Thread(target=generate, name="fuzz-generator", daemon=True).start()
    refused: dict[str, str] = {}
    accepted: set[str] = set()
    pending: set[str] = set()
    stuck: dict[str, dict[str, Any]] = {}
    """The last view of TrainJobs seen without an outcome (printed if any is left)."""
    settle_s = 0.0
    try:
        replicas.start_all()
        done = 0
        while done < cases:
            want = min(done + batch, cases)
            wait(lambda want=want: len(pairs) >= want or generated.is_set(), 3600, "generated pairs", 0.5)
            chunk = pairs[done : done + batch]
            if not chunk:
                break
            names = fuzz_objects(chunk, done, namespace, token)
            objects = [o for pair in chunk for o in pair]
            refused.update(
                api.create_all([o for o in objects if o.get("kind") != "TrainJob"], concurrency, attempts=10)
            )
            refused_jobs = api.create_all([o for o in objects if o.get("kind") == "TrainJob"], concurrency, 10)
            refused.update({f"job {k}": v for k, v in refused_jobs.items()})
            round_accepted = names - set(refused_jobs)
            accepted |= round_accepted

            def settled(want: set[str] = round_accepted) -> set[str]:
                jobs = {j["metadata"]["name"]: j for j in api.list(c.API_VERSION, "TrainJob", namespace)}
                jobsets = {j["metadata"]["name"] for j in api.list("jobset.x-k8s.io/v1alpha2", "JobSet", namespace)}
                left = {name for name in want if not outcome(jobs.get(name), jobsets)}
                stuck.update({name: jobs[name] for name in left if name in jobs})
                return left

            waited = time.monotonic()
            left = settled()
            deadline = time.monotonic() + size(90, 600)
            while left and time.monotonic() < deadline:
                time.sleep(2)
                left = settled()
            settle_s += time.monotonic() - waited
            pending |= left
            done += len(chunk)
            print(
                f"\nfuzz: {done}/{cases} pairs, {len(accepted)} accepted, {len(pending)} without outcome, "
                f"{time.monotonic() - started:.0f} s",
                flush=True,
            )
            if done < cases:
                delete_fuzz_objects(api, namespace, token)
        elapsed = time.monotonic() - started
        unnamed = {k: v for k, v in refused.items() if not FIELD.search(v)}
        slot = replicas.slots[0]
        assert slot.process is not None and slot.process.proc is not None
        figures = Figures(
            "admission-fuzz",
            {
                "crashes": int(slot.process.proc.poll() is not None),
                "unnamed_refusals": len(unnamed),
                "without_outcome": len(pending),
            },
            {
                "cases": float(done),
                "accepted": float(len(accepted)),
                "refused": float(len([k for k in refused if k.startswith("job ")])),
                "seconds": elapsed,
                "pairs_per_s": done / max(elapsed, 1e-9),
                "settle_s": settle_s,
            },
        )
        delete_fuzz_objects(api, namespace, token)
        tracebacks, leaks = scan_logs(replicas.logs, secret_needles(webhook_cert_values(api, OPERATOR_NAMESPACE)))
        figures.counts.update({"tracebacks": tracebacks, "leaks": leaks})
        if unnamed or pending:
            print("unnamed refusals:", dict(list(unnamed.items())[:5]), "without outcome:", sorted(pending)[:5])
            for name in sorted(pending)[:5]:
                job = stuck.get(name, {})
                print(f"  {name}: spec={json.dumps(job.get('spec'))[:1500]} status={json.dumps(job.get('status'))}")
            print("operator log:", ", ".join(str(p) for p in replicas.logs))
        figures.report()
    finally:
        replicas.stop_all()
        api.close()


FUZZ_LABEL = "chaos.trainjob-operator/fuzz"


def fuzz_objects(
    chunk: list[tuple[dict[str, Any], dict[str, Any]]], first: int, namespace: str, token: str
) -> set[str]:
    """Name each pair (TrainJob and runtime alike, unique across runs of the session: ClusterTrainingRuntimes
    outlive the namespace) and label the runtime; returns the TrainJobs' names."""
    names = set()
    for index, (job, runtime) in enumerate(chunk, start=first):
        name = f"fz{token}-{index:05d}"
        runtime.setdefault("metadata", {}).update({"name": name, "namespace": namespace})
        runtime["metadata"].setdefault("labels", {})[FUZZ_LABEL] = token
        job.setdefault("metadata", {}).update({"name": name, "namespace": namespace})
        for key in ("uid", "creationTimestamp", "generation", "resourceVersion"):
            job["metadata"].pop(key, None)
        ref = (job.get("spec") or {}).get("runtimeRef")
        if isinstance(ref, dict):
            ref["name"] = name
        names.add(name)
    return names


def delete_fuzz_objects(api: Api, namespace: str, token: str) -> None:
    """Delete this run's TrainJobs and runtimes (namespaced and cluster-scoped) as collections; the garbage
    collector removes the children in the background."""
    for path, params in (
        (f"/apis/{c.API_VERSION}/namespaces/{namespace}/trainjobs", None),
        (f"/apis/{c.API_VERSION}/namespaces/{namespace}/trainingruntimes", None),
        (f"/apis/{c.API_VERSION}/clustertrainingruntimes", {"labelSelector": f"{FUZZ_LABEL}={token}"}),
    ):
        for _ in range(10):
            try:
                api.run(api.client.request("DELETE", path, params=params))
                break
            except Exception:
                time.sleep(2)


def test_the_suite_size_is_known() -> None:
    """`make chaos` sets TRAINJOB_CHAOS_SIZE=full; anything else is the CI size."""
    assert size(1, 2) == (2 if FULL else 1)
