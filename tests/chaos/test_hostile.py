"""A hostile network between the operator and the API server (tests/chaos/hostile.py): latency, TCP resets before
and after the API server answered, half-open connections, 429 and 503 with Retry-After, 500, 409 on writes, 410 on
watches (status and ERROR event), silent and slow watch streams, cut watches. During a mixed burst (some TrainJobs
created suspended and resumed while the faults go on) the operator must keep going without being restarted, honour
Retry-After, back off without spinning (CPU per minute measured while the faults persist), and converge once the
network heals: every TrainJob one JobSet, no Secret regenerated, nothing running re-created, nothing left once
everything is deleted."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from chaos_support import Api, Figures, Tracker, process_cpu_seconds, runtimes, scan_logs, size, trainjobs
from hostile import HostileProxy
from test_chaos import Replicas, converged, delete_all_and_count_orphans, needles_for

from operator_fixtures import Kube

pytestmark = [pytest.mark.cluster, pytest.mark.chaos, pytest.mark.timeout(size(600, 3600))]

HOT_LOOP_CPU_S_PER_MIN = 30.0
"""Half a core: an operator retrying with backoff against a failing network needs a small fraction of that."""


def test_hostile_network(exclusive: None, kube: Kube, kubeconfig: str, namespace: str, tmp_path: Path) -> None:
    count, fault_s = size(24, 300), float(size(25, 240))
    proxy = HostileProxy(kubeconfig).start()
    replicas = Replicas(proxy.kubeconfig(tmp_path / "hostile.kubeconfig"), tmp_path, 1)
    api = Api(kubeconfig)
    tracker = Tracker(lambda: Api(kubeconfig), namespace, interval=1).start()
    try:
        replicas.start_all()
        slot = replicas.slots[0]
        assert slot.process is not None and slot.process.proc is not None
        proc = slot.process.proc
        assert not api.create_all(runtimes(namespace), concurrency=1)
        jobs = trainjobs(namespace, count, seed=29)
        suspended = [j["metadata"]["name"] for j in jobs if j["spec"].get("suspend")]

        proxy.active = True
        cpu_start, started = process_cpu_seconds(proc.pid), time.monotonic()
        refused = api.create_all(jobs, spread_seconds=fault_s * 0.4)
        api.patch_all("TrainJob", namespace, suspended, {"spec": {"suspend": False}})
        burst_over = time.monotonic()
        cpu_burst_over = process_cpu_seconds(proc.pid)
        want = {j["metadata"]["name"] for j in jobs} - set(refused)
        while time.monotonic() - started < fault_s and proc.poll() is None:
            time.sleep(1)
        alive = proc.poll() is None
        cpu_end = process_cpu_seconds(proc.pid) if alive else cpu_burst_over
        faults_s = time.monotonic() - started
        under_faults, _ = converged(api, namespace, want)
        proxy.active = False
        healed = time.monotonic()

        done, jobsets = converged(api, namespace, want)
        deadline = time.monotonic() + size(180, 600)
        while done != want and time.monotonic() < deadline and proc.poll() is None:  # a dead operator: report now
            time.sleep(1)
            done, jobsets = converged(api, namespace, want)
        converge_s = time.monotonic() - healed
        tracker.observe(api)
        cpu_per_min = (cpu_end - cpu_start) / faults_s * 60
        quiet_s = max(faults_s - (burst_over - started), 1.0)
        quiet_cpu_per_min = (cpu_end - cpu_burst_over) / quiet_s * 60
        figures = Figures(
            "hostile-network",
            {
                "refused": len(refused),
                "lost": len(want - done),
                "duplicates": tracker.recreated_jobsets(),
                "rebuilt_suspended": tracker.rebuilt_suspended(),
                "mutated": tracker.mutated_jobsets(jobsets),
                "regenerated": tracker.regenerated_secrets(),
                "operator_restarts": int(proc.poll() is not None),
                "retry_after_violations": proxy.retry_after_violations,
                "hot_loop": int(cpu_per_min > HOT_LOOP_CPU_S_PER_MIN),
            },
            {
                "trainjobs": float(len(want)),
                "faults_s": faults_s,
                "requests": float(proxy.requests),
                "injected": float(sum(proxy.injected.values())),
                "converged_under_faults": float(len(under_faults)),
                "converge_after_heal_s": converge_s,
                "cpu_s_per_min_in_faults": cpu_per_min,
                "cpu_s_per_min_quiet_faults": quiet_cpu_per_min,
                **proxy.summary(),
            },
        )
        if refused:
            print("refused:", dict(list(refused.items())[:5]))
        if proxy.violations:
            print("Retry-After violations:", proxy.violations)
        print(f"\n(before deleting) {figures.line()}")
        figures.counts["orphans"] = delete_all_and_count_orphans(kube, api, namespace, size(120, 600))
        tracker.stop()
        tracebacks, leaks = scan_logs(replicas.logs, needles_for(tracker, api))
        figures.counts.update({"tracebacks": tracebacks, "leaks": leaks})
        figures.report()
    finally:
        proxy.active = False
        tracker.stop()
        replicas.stop_all()
        proxy.stop()
        api.close()


def test_the_proxy_injects_and_heals(tmp_path: Path, kubeconfig: str) -> None:
    """The proxy itself: faults only while active; a 429 carries Retry-After and an early retry is counted."""
    import asyncio

    from trainjob_operator.k8s import connection as k8s_config
    from trainjob_operator.k8s.client import ApiError, Client

    proxy = HostileProxy(kubeconfig).start()
    try:
        client = Client(k8s_config.load(proxy.kubeconfig(tmp_path / "k")), qps=0, burst=0, timeout=5)

        async def probe(times: int) -> list[Any]:
            out: list[Any] = []
            for _ in range(times):
                try:
                    out.append(bool(await client.request("GET", "/api/v1/namespaces/default")))
                except ApiError as err:
                    out.append(err.status)
                except Exception as err:  # resets, half-open timeouts
                    out.append(type(err).__name__)
            return out

        async def run() -> tuple[list[Any], list[Any], list[Any]]:
            healthy = await probe(5)
            proxy.active = True
            hostile = await probe(50)
            proxy.active = False
            healed = await probe(5)
            await client.close()
            return healthy, hostile, healed

        proxy.faults.half_open_s = 3.0
        healthy, hostile, healed = asyncio.run(run())
        assert healthy == [True] * 5 and healed == [True] * 5
        assert set(hostile) - {True} and True in hostile, hostile
        assert proxy.injected
        assert proxy.injected["throttle"] + proxy.injected["error_503"] >= 1, proxy.injected
        assert proxy.retry_after_violations == 0, proxy.violations  # the client waited as asked, probing at once
    finally:
        proxy.stop()
