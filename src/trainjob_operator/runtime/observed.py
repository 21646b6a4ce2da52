"""What already exists in the cluster, read by the shell and handed to the pure pipeline."""

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class SSHKeyPair:
    private_pem: bytes
    public_openssh: bytes


@dataclass(frozen=True)
class Observed:
    jobset: dict[str, Any] | None = None
    """The JobSet named like the TrainJob, as read from the API (None when absent)."""
    mpi_ssh_secret_exists: bool = False
    flux_curve_secret_exists: bool = False
    pod_group_exists: bool = False
    priority_classes: frozenset[str] | None = None
    """Names of existing PriorityClasses, or None when unknown (then the Volcano check is skipped)."""
    ssh_key: SSHKeyPair | None = field(default=None, repr=False)
    """Key material for a new MPI Secret; when None the MPI plugin generates one."""

    @property
    def jobset_suspended(self) -> bool:
        return bool(self.jobset and (self.jobset.get("spec") or {}).get("suspend"))


NOTHING = Observed()
