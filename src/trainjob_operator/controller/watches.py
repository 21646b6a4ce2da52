"""A watch of the operator, said once: what kopf lists and watches, the cache its objects fill and the handler of
its events. `Manager.watches()` declares the list of one run (the trainer's kinds, the child kinds the plugins
declare watched in `OwnsKinds.kinds()`, the JobSets' pods when RBAC allows); kopf's registry and the routes that
send each event to its handler (`kopf_adapter.registry_and_routes`), kopf's label selectors, the caches' sync marker
and the listings' bookkeeping all follow from it. Nothing of kopf here."""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..api import constants as c
from .store import ObjectCache, PodCache

POD_PLURAL = "pods"
POD_SELECTOR = c.JOBSET_NAME_LABEL
"""The pods watched: only those a JobSet made (an existence selector, applied by the API server)."""


@dataclass(frozen=True, slots=True)
class Watch:
    """One watched kind: where it is listed and watched, what keeps its objects, what each event goes to."""

    api_version: str
    """group/version ("v1" for the core group)."""
    plural: str
    namespaced: bool
    """Watched per namespace when the operator watches some namespaces only (cluster-scoped kinds: once)."""
    cache: ObjectCache | PodCache
    on_event: Callable[[dict[str, Any]], None]
    """Called with each event of the watch's stream (`type` None: an object of a listing)."""
    selector: str | None = None
    """A label selector the API server applies to the listing and the watch (None: every object)."""

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        return self.api_version.rpartition("/")[2]

    def scopes(self, namespaces: Sequence[str]) -> list[str | None]:
        """The namespaces it is watched in (None: cluster-wide)."""
        return list(namespaces) if self.namespaced and namespaces else [None]


__all__ = ["POD_PLURAL", "POD_SELECTOR", "Watch"]
