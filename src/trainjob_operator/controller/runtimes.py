"""The one runtime lookup the reconciler and the admission webhooks share: cache first, then the API."""

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..api import constants as c
from ..api.runtime import RuntimeModels
from ..k8s.client import KubeClient, is_transient
from ..runtime.info import RuntimeSource
from ..runtime.review import RuntimeKey
from .store import Store

PARSED_LIMIT = 1024
"""Parsed runtime versions kept; past it the memo starts over."""
READ_ATTEMPTS = (0.2, 0.5, 1.0)
"""Pauses between reads of a runtime the API server failed to answer (5xx, 429, a cut connection): about 2 s in
all, well inside the webhook's 10 s timeout, so a blip does not refuse a TrainJob (found by tests/chaos/
test_hostile.py)."""


async def _read(call: Callable[[], Awaitable[dict[str, Any] | None]]) -> dict[str, Any] | None:
    for pause in READ_ATTEMPTS:
        try:
            return await call()
        except Exception as err:
            if not is_transient(err):
                raise
        await asyncio.sleep(pause)
    return await call()


@dataclass
class RuntimeResolver:
    client: KubeClient
    store: Store
    models: RuntimeModels
    """What runtimes are parsed with: the framework's (`Framework.runtime_models`), so a framework plugin's
    `mlPolicy` source survives the read."""
    sources: dict[tuple[Any, ...], RuntimeSource] = field(default_factory=dict)

    async def lookup(self, kind: str, namespace: str, name: str) -> RuntimeSource | None:
        """From the cache; on a miss, read through to the API so a runtime created a moment ago is found. Raises
        ApiError, and pydantic's ValidationError for a runtime that does not parse."""
        key = RuntimeKey.of(kind, namespace, name)  # the lookup rules of the webhook and the CLI
        cluster_wide = key.kind == c.CLUSTER_TRAINING_RUNTIME_KIND
        cache = self.store.cluster_runtimes if cluster_wide else self.store.runtimes
        raw = cache.get((key.namespace, key.name))
        if raw is None:
            raw = await _read(lambda: self.client.get(c.API_VERSION, kind, name, None if cluster_wide else namespace))
            if raw is not None:
                cache.put(raw)
        if raw is None:
            return None
        training, cluster = self.models
        model = cluster if cluster_wide else training
        meta = raw.get("metadata") or {}
        version = (kind, meta.get("namespace"), meta.get("name"), meta.get("resourceVersion"))
        source = self.sources.get(version)
        if source is None:  # parsed once per runtime version, shared by every TrainJob that uses it
            source = RuntimeSource.of(model.model_validate(raw))
            if len(self.sources) > PARSED_LIMIT:
                self.sources.clear()
            self.sources[version] = source
        return source
