"""What already exists in the cluster, read by the shell and handed to the pure pipeline."""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class SSHKeyPair:
    private_pem: bytes
    public_openssh: bytes


class KeySource(Protocol):
    """Where new key material comes from. The shell passes one that draws fresh keys; tests pass a fixed one. The
    core never draws entropy itself, so a build is a function of its inputs."""

    def ssh_key(self) -> SSHKeyPair: ...

    def curve_secret(self) -> bytes:
        """32 random bytes: the secret key of an X25519 pair (a Flux instance's CURVE certificate)."""
        ...


@dataclass(frozen=True)
class Read:
    """An object, or every object of a kind, a plugin asks the shell to read for it (`DeclaresReads`)."""

    api_version: str
    kind: str
    name: str | None = None
    """One object by name; None: every object of the kind (a list)."""
    namespace: str | None = None
    """None for a cluster-scoped kind."""
    label_selector: str | None = None
    """Of a list: only the objects it selects."""


@dataclass(frozen=True)
class StatusEndpoint:
    """The operator's TrainJob status server, as trainer pods reach it."""

    base_url: str
    """`https://host:port`, without a path."""
    ca_pem: str | None
    """The CA that signed its serving certificate (None while the certificate is not settled yet)."""


@dataclass(frozen=True)
class ObjectRef:
    """One object a TrainJob owns, by what names it."""

    api_version: str
    kind: str
    name: str


@dataclass(frozen=True)
class Observed:
    jobset: dict[str, Any] | None = None
    """The JobSet named like the TrainJob, as read from the API (None when absent); whoever controls it: the plan
    reads it only when it is this TrainJob's (runtime/identity.py)."""
    existing: frozenset[ObjectRef] = frozenset()
    """This TrainJob's children known to exist (created once, probed, or applied by this process)."""
    read: Mapping[ObjectRef, dict[str, Any] | None] = field(default_factory=dict)
    """Objects under the names of this build's children, read this pass (probes, a create that conflicted): None
    when absent. Whoever controls them: the plan decides."""
    reads: Mapping[Read, tuple[dict[str, Any], ...] | None] = field(default_factory=dict)
    """What the plugins declared they need to read (`DeclaresReads`), keyed by their `Read`: the objects found
    (one or none for a read by name), or None when the shell could not read them (the checks that need them are
    skipped)."""
    keys: KeySource | None = field(default=None, repr=False)
    """Key material for the Secrets a build creates once (None: a build that needs a key fails, saying so)."""
    status_server: StatusEndpoint | None = None
    """Where trainer pods report progress; None when the status server is off (nothing is injected)."""

    def exists(self, api_version: str, kind: str, name: str) -> bool:
        return ObjectRef(api_version, kind, name) in self.existing

    @property
    def jobset_suspended(self) -> bool:
        return bool(self.jobset and (self.jobset.get("spec") or {}).get("suspend"))


NOTHING = Observed()
