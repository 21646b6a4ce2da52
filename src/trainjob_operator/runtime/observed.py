"""What already exists in the cluster, read by the shell and handed to the pure pipeline."""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class SSHKeyPair:
    private_pem: bytes
    public_openssh: bytes


@dataclass(frozen=True)
class StatusServer:
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
    priority_classes: frozenset[str] | None = None
    """Names of existing PriorityClasses, or None when unknown (then the Volcano check is skipped)."""
    ssh_key: SSHKeyPair | None = field(default=None, repr=False)
    """Key material for a new MPI Secret; when None the MPI plugin generates one."""
    status_server: StatusServer | None = None
    """Where trainer pods report progress; None when the status server is off (nothing is injected)."""

    def exists(self, api_version: str, kind: str, name: str) -> bool:
        return ObjectRef(api_version, kind, name) in self.existing

    @property
    def jobset_suspended(self) -> bool:
        return bool(self.jobset and (self.jobset.get("spec") or {}).get("suspend"))


NOTHING = Observed()
