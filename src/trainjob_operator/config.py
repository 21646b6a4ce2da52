"""Operator settings: defaults, then the `--config` YAML file, then command-line flags."""

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .flags import LOG_LEVELS
from .runtime.registry import GATES


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ClientConnection(_Section):
    # A ceiling per resource type, not the pace: the API server sets that with Priority and Fairness, and its 429
    # Retry-After answers are honoured (every request to the resource waits). 0 turns the ceiling off.
    # controller-runtime's clients default to 50/100, which caps a burst at ~50 objects/s whatever the server.
    qps: float = Field(default=1000, ge=0)
    burst: int = Field(default=2000, ge=0)
    streaming_lists: Literal["auto", "off"] = "auto"
    """"auto": when the API server streams a watch's initial events (asked once at start-up), the watches start
    from its watch cache, as client-go's informers do; "off": paged LISTs always."""


class Webhook(_Section):
    enabled: bool = True
    host: str = "127.0.0.1"
    """Address the webhook server listens on."""
    port: int = Field(default=9443, ge=1, le=65535)
    url_host: str | None = None
    """Host written into the webhook configurations' URLs (defaults to `host`); ignored with `service_name`."""
    url_port: int | None = Field(default=None, ge=1, le=65535)
    """Port written into the URLs (defaults to `port`): replicas behind one local load balancer."""
    service_name: str | None = None
    """In a cluster: point the configurations at this Service in `operator_namespace` instead of a URL."""
    service_port: int = 443
    drain_seconds: float = Field(default=5, ge=0, le=60)
    """With `service_name`: how long a stopping replica keeps answering, closing each connection after its answer,
    before it stops listening. Its endpoint leaves the Service while it stops (the endpoints controller, then each
    node's kube-proxy), so calls still arrive for a moment, some on kept-alive connections the API server would
    find closed under it ("use of closed network connection": the call is refused). Keep it well within the pod's
    `terminationGracePeriodSeconds`."""
    cert_secret_name: str = "trainjob-operator-webhook-cert"
    validating_name: str = "validator.trainer.kubeflow.org"
    mutating_name: str = "defaulter.trainer.kubeflow.org"
    failure_policy: Literal["Fail", "Ignore"] = "Fail"
    cert_validity_days: int = Field(default=365, ge=1)
    rotate_before_days: int = Field(default=30, ge=1)
    cert_check_seconds: float = Field(default=300, ge=1)
    """How often each replica re-reads the certificate Secret (rotation, another replica's rotation)."""


class StatusServerConfig(_Section):
    """Where trainer pods report progress (`kubeflow.trainer.update_trainjob_status`); upstream's `TrainJobStatus`
    feature, on by default here. It serves TLS with the webhook certificate (same Secret, same CA)."""

    enabled: bool = True
    host: str = "127.0.0.1"
    port: int = Field(default=10443, ge=1, le=65535)
    url_host: str | None = None
    """Host written into the pods' KUBEFLOW_TRAINER_SERVER_URL (defaults to `webhook.url_host`, then `host`);
    with `webhook.service_name` the URL is `https://<service>.<namespace>.svc:<port>`."""
    url_port: int | None = Field(default=None, ge=1, le=65535)
    """Port written into that URL (defaults to `port`): replicas behind one local load balancer, as with
    `webhook.url_port`. Every replica must write the same URL, or a suspended JobSet one built cannot be resumed
    in place by another (JobSet refuses pod template changes)."""
    qps: float = Field(default=2, ge=0)
    """Accepted updates per second per TrainJob (the SDK sends at most one per 5 s per pod); 0 means no limit."""
    burst: int = Field(default=20, ge=1)
    max_body_bytes: int = Field(default=65536, ge=1024, le=1048576)
    review_cache_seconds: float = Field(default=60, ge=0)
    """How long one TokenReview answer is reused for the same token (never past the token's expiry)."""
    review_qps: float = Field(default=50, gt=0)
    """TokenReviews per second the server may send for tokens it has no cached answer for, over all callers
    (beyond it: `429`). Tokens that cannot pass one (shape, size, audience, expiry) never cost one."""
    review_burst: int = Field(default=100, ge=1)
    review_client_qps: float = Field(default=2, gt=0)
    """The same per caller address: one pod flooding the server spends its own share only."""
    review_client_burst: int = Field(default=10, ge=1)
    review_in_flight: int = Field(default=8, ge=1)
    """TokenReviews (with the reads authorization needs) in flight at once."""
    body_timeout_seconds: float = Field(default=10, gt=0)
    """A request whose body has not arrived in this long gets `408` (a slow body never holds a connection)."""


