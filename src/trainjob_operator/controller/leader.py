"""Lease-based leader election (coordination.k8s.io/v1), as controller-runtime does it.

Every replica serves webhooks and keeps its caches warm; only the holder of the Lease reconciles.

Leadership is bounded in time, not only by the loop: `leading()` is true only while the last successful renewal is
younger than the renew deadline, so a replica whose loop is stuck or whose connections are cut stops reconciling
(and writing) before the Lease can expire for the others (lease duration > renew deadline). Any failure of the loop
is logged with its type; an unexpected one (a bug, not an I/O error) steps down at once.
"""

import asyncio
import datetime as dt
import os
import socket
import time
import uuid
from collections.abc import Callable
from typing import Any

import aiohttp

from ..k8s.client import ApiError, KubeClient
from ..logs import error_fields, get

log = get("trainjob_operator.leader")


def _micro(now: dt.datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(text: str | None) -> dt.datetime | None:
    if not text:
        return None
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


class LeaderElector:
    def __init__(
        self,
        client: KubeClient,
        namespace: str,
        name: str,
        lease_duration: float,
        renew_deadline: float,
        retry_period: float,
        on_change: Callable[[bool], None] | None = None,
        identity: str | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.client, self.namespace, self.name = client, namespace, name
        self.lease_duration, self.renew_deadline, self.retry_period = lease_duration, renew_deadline, retry_period
        self.identity = identity or f"{socket.gethostname()}_{os.getpid()}_{uuid.uuid4().hex[:6]}"
        self.is_leader = False
        self.holder: str | None = None
        """Who holds the Lease, as last seen."""
        self._on_change = on_change
        self._last_renew = 0.0
        self._clock = clock or time.monotonic
        self._last_attempt = self._clock()

    def leading(self) -> bool:
        """True while this replica holds the Lease and renewed it within the renew deadline."""
        if not self.is_leader:
            return False
        if self._clock() - self._last_renew > self.renew_deadline:
            self._set(False)
            return False
        return True

    def heartbeat_age(self) -> float:
        """Seconds since the loop last finished an attempt (a stuck loop fails /healthz)."""
        return self._clock() - self._last_attempt

    def _set(self, leader: bool) -> None:
        if leader != self.is_leader:
            self.is_leader = leader
            log.info("leadership changed", leader=leader, identity=self.identity, lease=self.name)
            if self._on_change is not None:
                self._on_change(leader)

    def _lease(self, now: dt.datetime, transitions: int, acquired: str | None) -> dict[str, Any]:
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": int(self.lease_duration),
                "acquireTime": acquired or _micro(now),
                "renewTime": _micro(now),
                "leaseTransitions": transitions,
            },
        }

    async def try_acquire_or_renew(self) -> bool:
        now = dt.datetime.now(dt.UTC)
        lease = await self.client.get("coordination.k8s.io/v1", "Lease", self.name, self.namespace)
        if lease is None:
            try:
                await self.client.create(self._lease(now, 0, None))
                return True
            except ApiError as err:
                if err.conflict:
                    return False
                raise
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity")
        renewed = _parse(spec.get("renewTime")) or _parse(spec.get("acquireTime"))
        duration = spec.get("leaseDurationSeconds") or self.lease_duration
        if (
            holder
            and holder != self.identity
            and renewed is not None
            and renewed + dt.timedelta(seconds=duration) > now
        ):
            if holder != self.holder:
                log.info(
                    "standing by: another replica holds the Lease; serving webhooks, not reconciling",
                    holder=holder,
                    lease=f"{self.namespace}/{self.name}",
                    identity=self.identity,
                )
            self.holder = holder
            return False
        transitions = int(spec.get("leaseTransitions") or 0) + (0 if holder == self.identity else 1)
        body = self._lease(now, transitions, spec.get("acquireTime") if holder == self.identity else None)
        body["metadata"]["resourceVersion"] = lease["metadata"]["resourceVersion"]
        try:
            await self.client.replace(body)
            return True
        except ApiError as err:
            if err.conflict:
                return False
            raise

    async def attempt(self) -> None:
        """One acquire-or-renew attempt, bounded by what is left of the renew deadline; never raises."""
        started = self._clock()
        budget = self.renew_deadline
        if self.is_leader:
            budget = max(min(budget, self.renew_deadline - (started - self._last_renew)), 0.1)
        try:
            ok = await asyncio.wait_for(self.try_acquire_or_renew(), timeout=budget)
        except (ApiError, OSError, TimeoutError, aiohttp.ClientError) as err:  # transient: retry until the deadline
            log.warning("lease update failed", lease=self.name, **error_fields(err))
            ok = False
        except Exception as err:  # a bug or an answer we do not understand: stop reconciling at once
            log.error("lease update crashed; stepping down", lease=self.name, **error_fields(err))
            self._set(False)
            ok = False
        self._last_attempt = self._clock()
        if ok:
            self._last_renew = started  # the Lease says `started` at the latest: count from there
            self.holder = self.identity
            self._set(True)
        else:
            self.leading()  # steps down once the renew deadline has passed

    async def run(self) -> None:
        while True:
            await self.attempt()
            await asyncio.sleep(self.retry_period)

    async def release(self) -> None:
        """Hand the Lease over at shutdown so another replica takes it at once."""
        if not self.is_leader:
            return
        try:
            lease = await self.client.get("coordination.k8s.io/v1", "Lease", self.name, self.namespace)
            if lease and (lease.get("spec") or {}).get("holderIdentity") == self.identity:
                lease["spec"]["holderIdentity"] = None
                lease["spec"]["leaseDurationSeconds"] = 1
                await self.client.replace(lease)
        except Exception as err:  # shutting down anyway: the Lease expires by itself
            log.warning("lease release failed", **error_fields(err))
        self._set(False)
