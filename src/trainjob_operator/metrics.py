"""Prometheus metrics of the operator, in an explicit registry, with named recorder functions."""

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

GOODPUT_SERIES_MAX = 1000
"""Distinct (namespace, runtime) pairs the goodput families label; past it, a new pair's runtime is `OTHER_RUNTIME`.
A runtime's name is a tenant's choice: without a bound, one who makes TrainJobs of ever new runtimes grows the
operator's memory and every scrape (each pair is about 40 series)."""
OTHER_RUNTIME = "(other)"

STATES = ("Pending", "Suspended", "Running", "Restarting", "Stalled", "Complete", "Failed", "Error")
"""Every value of `status.state` (api.trainjob.TrainJobStatus.state; a unit test keeps the two equal)."""


@dataclass
class Metrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    _goodput_pairs: set[tuple[str, str]] = field(default_factory=set)

    def __post_init__(self) -> None:
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        self.trainjobs = Gauge(
            "trainjob_operator_trainjobs",
            "TrainJobs known to the operator, by state",
            ["state"],
            registry=self.registry,
        )
        self.reconcile_seconds = Histogram(
            "trainjob_operator_reconcile_duration_seconds",
            "Time to reconcile one TrainJob",
            ["result"],
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            registry=self.registry,
        )
        self.create_to_jobset_seconds = Histogram(
            "trainjob_operator_create_to_jobset_seconds",
            "From TrainJob creation to its JobSet applied",
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120),
            registry=self.registry,
        )
        self.apply_errors = Counter(
            "trainjob_operator_apply_errors_total",
            "Failed builds or applies, by reason",
            ["reason"],
            registry=self.registry,
        )
        self.reconcile_failures = Counter(
            "trainjob_operator_reconcile_failures_total",
            "Reconcile passes that failed on an error outside the TrainJob (API outage, throttling), by error type",
            ["error"],
            registry=self.registry,
        )
        self.webhook_seconds = Histogram(
            "trainjob_operator_webhook_duration_seconds",
            "Admission webhook latency",
            ["webhook", "allowed"],
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1),
            registry=self.registry,
        )
        self.api_requests = Counter(
            "trainjob_operator_api_requests_total",
            "Requests of the reconciler and webhooks to the API server, by verb and resource",
            ["verb", "resource"],
            registry=self.registry,
        )
        self.status_updates = Counter(
            "trainjob_operator_status_updates_total",
            "Requests to the TrainJob status server (progress from trainer pods), by HTTP answer code",
            ["code"],
            registry=self.registry,
        )
        self.status_update_seconds = Histogram(
            "trainjob_operator_status_update_duration_seconds",
            "Status server latency, authentication and the status write included",
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
            registry=self.registry,
        )
        self.ttl_deletions = Counter(
            "trainjob_operator_ttl_deletions_total",
            "TrainJobs deleted because their ttlSecondsAfterFinished expired",
            registry=self.registry,
        )
        self.startup_failures = Counter(
            "trainjob_operator_startup_deadline_failures_total",
            "TrainJobs failed because a pod could not start within the startup deadline",
            ["reason"],
            registry=self.registry,
        )
        self.identity_waits = Counter(
            "trainjob_operator_identity_waits_total",
            "Reconciles of a TrainJob that waited for objects under its children's names that are not its own",
            ["reason"],
            registry=self.registry,
        )
        # Goodput (issue 35, docs/hangs-and-goodput.md): counters that sum across TrainJobs, per namespace and
        # runtime; each phase's seconds are added once, when the phase ends, by the replica whose status write landed.
        self.goodput_seconds = Counter(
            "trainjob_operator_goodput_seconds_total",
            "Seconds TrainJobs spent per phase (Queued, Starting, Training, Restarting, Stalled), added when a phase ends",
            ["trainjob_namespace", "runtime", "phase"],
            registry=self.registry,
        )
        self.idle_accelerator_seconds = Counter(
            "trainjob_operator_idle_accelerator_seconds_total",
            "Accelerator-seconds TrainJobs' pods held while not training (starting, restarting, stalled)",
            ["trainjob_namespace", "runtime", "phase"],
            registry=self.registry,
        )
        self.stalls = Counter(
            "trainjob_operator_stalls_total",
            "TrainJobs found stalled (no progress report within their stallPolicy), by the action taken",
            ["trainjob_namespace", "runtime", "action"],
            registry=self.registry,
        )
        self.first_progress_seconds = Histogram(
            "trainjob_operator_time_to_first_progress_seconds",
            "From a TrainJob's creation to its first progress report",
            ["trainjob_namespace", "runtime"],
            buckets=(5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200),
            registry=self.registry,
        )
        self.goodput_ratio = Histogram(
            "trainjob_operator_goodput_ratio",
            "Share of a finished TrainJob's time spent training (0-1)",
            ["trainjob_namespace", "runtime"],
            buckets=(0.1, 0.25, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1.0),
            registry=self.registry,
        )
        self.leader = Gauge(
            "trainjob_operator_leader", "1 while this replica holds the leader Lease", registry=self.registry
        )
        for state in STATES:
            self.trainjobs.labels(state=state).set(0)

    def goodput_labels(self, namespace: str, runtime: str) -> dict[str, str]:
        """The goodput families' labels of a TrainJob: its namespace and runtime, within `GOODPUT_SERIES_MAX` pairs."""
        pair = (namespace, runtime)
        if pair not in self._goodput_pairs:
            if len(self._goodput_pairs) >= GOODPUT_SERIES_MAX:
                pair = (namespace, OTHER_RUNTIME)
            self._goodput_pairs.add(pair)
        return {"trainjob_namespace": pair[0], "runtime": pair[1]}

    def record_request(self, verb: str, resource: str) -> None:
        self.api_requests.labels(verb=verb, resource=resource).inc()

    def record_states(self, counts: dict[str, int]) -> None:
        for state in STATES:
            self.trainjobs.labels(state=state).set(counts.get(state, 0))
