"""Read a plan or a schedule (a plan whose assignments carry ``start_s`` and ``end_s``) for the report.

The schedule format is the one of ``capplan schedule`` (docs/formats.md): the plan's fields plus
``horizon_s``, per-assignment ``start_s`` / ``end_s``, a ``workloads`` table and ``unscheduled``.
Only the fields the report draws are read here (fields added later are ignored); the planner's own
model checks the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from capplan.model.errors import InputError
from capplan.model.plan import Assignment, Plan, Unplaced, input_error_from


@dataclass(frozen=True)
class Timed:
    """One scheduled replica: where it runs and from when to when (seconds from the plan's start)."""

    assignment: Assignment
    start_s: int
    end_s: int


@dataclass(frozen=True)
class Timeline:
    """A schedule's timing facts: horizon, every timed assignment and the per-workload rows."""

    horizon_s: int
    timed: tuple[Timed, ...]
    workloads: tuple[dict[str, Any], ...] = field(default=())
    #: The schedule's own per-priority work done and bound (GPU-hours, highest priority first), when given.
    priorities: tuple[int, ...] = ()
    objective: tuple[float, ...] = ()
    bound: tuple[float, ...] = ()

    def active_at(self, t: int) -> list[Assignment]:
        """The assignments running at instant ``t`` (start <= t < end)."""
        return [x.assignment for x in self.timed if x.start_s <= t < x.end_s]


_ASSIGNMENT_FIELDS = frozenset(Assignment.model_fields)
_UNPLACED_FIELDS = frozenset(Unplaced.model_fields)


def is_schedule(data: Any) -> bool:
    """True when parsed JSON ``data`` is a schedule rather than a plan."""
    return isinstance(data, dict) and "horizon_s" in data


def _int(v: Any, path: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int | float) or v < 0:
        raise InputError(path, f"expected seconds (a number of zero or more), got {v!r}")
    return int(v)


def _rows(raw: Any) -> tuple[dict[str, Any], ...]:
    """The per-workload rows, reduced to the fields the report shows, each of its expected type."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise InputError("workloads", "expected a list of {name, start_s, end_s, wait_s, deadline_met}")
    out = []
    for k, r in enumerate(raw):
        if not isinstance(r, dict) or not isinstance(r.get("name"), str):
            raise InputError(f"workloads[{k}]", "expected a mapping with a `name`")
        row: dict[str, Any] = {"name": r["name"]}
        for key in ("start_s", "end_s", "wait_s"):
            v = r.get(key)
            row[key] = None if v is None else _int(v, f"workloads[{k}].{key}")
        met = r.get("deadline_met")
        if met is not None and not isinstance(met, bool):
            raise InputError(f"workloads[{k}].deadline_met", f"expected true, false or null, got {met!r}")
        row["deadline_met"] = met
        out.append(row)
    return tuple(out)


def _per_priority(data: dict[str, Any]) -> tuple[tuple[int, ...], tuple[float, ...], tuple[float, ...]]:
    """``priorities``, ``objective`` and ``bound`` of a schedule, when all three are lists of numbers of one length."""
    out = []
    for key in ("priorities", "objective", "bound"):
        v = data.get(key)
        ok = isinstance(v, list) and all(isinstance(x, int | float) and not isinstance(x, bool) for x in v)
        out.append(tuple(v) if ok and isinstance(v, list) else ())
    if len({len(x) for x in out}) != 1:
        return (), (), ()
    return tuple(int(q) for q in out[0]), tuple(map(float, out[1])), tuple(map(float, out[2]))


def read_result(data: Any) -> tuple[Plan, Timeline | None]:
    """A plan, or a schedule as (the plan of what runs at t = 0, its timeline).

    Raises
    ------
    InputError
        With the field path when the JSON is neither a valid plan nor a valid schedule.
    """
    if not is_schedule(data):
        return Plan.from_data(data), None
    horizon = _int(data["horizon_s"], "horizon_s")
    raw = data.get("assignments", [])
    if not isinstance(raw, list):
        raise InputError("assignments", "expected a list")
    timed: list[Timed] = []
    for k, a in enumerate(raw):
        if not isinstance(a, dict):
            raise InputError(f"assignments[{k}]", "expected a mapping")
        start = _int(a.get("start_s"), f"assignments[{k}].start_s")
        end = _int(a.get("end_s", horizon), f"assignments[{k}].end_s")
        if end < start:
            raise InputError(f"assignments[{k}].end_s", f"ends at {end} s before it starts at {start} s")
        body = {x: y for x, y in a.items() if x in _ASSIGNMENT_FIELDS}  # later additions are ignored
        try:
            timed.append(Timed(Assignment.model_validate(body), start, end))
        except ValidationError as exc:
            raise input_error_from(exc, f"assignments[{k}]") from None
    tl = Timeline(horizon, tuple(timed), _rows(data.get("workloads")), *_per_priority(data))
    unplaced: list[Unplaced] = []
    for k, u in enumerate(data.get("unscheduled", []) or []):
        try:
            unplaced.append(Unplaced.model_validate({x: y for x, y in u.items() if x in _UNPLACED_FIELDS}
                                                    if isinstance(u, dict) else u))
        except ValidationError as exc:
            raise input_error_from(exc, f"unscheduled[{k}]") from None
    status = data.get("status", "unknown")
    plan_data = {"status": status if status in ("optimal", "feasible", "infeasible", "unknown") else "unknown",
                 "strategy": str(data.get("strategy", "schedule")),
                 "gap": data.get("gap", 0.0) or 0.0,
                 "assignments": [a.model_dump(exclude_none=True) for a in tl.active_at(0)],
                 "unplaced": [u.model_dump() for u in unplaced]}
    return Plan.from_data(plan_data), tl
