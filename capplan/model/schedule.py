"""The schedule: the output contract (JSON) of ``capplan schedule``.

A schedule places replicas in space (as a plan does) and in time: every assignment carries
``start_s`` and ``end_s`` (seconds from now). See ``docs/formats.md`` for the fields and
``docs/scheduling.md`` for the objective.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, ValidationError

from capplan.model.plan import Assignment, Status, input_error_from, json_field
from capplan.model.units import Frozen

SCHEDULE_FORMAT_VERSION = 1


class TimedAssignment(Assignment):
    """Where and when one replica runs: a plan assignment plus its start and end (seconds)."""

    start_s: int = Field(ge=0)
    end_s: int = Field(gt=0)


class WorkloadTiming(Frozen):
    """One workload's row: when its first replica starts, when its last ends, its wait and deadline.

    ``deadline_met`` is true when every replica runs and ends by the deadline (by the horizon
    when there is no deadline). ``reason`` says why a workload waits past its release (for
    guaranteed workloads) or misses its deadline. ``expected_end_s``, for a gang with ``checkpoint``:
    its expected completion, the start plus ``duration / u`` (the gang holds its GPUs that long, so it
    equals ``end_s``; the deadline is met or missed on it).
    """

    name: str
    start_s: int | None = None
    end_s: int | None = None
    wait_s: int | None = None
    deadline_met: bool = False
    reason: str | None = None
    expected_end_s: int | None = None


class Unscheduled(Frozen):
    """Replicas of one workload that do not run in the horizon, with a reason a user can act on."""

    workload: str
    replicas: tuple[int, ...]
    reason: str


class Schedule(Frozen):
    """The result of scheduling: timed assignments, per-workload timing, what does not run and why.

    ``objective`` and ``bound`` hold, per priority (highest first, as in ``priorities``), the GPU
    demand x time of work that completes by its deadline (or within the horizon), in GPU-hours.
    ``wait_gpu_h`` is the demand-weighted wait over all workloads (GPU-hours, smaller is better).
    ``wait_replica_s`` is the unweighted wait, the sum over scheduled replicas not already running of
    start - release (seconds), the objective's last level (after more replicas run); None in
    schedules written before it existed. ``gap`` is the relative gap at the highest priority whose
    objective is below its bound.
    """

    format_version: int = SCHEDULE_FORMAT_VERSION
    status: Status
    strategy: str
    objective: tuple[float, ...] = ()
    bound: tuple[float, ...] = ()
    priorities: tuple[int, ...] = ()
    gap: float = Field(default=0.0, ge=0)
    wait_gpu_h: float = Field(default=0.0, ge=0)
    wait_replica_s: int | None = Field(default=None, ge=0)
    horizon_s: int = Field(gt=0)
    step_s: int = Field(default=60, gt=0)
    solve_seconds: float = Field(default=0.0, ge=0)
    seed: int = 0
    assignments: tuple[TimedAssignment, ...] = ()
    workloads: tuple[WorkloadTiming, ...] = ()
    unscheduled: tuple[Unscheduled, ...] = ()
    metrics: dict[str, Any] = Field(default_factory=dict)

    def to_json(self) -> str:
        """Serialise to JSON: one line per assignment and per workload row, null fields left out."""
        data = self.model_dump(mode="json", exclude_none=True)
        return "{\n" + ",\n".join(json_field(k, v) for k, v in data.items()) + "\n}\n"

    @classmethod
    def from_data(cls, data: Any) -> Schedule:
        """Build a schedule from parsed JSON data, raising :class:`InputError` on bad input."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise input_error_from(exc, "") from None

    @classmethod
    def from_json(cls, text: str) -> Schedule:
        """Parse a JSON schedule, raising :class:`InputError` with the field path on bad input."""
        try:
            return cls.model_validate_json(text)
        except ValidationError as exc:
            raise input_error_from(exc, "") from None


def schedule_json_schema() -> dict[str, Any]:
    """The JSON Schema of the schedule format."""
    schema = Schedule.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "capplan schedule"
    return schema
