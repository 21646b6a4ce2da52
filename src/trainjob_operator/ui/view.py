"""What the UI shows, as pure functions of the objects the API server returned: table rows, pod and event rows,
the metric history. Nothing here reads a Secret; objects are stripped of bookkeeping before they are shown."""

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ..api import constants as c
from ..api.trainjob import Goodput
from ..runtime import goodput as accounting

HISTORY_POINTS = 500
HIDDEN_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)


def _meta(obj: dict[str, Any] | None) -> dict[str, Any]:
    return (obj or {}).get("metadata") or {}


def derived_state(trainjob: dict[str, Any]) -> str:
    """`status.state` when the operator wrote it, else from upstream's conditions (another controller's jobs)."""
    status = trainjob.get("status") or {}
    if status.get("state"):
        return str(status["state"])
    conditions = {cd.get("type"): cd.get("status") for cd in status.get("conditions") or []}
    for kind in (c.CONDITION_FAILED, c.CONDITION_COMPLETE):
        if conditions.get(kind) == "True":
            return kind
    # A MultiKueue manager's TrainJob is not suspended while the worker that runs it holds its copy suspended: the
    # copied `Suspended` condition says so (docs/multikueue.md).
    if (trainjob.get("spec") or {}).get("suspend") or conditions.get(c.CONDITION_SUSPENDED) == "True":
        return c.STATE_SUSPENDED
    if any((j.get("active") or 0) > 0 for j in status.get("jobsStatus") or []):
        return c.STATE_RUNNING
    return c.STATE_PENDING


def trainjob_row(trainjob: dict[str, Any], jobset: dict[str, Any] | None) -> dict[str, Any]:
    meta, spec, status = _meta(trainjob), trainjob.get("spec") or {}, trainjob.get("status") or {}
    trainer_status = status.get("trainerStatus") or {}
    nodes = status.get("nodes")
    if nodes is None:
        nodes = (spec.get("trainer") or {}).get("numNodes")
    ref = spec.get("runtimeRef") or {}
    elastic = status.get("elastic") or {}
    extra: dict[str, Any] = {}
    if elastic:  # an elastic TrainJob (docs/elastic.md): its current and desired size, its bounds, its resizes
        extra["elastic"] = {
            k: elastic.get(k)
            for k in ("currentNodes", "desiredNodes", "minNodes", "maxNodes", "resizes", "scaling", "message")
        }
    return {
        **extra,
        "namespace": meta.get("namespace", ""),
        "name": meta.get("name", ""),
        "uid": meta.get("uid", ""),
        "state": derived_state(trainjob),
        "reason": status.get("reason"),
        "message": status.get("message"),
        "nodes": nodes,
        "restarts": int(
            status["restarts"]
            if status.get("restarts") is not None
            else ((jobset or {}).get("status") or {}).get("restarts") or 0
        ),
        "progress": trainer_status.get("progressPercentage"),
        "remainingSeconds": trainer_status.get("estimatedRemainingSeconds"),
        "metrics": list(trainer_status.get("metrics") or []),
        "lastUpdated": trainer_status.get("lastUpdatedTime"),
        "created": meta.get("creationTimestamp"),
        "runtime": f"{ref.get('kind') or c.CLUSTER_TRAINING_RUNTIME_KIND}/{ref.get('name', '')}",
        "suspended": bool(spec.get("suspend")),
    }


def pod_row(pod: dict[str, Any]) -> dict[str, Any]:
    meta, spec, status = _meta(pod), pod.get("spec") or {}, pod.get("status") or {}
    labels = meta.get("labels") or {}
    statuses = status.get("containerStatuses") or []
    return {
        "name": meta.get("name", ""),
        "phase": status.get("phase", "Unknown"),
        "node": spec.get("nodeName"),
        "replicatedJob": labels.get("jobset.sigs.k8s.io/replicatedjob-name"),
        "index": labels.get("batch.kubernetes.io/job-completion-index"),
        "restarts": sum(int(s.get("restartCount") or 0) for s in statuses),
        "ready": sum(1 for s in statuses if s.get("ready")),
        "containers": [ct.get("name") for ct in spec.get("containers") or []],
        "created": meta.get("creationTimestamp"),
    }


