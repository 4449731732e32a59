"""Two schedules of one scenario side by side (``capplan report SCENARIO SCHEDULE --compare OTHER``).

Typically what Kueue will do (``capplan schedule --policy kueue``) against an optimal admission order
(``capplan schedule``): per workload that does not already run, its start under each, and the GPU-hours of
waiting the second saves (demand x (start - release), summed over its replicas; a workload that does not
start in one of them waits to that schedule's horizon there).
"""

from __future__ import annotations

from typing import Any

from capplan.io.report.schedule import Timeline
from capplan.model.problem import Problem
from capplan.model.units import UNITS_PER_GPU


def _starts(tl: Timeline, running: set[tuple[str, int]]) -> dict[str, dict[int, tuple[int, int]]]:
    out: dict[str, dict[int, tuple[int, int]]] = {}
    for x in tl.timed:
        a = x.assignment
        if a.key not in running:
            out.setdefault(a.workload, {})[a.replica] = (x.start_s, x.end_s)
    return out


def compare_schedules(p: Problem, first: Timeline, second: Timeline, labels: tuple[str, str]) -> dict[str, Any]:
    """The comparison data: ``labels`` (e.g. ``kueue``, ``cpsat``), one row per workload with replicas to
    start (start and end under each, wait GPU-hours under each, saved), and the totals."""
    running = {a.key for a in p.running}
    s1, s2 = _starts(first, running), _starts(second, running)
    rows = []
    total = [0.0, 0.0]
    for w in p.workloads:
        todo = [r for r in range(w.replicas) if (w.name, r) not in running]
        if not todo:
            continue
        gpus = p.replica_value(w) / UNITS_PER_GPU
        waits, spans = [], []
        for starts, tl in ((s1, first), (s2, second)):
            mine = starts.get(w.name, {})
            wait_s = sum(max(0, (mine[r][0] if r in mine else tl.horizon_s) - w.release) for r in todo)
            waits.append(round(gpus * wait_s / 3600, 3))
            spans.append([min((v[0] for v in mine.values()), default=None),
                          max((v[1] for v in mine.values()), default=None)])
        total[0] += waits[0]
        total[1] += waits[1]
        rows.append({"name": w.name, "queue": w.queue, "priority": w.priority,
                     "first": spans[0], "second": spans[1], "wait_gpu_h": waits,
                     "saved_gpu_h": round(waits[0] - waits[1], 3)})
    return {"labels": list(labels), "horizon_s": max(first.horizon_s, second.horizon_s), "rows": rows,
            "wait_gpu_h": [round(total[0], 3), round(total[1], 3)], "saved_gpu_h": round(total[0] - total[1], 3)}
