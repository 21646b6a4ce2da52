"""Identity is the uid, under a burst (issue 28): TrainJobs that completed are deleted and created again under the
same names, tens (CI) or hundreds (`make chaos`) at once, each immediately after its delete (`kubectl delete -f &&
kubectl apply -f`, the SDK re-using a name), while the real garbage collector works through the predecessors'
children. Counted, each must be 0:

- inherited_states: a new incarnation that is Complete/Failed with no JobSet of its own ever seen, or whose terminal
  condition predates its creation;
- inherited_children: an object (JobSet, Secret, ConfigMap) ever seen controlled by two TrainJob uids (adopted), or
  a JobSet of a new incarnation running the predecessor's image;
- never_ran: a new incarnation without a completed JobSet of its own by the deadline;
plus tracebacks and Secret material in the operator's log.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from chaos_support import FULL, Api, Figures, Poller, runtimes, scan_logs, secret_needles, size, trainjobs
from test_chaos import Replicas, wait

from operator_fixtures import Kube
from trainjob_operator.api import constants as c
from trainjob_operator.k8s.client import ApiError

pytestmark = [pytest.mark.cluster, pytest.mark.chaos, pytest.mark.timeout(size(600, 3600))]

KINDS = (("jobset.x-k8s.io/v1alpha2", "JobSet"), ("v1", "Secret"), ("v1", "ConfigMap"))
WAITING_FOR_PREVIOUS = "WaitingForPreviousTrainJob"
"""c.REASON_PREVIOUS_TRAINJOB, spelled out so the scenario also runs against the code before issue 28."""


def controller_uid(obj: dict[str, Any]) -> str | None:
    owners = obj["metadata"].get("ownerReferences") or []
    return next((o.get("uid") for o in owners if o.get("controller") and o.get("kind") == c.TRAINJOB_KIND), None)


def node_image(jobset: dict[str, Any]) -> str | None:
    for rjob in (jobset.get("spec") or {}).get("replicatedJobs") or []:
        for ctr in rjob["template"]["spec"]["template"]["spec"]["containers"]:
            if ctr["name"] == c.NODE:
                return str(ctr.get("image"))
    return None


def terminal(job: dict[str, Any]) -> dict[str, Any] | None:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return dict(cond)
    return None


class Owners(Poller):
    """Polls the children: every object uid with every TrainJob uid seen controlling it, the JobSets by owner uid
    (with their node image and whether they completed), and the MPI Secrets' data (to scan the logs for)."""

    def __init__(self, api_factory: Callable[[], Api], namespace: str) -> None:
        super().__init__(api_factory, namespace, interval=0.3)
        self.controllers: dict[str, set[str]] = {}
        self.jobsets: dict[str, list[tuple[str | None, bool]]] = {}
        """Owner uid → (node image, completed) of each of its JobSets seen."""
        self.secret_values: set[str] = set()

    def observe(self, api: Api) -> None:
        for api_version, kind in KINDS:
            for obj in api.run(api.client.list(api_version, kind, self.namespace)):
                owner = controller_uid(obj)
                if owner is None:
                    continue
                self.controllers.setdefault(obj["metadata"]["uid"], set()).add(owner)
                if kind == c.JOBSET_KIND:
                    done = any(
                        cond.get("type") == "Completed" and cond.get("status") == "True"
                        for cond in (obj.get("status") or {}).get("conditions") or []
                    )
                    self.jobsets.setdefault(owner, []).append((node_image(obj), done))
                if kind == "Secret":
                    self.secret_values.update(str(v) for v in (obj.get("data") or {}).values())


def incarnation(job: dict[str, Any], image: str) -> dict[str, Any]:
    """The TrainJob with its trainer image set (the mark of an incarnation)."""
    spec = {**job["spec"], "trainer": {**(job["spec"].get("trainer") or {}), "image": image}}
    spec.pop("suspend", None)
    return {**job, "spec": spec}