def pods_of(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = [pod_row(p) for p in pods]
    return sorted(rows, key=lambda r: (r["replicatedJob"] or "", r["index"] or "", r["name"]))


def event_row(event: dict[str, Any]) -> dict[str, Any]:
    involved = event.get("involvedObject") or {}
    return {
        "type": event.get("type", ""),
        "reason": event.get("reason", ""),
        "message": event.get("message", ""),
        "object": f"{involved.get('kind', '')}/{involved.get('name', '')}",
        "count": event.get("count") or 1,
        "time": event.get("lastTimestamp")
        or event.get("eventTime")
        or event.get("firstTimestamp")
        or _meta(event).get("creationTimestamp"),
    }


def replicated_job_names(trainjob: dict[str, Any], jobset: dict[str, Any] | None) -> list[str]:
    """The replicated jobs the TrainJob had: its JobSet's, else the ones its status recorded (the JobSet may be
    gone: a deadline deleted it)."""
    names = [r.get("name") for r in ((jobset or {}).get("status") or {}).get("replicatedJobsStatus") or []]
    names += [j.get("name") for j in (trainjob.get("status") or {}).get("jobsStatus") or []]
    names += [r.get("name") for r in ((jobset or {}).get("spec") or {}).get("replicatedJobs") or []]
    return sorted({n for n in names if n})


def _pod_name_pattern(trainjob: str, rjobs: Iterable[str]) -> re.Pattern[str] | None:
    """JobSet's pod names: `<jobset>-<replicated job>-<job index>-<pod index>-<suffix>`."""
    names = sorted(rjobs)
    if not names:
        return None
    alternatives = "|".join(re.escape(n) for n in names)
    return re.compile(rf"{re.escape(trainjob)}-(?:{alternatives})-\d+-\d+-[a-z0-9]{{5}}")


def events_of(
    events: list[dict[str, Any]], trainjob: str, pods: list[str], rjobs: Iterable[str] = ()
) -> list[dict[str, Any]]:
    """Events of the TrainJob, its JobSet and Jobs (`<tj>-<rjob>-<i>`) and its pods, newest last: the pods listed,
    and pods already gone that JobSet named after one of the TrainJob's replicated jobs `rjobs` (a failed TrainJob's
    pods are deleted with its JobSet; their FailedScheduling Warnings still tell why)."""
    names = set(pods) | {trainjob}
    gone = _pod_name_pattern(trainjob, rjobs)
    kept = []
    for event in events:
        involved = event.get("involvedObject") or {}
        kind, name = involved.get("kind"), involved.get("name") or ""
        if kind == "Secret":
            continue
        if (
            name in names
            or (kind in ("JobSet", "Job", "PodGroup") and (name == trainjob or name.startswith(trainjob + "-")))
            or (kind == "Pod" and gone is not None and gone.fullmatch(name))
        ):
            kept.append(event_row(event))
    return sorted(kept, key=lambda r: (_instant(r["time"]) or datetime.min.replace(tzinfo=UTC), r["time"] or ""))


def jobset_note(trainjob: dict[str, Any], jobset: dict[str, Any] | None) -> str | None:
    """What to say where the JobSet would be shown, when there is none."""
    if jobset is not None:
        return None
    state = derived_state(trainjob)
    if state in (c.STATE_FAILED, c.STATE_COMPLETE):
        return f"No JobSet: the TrainJob is {state} and its JobSet was deleted."
    if state == c.STATE_SUSPENDED:
        return "No JobSet: the TrainJob is suspended and was never started."
    if state == c.STATE_ERROR:
        return "No JobSet: the operator could not build it (see the conditions)."
    return "No JobSet yet: the operator has not built it."


def replicated_jobs(jobset: dict[str, Any] | None, pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per replicated job: its Jobs as JobSet counts them and its pods as the pod rows count them (a Job of four
    pods is one active Job)."""
    rows = []
    for rjob in ((jobset or {}).get("status") or {}).get("replicatedJobsStatus") or []:
        mine = [p for p in pods if p.get("replicatedJob") == rjob.get("name")]
        phases = [p.get("phase") for p in mine]
        rows.append(
            {
                "name": rjob.get("name"),
                "jobsActive": rjob.get("active") or 0,
                "jobsSucceeded": rjob.get("succeeded") or 0,
                "jobsFailed": rjob.get("failed") or 0,
                "pods": len(mine),
                "podsPending": phases.count("Pending"),
                "podsRunning": phases.count("Running"),
                "podsReady": sum(1 for p in mine if p.get("containers") and p.get("ready") == len(p["containers"])),
                "podsSucceeded": phases.count("Succeeded"),
                "podsFailed": phases.count("Failed"),
            }
        )
    return rows


def jobset_view(jobset: dict[str, Any] | None) -> dict[str, Any] | None:
    if jobset is None:
        return None
    status = jobset.get("status") or {}
    return {
        "name": _meta(jobset).get("name"),
        "suspend": bool((jobset.get("spec") or {}).get("suspend")),
        "restarts": int(status.get("restarts") or 0),
        "conditions": list(status.get("conditions") or []),
        "replicatedJobs": list(status.get("replicatedJobsStatus") or []),
        "terminalState": status.get("terminalState"),
    }


def shown(obj: dict[str, Any]) -> dict[str, Any]:
    """An object as the UI shows it: without managedFields and kubectl's copy of the last applied object."""
    meta = {k: v for k, v in _meta(obj).items() if k != "managedFields"}
    if meta.get("annotations"):
        meta["annotations"] = {k: v for k, v in meta["annotations"].items() if k not in HIDDEN_ANNOTATIONS}
    return {**obj, "metadata": meta}


def numeric(value: str) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number == number and abs(number) != float("inf") else None


@dataclass
class History:
    """Reported metrics over time, per TrainJob (by UID): one point per distinct `lastUpdatedTime` seen."""

    points: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    limit: int = HISTORY_POINTS

    def record(self, row: dict[str, Any]) -> bool:
        """Add the row's current report; True when it was new."""
        if not row.get("lastUpdated") or not row.get("uid"):
            return False
        series = self.points.setdefault(row["uid"], [])
        if series and series[-1]["time"] == row["lastUpdated"]:
            return False
        values = {m.get("name"): numeric(m.get("value")) for m in row.get("metrics") or []}
        point = {
            "time": row["lastUpdated"],
            "progress": row.get("progress"),
            "metrics": {k: v for k, v in values.items() if k and v is not None},
        }
        series.append(point)
        del series[: -self.limit]
        return True

    def of(self, uid: str) -> list[dict[str, Any]]:
        return list(self.points.get(uid, []))

    def forget(self, uid: str) -> None:
        self.points.pop(uid, None)


# --- identity is the uid: what a TrainJob created again under a name shows of its own (issue 28) -------------------


def own_child(trainjob: dict[str, Any], child: dict[str, Any] | None) -> dict[str, Any] | None:
    """`child` when its controller ownerReference names this TrainJob's uid: a predecessor's object of the same
    name (the garbage collector not there yet) is not shown as this TrainJob's."""
    uid = _meta(trainjob).get("uid")
    owners = _meta(child or {}).get("ownerReferences") or []
    mine = any(o.get("controller") and o.get("kind") == c.TRAINJOB_KIND and o.get("uid") == uid for o in owners)
    return child if uid and mine else None


own_jobset = own_child


def own_pods(jobset: dict[str, Any] | None, pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pods of this JobSet (by its uid label), none without a JobSet of its own."""
    uid = _meta(jobset or {}).get("uid")
    return [p for p in pods if uid and (_meta(p).get("labels") or {}).get(c.JOBSET_UID_LABEL) == uid]


def own_events(trainjob: dict[str, Any], events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Events of this incarnation: none about a TrainJob of another uid, none from before it was created."""
    meta = _meta(trainjob)
    uid, since = meta.get("uid"), _second(meta.get("creationTimestamp"))
    kept = []
    for event in events:
        involved = event.get("involvedObject") or {}
        if involved.get("kind") == c.TRAINJOB_KIND and involved.get("uid") not in (None, uid):
            continue
        when = _second(event_row(event)["time"])
        if when is not None and since is not None and when < since:
            continue
        kept.append(event)
    return kept


def _instant(stamp: str | None) -> datetime | None:
    """An RFC 3339 timestamp (seconds or microseconds) as a time; None when absent or not one."""
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp)
    except ValueError:
        return None


def _second(stamp: str | None) -> datetime | None:
    """A timestamp to the second. Events carry RFC 3339 seconds (`lastTimestamp`) or microseconds (`eventTime`, the
    scheduler's): compared as text, `…:01.5Z` sorts before `…:01Z`, so an event in the creation's second looked older
    than the TrainJob (the creation time has seconds only)."""
    instant = _instant(stamp)
    return instant.replace(microsecond=0) if instant is not None else None


# --- goodput (issue 35) ---------------------------------------------------------------------------------------------


def goodput_of(trainjob: dict[str, Any], now: datetime) -> dict[str, Any] | None:
    """The detail page's goodput timeline: each phase's seconds up to `now` (the running phase included), its share
    of the total, the goodput and the accelerator-seconds held while not training. None when the operator has not
    accounted for the TrainJob (another controller's, or an operator before issue 35)."""
    raw = (trainjob.get("status") or {}).get("goodput")
    if not isinstance(raw, dict):
        return None
    try:
        g = Goodput.model_validate(raw)
    except ValueError:
        return None
    live = accounting.live(g, now)
    return {
        "phase": live.phase,
        "since": g.since,
        "percent": live.percent,
        "totalSeconds": live.total,
        "segments": [
            {
                "phase": phase,
                "seconds": seconds,
                "share": round(seconds * 100 / live.total, 1) if live.total else 0.0,
                "running": phase == live.phase,
            }
            for phase, seconds in live.seconds.items()
            if seconds > 0 or phase == live.phase
        ],
        "accelerators": g.accelerators,
        "idleAcceleratorSeconds": live.idle_accelerator_seconds,
        "firstProgressSeconds": live.first_progress_seconds,
        "stalls": live.stalls,
    }


GOODPUT_COLUMNS = (
    "NAMESPACE",
    "NAME",
    "STATE",
    "PHASE",
    "QUEUED",
    "STARTING",
    "TRAINING",
    "RESTARTING",
    "STALLED",
    "GOODPUT",
    "ACCEL-H NOT TRAINING",
    "FIRST REPORT",
    "STALLS",
)


def _duration(seconds: int | None) -> str:
    if seconds is None:
        return "-"
    hours, rest = divmod(int(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def goodput_table(trainjobs: Iterable[dict[str, Any]], now: datetime) -> list[list[str]]:
    """`trainjob-operator goodput`: one row per TrainJob (as of `now`), then the sum over them (ALL)."""
    rows: list[list[str]] = []
    sums = dict.fromkeys(accounting.PHASES, 0)
    idle_total = 0.0
    for trainjob in sorted(trainjobs, key=lambda t: (_meta(t).get("namespace", ""), _meta(t).get("name", ""))):
        g = goodput_of(trainjob, now)
        meta = _meta(trainjob)
        if g is None:
            rows.append([meta.get("namespace", ""), meta.get("name", ""), derived_state(trainjob), "-", *["-"] * 9])
            continue
        seconds = {s["phase"]: s["seconds"] for s in g["segments"]}
        for phase in accounting.PHASES:
            sums[phase] += seconds.get(phase, 0)
        idle = g["idleAcceleratorSeconds"]
        idle_total += idle or 0
        rows.append(
            [
                meta.get("namespace", ""),
                meta.get("name", ""),
                derived_state(trainjob),
                g["phase"],
                *(_duration(seconds.get(phase, 0)) for phase in accounting.PHASES),
                "-" if g["percent"] is None else f"{g['percent']}%",
                "-" if idle is None else f"{idle / 3600:.2f}",
                _duration(g["firstProgressSeconds"]),
                str(g["stalls"]),
            ]
        )
    total = sum(sums.values())
    percent = f"{sums[accounting.TRAINING] * 100 // total}%" if total else "-"
    rows.append(
        [
            "",
            "ALL",
            "",
            "",
            *(_duration(sums[p]) for p in accounting.PHASES),
            percent,
            f"{idle_total / 3600:.2f}",
            "",
            "",
        ]
    )
    return rows


def aligned(header: Iterable[str], rows: Iterable[list[str]]) -> str:
    """Columns as kubectl prints them: left-aligned, three spaces apart."""
    table = [list(header), *rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    return "\n".join("   ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in table)
