"""The plan: capplan's output contract (JSON), shared by every planner.

See ``docs/formats.md`` for the field-by-field description; ``capplan schema`` prints the JSON
Schema generated from these models.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import Field, ValidationError

from capplan.model.errors import InputError
from capplan.model.units import Frozen

Status = Literal["optimal", "feasible", "infeasible", "unknown"]
PLAN_FORMAT_VERSION = 1


class MigSlot(Frozen):
    """A MIG instance (or AMD partition): its profile and start on the memory-slice axis."""

    profile: str
    start: int = Field(ge=0)


class Assignment(Frozen):
    """Where one replica runs: a node and, for GPU demands, the GPU indices and slice or share."""

    workload: str
    replica: int = Field(ge=0)
    node: str
    gpus: tuple[int, ...] = ()
    mig: MigSlot | None = None
    fraction: float | None = Field(default=None, gt=0, le=1)

    @property
    def key(self) -> tuple[str, int]:
        """(workload, replica): the replica's identity."""
        return (self.workload, self.replica)


class Unplaced(Frozen):
    """Replicas of one workload left unplaced, with a reason a user can act on."""

    workload: str
    replicas: tuple[int, ...]
    reason: str


class Eviction(Frozen):
    """A running replica the plan stops to make room for higher-priority work."""

    workload: str
    replica: int
    node: str
    reason: str


class Migration(Frozen):
    """A running replica the plan moves from one node (or GPU) to another."""

    workload: str
    replica: int
    from_node: str
    to_node: str
    reason: str


class Plan(Frozen):
    """The result of planning: assignments, what was left out and why, and solve statistics.

    ``objective`` and ``bound`` hold the placed GPU demand (in GPUs) per priority, highest
    priority first, in the order of ``priorities``. ``gap`` is the relative gap at the
    highest priority whose objective is below its bound (0 when every bound is met).
    """

    format_version: int = PLAN_FORMAT_VERSION
    status: Status
    strategy: str
    objective: tuple[float, ...] = ()
    bound: tuple[float, ...] = ()
    priorities: tuple[int, ...] = ()
    gap: float = Field(default=0.0, ge=0)
    solve_seconds: float = Field(default=0.0, ge=0)
    seed: int = 0
    assignments: tuple[Assignment, ...] = ()
    unplaced: tuple[Unplaced, ...] = ()
    evictions: tuple[Eviction, ...] = ()
    migrations: tuple[Migration, ...] = ()
    metrics: dict[str, Any] = Field(default_factory=dict)

    def to_json(self) -> str:
        """Serialise to the JSON plan format: one line per assignment, null fields left out."""
        data = self.model_dump(mode="json", exclude_none=True, exclude={"assignments"})
        parts = []
        for key in type(self).model_fields:
            if key == "assignments":
                val: Any = self.assignments
                if val:
                    items = ",\n".join([_assignment_line(a) for a in self.assignments])
                    parts.append(f' "assignments": [\n{items}\n ]')
                    continue
                val = []
            elif key in data:
                val = data[key]
            else:
                continue
            if isinstance(val, list) and val and isinstance(val[0], dict):
                items = ",\n".join(f"  {json.dumps(x)}" for x in val)
                parts.append(f" {json.dumps(key)}: [\n{items}\n ]")
            else:
                parts.append(f" {json.dumps(key)}: {json.dumps(val)}")
        return "{\n" + ",\n".join(parts) + "\n}\n"

    @classmethod
    def from_json(cls, text: str) -> Plan:
        """Parse a JSON plan, raising :class:`InputError` with the field path on bad input."""
        try:
            return cls.model_validate_json(text)
        except ValidationError as exc:
            raise input_error_from(exc, "") from None

    @classmethod
    def from_data(cls, data: Any) -> Plan:
        """Build a plan from already-parsed JSON data."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise input_error_from(exc, "") from None


_str = json.encoder.encode_basestring_ascii  # what json.dumps uses


def _assignment_line(a: Assignment) -> str:
    """``json.dumps`` of the assignment's JSON dump (null fields left out), indented by two: the same
    text without going through pydantic's serialiser and the generic encoder (a plan may hold 200k)."""
    line = (f'  {{"workload": {_str(a.workload)}, "replica": {int(a.replica)}, "node": {_str(a.node)}, '
            f'"gpus": [{", ".join([str(int(g)) for g in a.gpus])}]')
    if a.mig is not None:
        line += f', "mig": {{"profile": {_str(a.mig.profile)}, "start": {int(a.mig.start)}}}'
    if a.fraction is not None:
        line += f', "fraction": {json.dumps(a.fraction)}'
    return line + "}"


def json_schema() -> dict[str, Any]:
    """The JSON Schema of the plan format."""
    schema = Plan.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "capplan plan"
    return schema


def loc_path(prefix: str, loc: tuple[int | str, ...]) -> str:
    """Turn a pydantic error location into a field path like ``workloads[3].mig``."""
    out = prefix
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def input_error_from(exc: ValidationError, prefix: str) -> InputError:
    """Convert the first error of a pydantic ValidationError into an :class:`InputError`."""
    err = exc.errors()[0]
    loc = tuple(x for x in err["loc"] if not (isinstance(x, str) and x.startswith("function-")))
    msg = str(err["msg"]).removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        msg = "unknown field; check its spelling (see docs/formats.md)"
    return InputError(loc_path(prefix, loc), msg)
