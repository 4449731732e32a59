"""Start-time estimates of pending Kueue workloads (``capplan export kueue-eta``).

From a scenario imported by ``capplan import kueue`` and its schedule (``capplan schedule --policy kueue``
for what Kueue will do, or the optimal one), one row per pending Workload: estimated start (RFC 3339 and
seconds from now), its position in its ClusterQueue (Kueue's order: priority, then creation time), the
queue, and why it waits. Written as a ``v1 List`` of Workload patches for server-side apply
(``kubectl apply --server-side --field-manager=capplan -f FILE``) or as a Prometheus text exposition for
node_exporter's textfile collector.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from capplan.io.k8s.kueue import format_time, parse_time
from capplan.model.errors import InputError
from capplan.model.problem import Problem
from capplan.model.schedule import Schedule

START_ANNOTATION = "capplan.io/estimated-start"
REASON_ANNOTATION = "capplan.io/estimated-start-reason"
WAIT_ANNOTATION = "capplan.io/estimated-wait-seconds"
POSITION_ANNOTATION = "capplan.io/queue-position"
FIELD_MANAGER = "capplan"
START_METRIC = "capplan_workload_estimated_start_timestamp_seconds"
WAIT_METRIC = "capplan_workload_estimated_wait_seconds"


@dataclass(frozen=True)
class Estimate:
    """One pending Workload's estimate (``start`` None: it does not start within the horizon)."""

    namespace: str
    name: str
    cluster_queue: str
    position: int
    start: datetime | None
    wait_s: int | None
    reason: str


def _clock(t: datetime, now: datetime) -> str:
    return f"{t:%H:%M} UTC" if t.date() == now.date() else f"{t:%Y-%m-%d %H:%M} UTC"


def estimates(p: Problem, s: Schedule, kueue: dict[str, Any]) -> list[Estimate]:
    """The estimate of every pending Workload of the import metadata ``kueue`` (its ``kueue`` section).

    Raises
    ------
    InputError
        The scenario has no ``now`` (it was not imported from a live cluster).
    """
    if p.now is None:
        raise InputError("now", "the scenario has no `now:` (the wall-clock time of time 0); import it with "
                                "capplan import kueue or add now: 2026-03-02T01:40:00Z")
    now = parse_time(p.now, "now")
    rows = {r.name: r for r in s.workloads}
    unsched = {u.workload: u.reason for u in s.unscheduled}
    kueue_starts = s.metrics.get("kueue_starts") or {}
    sampled = s.metrics.get("kueue_eta_s") or {}
    raw = s.metrics.get("kueue_reasons") or {}
    pending = [w for w in p.workloads if w.name in kueue and not kueue[w.name].get("admitted")]
    pending.sort(key=lambda w: (-w.priority, w.created, p.workload_index[w.name]))
    position: dict[str, int] = {}
    count: dict[str, int] = {}
    for w in pending:
        q = str(kueue[w.name].get("cluster_queue") or "")
        count[q] = count.get(q, 0) + 1
        position[w.name] = count[q]
    out = []
    for w in sorted(pending, key=lambda w: p.workload_index[w.name]):
        info = kueue[w.name]
        row = rows.get(w.name)
        start_s = row.start_s if row is not None and row.start_s is not None else kueue_starts.get(w.name)
        if w.name in sampled:  # the median over simulations with sampled run times (schedule --samples)
            start_s = sampled[w.name]
        start = None if start_s is None else now + timedelta(seconds=int(start_s))
        why = raw.get(w.name) or (row.reason if row is not None else None) or unsched.get(w.name)
        if start is None:
            reason = f"{why or 'no room'}; no start within the schedule's horizon"
        elif not start_s:
            reason = "starts now"
        else:
            reason = f"{why or 'waits for room'} until {_clock(start, now)}"
        out.append(Estimate(namespace=str(info["namespace"]), name=str(info["name"]),
                            cluster_queue=str(info.get("cluster_queue") or ""), position=position[w.name],
                            start=start, wait_s=None if start_s is None else int(start_s), reason=reason))
    return out


def workload_patches(rows: list[Estimate], api_version: str | None = None) -> dict[str, Any]:
    """A ``v1 List`` of Workload objects holding only the estimate annotations (server-side apply, field
    manager ``capplan``). ``api_version``: ``kueue.x-k8s.io/v1beta2`` (default) or ``.../v1beta1``."""
    version = api_version or "kueue.x-k8s.io/v1beta2"
    if "/" not in version:
        version = "kueue.x-k8s.io/v1beta1" if _older(version) else "kueue.x-k8s.io/v1beta2"
    if version not in ("kueue.x-k8s.io/v1beta1", "kueue.x-k8s.io/v1beta2"):
        raise InputError("--kueue-api-version", f"Workloads are kueue.x-k8s.io/v1beta1 or v1beta2, not {version!r}")
    items = []
    for r in rows:
        ann = {REASON_ANNOTATION: r.reason, POSITION_ANNOTATION: str(r.position)}
        if r.start is not None and r.wait_s is not None:
            ann[START_ANNOTATION] = format_time(r.start)
            ann[WAIT_ANNOTATION] = str(r.wait_s)
        items.append({"apiVersion": version, "kind": "Workload",
                      "metadata": {"name": r.name, "namespace": r.namespace, "annotations": dict(sorted(ann.items()))}})
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}


def _older(release: str) -> bool:
    """Kueue releases before 0.15 serve Workloads as v1beta1 only."""
    try:
        major, minor = (int(x) for x in release.strip().lstrip("v").split(".")[:2])
    except ValueError:
        raise InputError("--kueue-api-version", f"expected a Kueue release such as 0.19, got {release!r}") from None
    return (major, minor) < (0, 15)


def _label(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def prometheus_text(rows: list[Estimate]) -> str:
    """Text exposition (format 0.0.4) of the estimates: start as Unix time, wait in seconds (``+Inf``: no start
    within the horizon, and then no start sample)."""
    lines = [f"# HELP {START_METRIC} Estimated start of a pending Kueue workload (Unix time), by capplan.",
             f"# TYPE {START_METRIC} gauge"]
    labels = [(r, f'namespace="{_label(r.namespace)}",name="{_label(r.name)}",'
                  f'cluster_queue="{_label(r.cluster_queue)}"') for r in rows]
    lines += [f"{START_METRIC}{{{lab}}} {int(r.start.timestamp())}" for r, lab in labels if r.start is not None]
    lines += [f"# HELP {WAIT_METRIC} Estimated wait of a pending Kueue workload from now until it starts, in seconds.",
              f"# TYPE {WAIT_METRIC} gauge"]
    lines += [f"{WAIT_METRIC}{{{lab}}} {r.wait_s if r.wait_s is not None else '+Inf'}" for r, lab in labels]
    return "\n".join(lines) + "\n"
