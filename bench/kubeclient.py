"""A small async client for the benchmark's load generator and watchers (admin kubeconfig, no limits)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp

from trainjob_operator.k8s import connection as k8s_config
from trainjob_operator.k8s.client import Client, RESTMapper


def connect(kubeconfig: str) -> Client:
    return Client(k8s_config.from_kubeconfig(kubeconfig), qps=0, burst=0, timeout=300)


async def watch(
    client: Client,
    api_version: str,
    kind: str,
    namespace: str,
    ready: asyncio.Event | None = None,
    mapper: RESTMapper | None = None,
) -> AsyncIterator[tuple[str, dict[str, Any], float]]:
    """(type, object, monotonic arrival time) for every event, from the current state on (`mapper`: for a kind the
    operator's client does not know)."""
    path = (mapper or RESTMapper()).resource_of(api_version, kind).path(namespace)
    listing = await client.request("GET", path)
    version = listing["metadata"]["resourceVersion"]
    for item in listing.get("items", []):
        yield "ADDED", item, time.monotonic()
    if ready is not None:
        ready.set()
    while True:
        url = (
            f"{client.connection.server}{path}?watch=1&allowWatchBookmarks=true&resourceVersion={version}"
            "&timeoutSeconds=600"
        )
        headers = {"Accept": "application/json"}
        authorization = client.connection.header()
        if authorization:
            headers["Authorization"] = authorization
        async with client._http().get(
            url, headers=headers, timeout=aiohttp.ClientTimeout(total=None, sock_read=None)
        ) as resp:
            async for line in resp.content:
                if not line.strip():
                    continue
                event = json.loads(line)
                obj = event.get("object") or {}
                version = (obj.get("metadata") or {}).get("resourceVersion", version)
                if event.get("type") == "BOOKMARK":
                    continue
                if event.get("type") == "ERROR":
                    listing = await client.request("GET", path)
                    version = listing["metadata"]["resourceVersion"]
                    break
                yield event["type"], obj, time.monotonic()