def recreate_all(api: Api, namespace: str, jobs: list[dict[str, Any]], concurrency: int = 16) -> dict[str, str]:
    """Each TrainJob deleted (background propagation, as kubectl does) and created again at once; the name → uid of
    the new incarnations."""
    uids: dict[str, str] = {}

    async def one(job: dict[str, Any]) -> None:
        name = job["metadata"]["name"]
        with contextlib.suppress(ApiError):
            await api.client.delete(c.API_VERSION, c.TRAINJOB_KIND, name, namespace)
        for attempt in range(100):  # a delete is immediate without finalizers; retry while the name is taken
            try:
                created = await api.client.create(job)
                uids[name] = created["metadata"]["uid"]
                return
            except ApiError as err:
                if not err.conflict:
                    raise
            await asyncio.sleep(min(0.05 * (attempt + 1), 1))

    async def all_of() -> None:
        gate = asyncio.Semaphore(concurrency)

        async def gated(job: dict[str, Any]) -> None:
            async with gate:
                await one(job)

        await asyncio.gather(*(gated(j) for j in jobs))

    api.run(all_of())
    return uids


def test_trainjobs_deleted_and_created_again_by_name_inherit_nothing(
    exclusive: None, kube: Kube, kubeconfig: str, namespace: str, tmp_path: Path
) -> None:
    del kube
    count = size(24, 300)
    replicas = Replicas(kubeconfig, tmp_path, 1)
    api = Api(kubeconfig)
    owners = Owners(lambda: Api(kubeconfig), namespace).start()
    try:
        replicas.start_all()
        assert not api.create_all(runtimes(namespace, run_for="2s"), concurrency=1)
        first = [incarnation(j, "trainer:gen1") for j in trainjobs(namespace, count, seed=28, suspended_share=0)]
        assert not api.create_all(first)

        def all_complete() -> bool:
            return sum(1 for j in api.list(c.API_VERSION, "TrainJob", namespace) if terminal(j)) == count

        wait(all_complete, size(240, 1200), "the first incarnations complete")
        started = time.monotonic()
        second = [incarnation(j, "trainer:gen2") for j in first]
        new_uids = recreate_all(api, namespace, second)
        burst = time.monotonic() - started
        assert len(new_uids) == count

        def settled() -> bool:
            jobs = {j["metadata"]["name"]: j for j in api.list(c.API_VERSION, "TrainJob", namespace)}
            return all(
                name in jobs and jobs[name]["metadata"]["uid"] == uid and terminal(jobs[name])
                for name, uid in new_uids.items()
            )

        with contextlib.suppress(AssertionError):  # what never ran is counted below, not a timeout
            wait(settled, size(300, 1500), "the new incarnations finish")
        owners.observe(api)
        jobs = {j["metadata"]["name"]: j for j in api.list(c.API_VERSION, "TrainJob", namespace)}
        inherited_states = never_ran = 0
        for name, uid in new_uids.items():
            job = jobs.get(name) or {}
            done = terminal(job)
            own = owners.jobsets.get(uid, [])
            if done is not None and (
                not own or done.get("lastTransitionTime", "") < job["metadata"].get("creationTimestamp", "")
            ):
                inherited_states += 1
            if not any(completed for _, completed in own):
                never_ran += 1
        inherited_children = sum(1 for seen in owners.controllers.values() if len(seen) > 1) + sum(
            1 for uid in new_uids.values() for image, _ in owners.jobsets.get(uid, []) if image != "trainer:gen2"
        )
        waits = sum(
            process.metric("trainjob_operator_identity_waits_total", reason=WAITING_FOR_PREVIOUS)
            for slot in replicas.slots
            if (process := slot.process) is not None
        )
        replicas.stop_all()
        tracebacks, leaks = scan_logs(replicas.logs, secret_needles(owners.secret_values))
        figures = Figures(
            "recreated-by-name",
            {
                "inherited_states": inherited_states,
                "inherited_children": inherited_children,
                "never_ran": never_ran,
                "tracebacks": tracebacks,
                "leaks": leaks,
            },
            {"trainjobs": float(count), "recreate_burst_s": burst, "identity_waits": waits},
        )
        figures.report()
    finally:
        owners.stop()
        replicas.stop_all()
        api.close()


def test_the_size_is_known() -> None:
    assert size(24, 300) == (300 if FULL else 24)