class HealthConfig(_Section):
    host: str = "127.0.0.1"
    port: int = Field(default=8081, ge=0, le=65535)
    """Serves /healthz, /readyz and /metrics; 0 picks a free port."""


class MetricsAuth(_Section):
    enabled: bool = False
    """Upstream's `metrics.auth.enabled` (kubeflow/trainer#3912), off by default as there. On: /metrics moves off
    the plain health port to its own TLS port (the webhook certificate), and every scrape needs a bearer token the
    API server authenticates (TokenReview) for a user it authorises for `get` on the non-resource URL /metrics
    (SubjectAccessReview), as controller-runtime's `WithAuthenticationAndAuthorization` filter does."""


class MetricsConfig(_Section):
    host: str = "127.0.0.1"
    port: int = Field(default=8443, ge=0, le=65535)
    """The TLS port of /metrics with `auth.enabled` (upstream's `:8443`); 0 picks a free port."""
    auth: MetricsAuth = Field(default_factory=MetricsAuth)
    review_cache_seconds: float = Field(default=60, ge=0)
    """How long one scraper's TokenReview and SubjectAccessReview answers are reused."""


class LeaderElection(_Section):
    enabled: bool = True
    lease_name: str = "trainer.kubeflow.org"
    lease_duration_seconds: float = 15
    renew_deadline_seconds: float = 10
    retry_period_seconds: float = 2


class OperatorConfig(_Section):
    namespaces: list[str] = Field(default_factory=list)
    """Namespaces to watch; empty means the whole cluster."""
    operator_namespace: str = "kubeflow-system"
    concurrency: int = Field(default=16, ge=1)
    """TrainJobs reconciled at once."""
    log_format: Literal["json", "console"] = "json"
    log_level: str = "INFO"
    """A logging level name, in any case (stored upper-case)."""
    client: ClientConnection = Field(default_factory=ClientConnection)
    webhook: Webhook = Field(default_factory=Webhook)
    status_server: StatusServerConfig = Field(default_factory=StatusServerConfig)
    health: HealthConfig = Field(default_factory=HealthConfig)
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)
    leader_election: LeaderElection = Field(default_factory=LeaderElection)
    feature_gates: dict[str, bool] = Field(default_factory=dict)
    """Features beyond upstream that are off by default, by name: `TrainJobWorkloadAwareScheduling` (gang scheduling
    by Kubernetes' Workload API, docs/gang-scheduling.md)."""

    @field_validator("feature_gates")
    @classmethod
    def _known_gates(cls, value: dict[str, bool]) -> dict[str, bool]:
        unknown = sorted(set(value) - GATES)
        if unknown:
            raise ValueError(f"unknown feature gate {', '.join(unknown)}; known: {', '.join(sorted(GATES))}")
        return value

    @field_validator("log_level")
    @classmethod
    def _known_level(cls, value: str) -> str:
        if value.lower() not in LOG_LEVELS:
            raise ValueError(f"{value!r} is not one of {', '.join(LOG_LEVELS)}")
        return value.upper()


class ConfigFileError(Exception):
    pass


def load(path: str | Path | None) -> OperatorConfig:
    if path is None:
        return OperatorConfig()
    try:
        raw = yaml.safe_load(Path(path).read_text()) or {}
    except OSError as err:
        raise ConfigFileError(f"cannot read config {path}: {err.strerror}") from err
    except yaml.YAMLError as err:
        raise ConfigFileError(f"{path}: invalid YAML: {err}") from err
    try:
        return OperatorConfig.model_validate(raw)
    except ValidationError as err:
        raise ConfigFileError(f"{path}: {problems(err)}") from err


def problems(err: ValidationError) -> str:
    """The settings' validation errors in one line: `field.path: message; ...`."""
    return "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in err.errors())
