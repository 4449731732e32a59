"""The plan: capplan's output contract (JSON), shared by every planner.

See ``docs/formats.md`` for the field-by-field description; ``capplan schema`` prints the JSON
Schema generated from these models.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, Field, ValidationError

from capplan.model.errors import InputError, close_matches, describe, suggest
from capplan.model.units import Float, Frozen, Int, Name, Str

Status = Literal["optimal", "feasible", "infeasible", "unknown"]
PLAN_FORMAT_VERSION = 1


class MigSlot(Frozen):
    """A MIG instance (or AMD partition): its profile and start on the memory-slice axis."""

    profile: Name
    start: Int = Field(ge=0, le=64)

    # Equality and hash by the two fields, as pydantic's (a plan at fleet scale compares slots with preset layouts
    # hundreds of thousands of times; pydantic's generic comparison was a tenth of the whole command).
    def __eq__(self, other: object) -> bool:
        if type(other) is not MigSlot:
            return NotImplemented
        return self.profile == other.profile and self.start == other.start

    def __hash__(self) -> int:
        return hash((self.profile, self.start))


class Assignment(Frozen):
    """Where one replica runs: a node and, for GPU demands, the GPU indices and slice or share."""

    workload: Name
    replica: Int = Field(ge=0)
    node: Name
    gpus: tuple[Int, ...] = ()
    mig: MigSlot | None = None
    fraction: Float | None = Field(default=None, gt=0, le=1)

    @property
    def key(self) -> tuple[str, int]:
        """(workload, replica): the replica's identity."""
        return (self.workload, self.replica)


class Unplaced(Frozen):
    """Replicas of one workload left unplaced, with a reason a user can act on."""

    workload: Name
    replicas: tuple[Int, ...]
    reason: Str


class Eviction(Frozen):
    """A running replica the plan stops to make room for higher-priority work."""

    workload: Name
    replica: Int
    node: Name
    reason: Str


class Migration(Frozen):
    """A running replica the plan moves from one node (or GPU) to another."""

    workload: Name
    replica: Int
    from_node: Name
    to_node: Name
    reason: Str


class GoodputRow(Frozen):
    """The goodput of one placed gang with ``checkpoint`` under the scenario's interruptions.

    ``nodes`` and ``gpus`` are what the gang runs on; ``spare_nodes`` the idle hot spares held for it
    (``spares`` of them); ``failure_rate_per_hour`` is λ, ``checkpoint_interval_s`` the work segment τ
    (given, or the optimum), ``goodput`` u, ``goodput_per_provisioned_gpu`` u·n/(n + s), and
    ``lost_gpu_hours_per_day`` the gang's GPUs × 24 × (1 − u) (see docs/concepts.md, Goodput).
    """

    workload: Name
    nodes: Int = Field(ge=0)
    gpus: Int = Field(ge=0)
    spares: Int = Field(ge=0)
    spare_nodes: tuple[Name, ...] = ()
    failure_rate_per_hour: Float = Field(ge=0)
    checkpoint_interval_s: Float = Field(gt=0)
    goodput: Float = Field(ge=0, le=1)
    goodput_per_provisioned_gpu: Float = Field(ge=0, le=1)
    lost_gpu_hours_per_day: Float = Field(ge=0)


class Plan(Frozen):
    """The result of planning: assignments, what was left out and why, and solve statistics.

    ``objective`` and ``bound`` hold the placed GPU demand (in GPUs) per priority, highest
    priority first, in the order of ``priorities``. ``gaps`` holds the relative gap
    ``(bound - objective) / bound`` of each priority (0 where the bound is 0), aligned with
    ``priorities`` (:func:`priority_gaps`); ``gap`` is the first nonzero one, the gap at the highest
    priority whose objective is below its bound (0 when every bound is met). ``metrics.cut_by_time_limit``
    says whether the time limit stopped the search before it finished (never for an ``optimal`` plan).
    ``goodput`` has one row per placed gang with ``checkpoint`` (its spare nodes included).
    """

    format_version: Int = PLAN_FORMAT_VERSION
    status: Status
    strategy: Str
    objective: tuple[Float, ...] = ()
    bound: tuple[Float, ...] = ()
    priorities: tuple[Int, ...] = ()
    gap: Float = Field(default=0.0, ge=0)
    gaps: tuple[Float, ...] = ()
    solve_seconds: Float = Field(default=0.0, ge=0)
    seed: Int = 0
    assignments: tuple[Assignment, ...] = ()
    unplaced: tuple[Unplaced, ...] = ()
    evictions: tuple[Eviction, ...] = ()
    migrations: tuple[Migration, ...] = ()
    goodput: tuple[GoodputRow, ...] = ()
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
            elif key == "goodput" and not self.goodput:
                continue  # plans without gangs under interruptions keep their old form
            elif key in data:
                val = data[key]
            else:
                continue
            parts.append(json_field(key, val))
        return "{\n" + ",\n".join(parts) + "\n}\n"

    @classmethod
    def from_json(cls, text: str) -> Plan:
        """Parse a JSON plan, raising :class:`InputError` with the field path on bad input."""
        try:
            return cls.model_validate_json(text)
        except ValidationError as exc:
            raise input_error_from(exc, "", Plan) from None

    @classmethod
    def from_data(cls, data: Any) -> Plan:
        """Build a plan from already-parsed JSON data."""
        try:
            if not isinstance(data, dict):
                raise InputError("", f"a plan is a JSON object, got {describe(data)}")
            return cls.model_validate(data)
        except ValidationError as exc:
            raise input_error_from(exc, "", Plan) from None


def priority_gaps(objective: Sequence[float], bound: Sequence[float]) -> tuple[float, ...]:
    """The relative gap of each priority, ``(bound - objective) / bound`` (0 where the bound is 0 or met),
    rounded to six decimals: a plan's ``gaps``, aligned with its ``priorities``."""
    return tuple(round((b - o) / b, 6) if b > o and b > 0 else 0.0 for o, b in zip(objective, bound, strict=True))


def lexicographic_gap(objective: Sequence[float], bound: Sequence[float]) -> float:
    """A plan's ``gap``: the relative gap at the highest priority whose objective is below its bound."""
    return next((g for g in priority_gaps(objective, bound) if g > 0), 0.0)


_str = json.encoder.encode_basestring_ascii  # what json.dumps uses


def _assignment_line(a: Assignment) -> str:
    """``json.dumps`` of the assignment's JSON dump (null fields left out), indented by two: the same
    text without going through pydantic's serialiser and the generic encoder (a plan may hold 200k)."""
    gpus = a.gpus
    listed = str(int(gpus[0])) if len(gpus) == 1 else ", ".join([str(int(g)) for g in gpus])
    line = (f'  {{"workload": {_str(a.workload)}, "replica": {int(a.replica)}, "node": {_str(a.node)}, '
            f'"gpus": [{listed}]')
    if a.mig is not None:
        line += f', "mig": {{"profile": {_str(a.mig.profile)}, "start": {int(a.mig.start)}}}'
    if a.fraction is not None:  # json.dumps of a finite float is its repr (the model rejects NaN and infinities)
        line += f', "fraction": {float.__repr__(a.fraction)}'
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


def _unwrap(ann: Any) -> list[Any]:
    """The types an annotation may hold (Optional, unions and Annotated taken apart)."""
    origin = get_origin(ann)
    if origin is Annotated:
        return _unwrap(get_args(ann)[0])
    if origin in (Union, UnionType):
        return [t for a in get_args(ann) for t in _unwrap(a)]
    return [ann]


def _fields_at(model: Any, loc: tuple[int | str, ...]) -> list[str]:
    """Field names of the pydantic model found at ``loc`` below ``model`` (empty if none)."""
    types = [model]
    for part in loc:
        nxt: list[Any] = []
        for t in types:
            for u in _unwrap(t):
                origin = get_origin(u)
                if isinstance(u, type) and issubclass(u, BaseModel) and isinstance(part, str):
                    if part in u.model_fields:
                        nxt.append(u.model_fields[part].annotation)
                elif origin in (tuple, list) and isinstance(part, int):
                    nxt.extend(a for a in get_args(u) if a is not Ellipsis)
                elif origin is dict:
                    nxt.append(get_args(u)[1])
        if not nxt:
            return []  # a union branch name or a field without a model
        types = nxt
    names: list[str] = []
    for t in types:
        for u in _unwrap(t):
            if isinstance(u, type) and issubclass(u, BaseModel):
                names.extend(u.model_fields)
    return names


def _clean(loc: Any) -> tuple[int | str, ...]:
    scalars = {"int", "str", "float", "bool", "tuple[float, ...]", "tuple[int, ...]", "tuple[str, ...]"}
    return tuple(x for x in loc if not (isinstance(x, str) and (x.startswith(("function-", "lax-", "strict-"))
                                                                  or x in scalars)))


def input_error_from(exc: ValidationError, prefix: str, model: Any = None, origin: str = "") -> InputError:
    """Convert every error of a pydantic ValidationError into one :class:`InputError`.

    With ``model`` (the validated class), an unknown field is named with a ``did you mean`` hint
    from the fields allowed at its place, and the "missing" error of the field it misspells is
    dropped (``term_period`` is reported as unknown, not ``term_periods`` as missing).
    """
    errors = exc.errors()
    problems: list[tuple[str, str]] = []
    replaced: set[tuple[int | str, ...]] = set()
    extra: list[tuple[tuple[int | str, ...], str]] = []
    for err in errors:
        loc = _clean(err["loc"])
        if err["type"] == "extra_forbidden" and loc:
            allowed = _fields_at(model, loc[:-1]) if model is not None else []
            key = str(loc[-1])
            close = close_matches(key, allowed, 1) if allowed else []
            missing = {_clean(e["loc"]) for e in errors if e["type"] == "missing"}
            if close and (*loc[:-1], close[0]) in missing:
                replaced.add((*loc[:-1], close[0]))
            hint = suggest(key, allowed) if allowed else ""
            extra.append((loc, f"unknown field {key!r}{hint}" + ("" if hint else "; check its spelling "
                                                                  "(see docs/formats.md)")))
    extra_locs = {loc: msg for loc, msg in extra}
    for err in errors:
        loc = _clean(err["loc"])
        if loc in extra_locs:
            msg = extra_locs.pop(loc)
        elif err["type"] == "extra_forbidden" or (err["type"] == "missing" and loc in replaced):
            continue
        elif err["type"] == "missing":
            msg = "is required"
        else:
            msg = str(err["msg"]).removeprefix("Value error, ")
            if err["type"] in ("int_type", "float_type", "bool_type", "string_type", "literal_error"):
                msg += f", got {err['input']!r}"[:120]
        problems.append((loc_path(prefix, loc), f"{origin}: {msg}" if origin else msg))
    unique = list(dict.fromkeys(problems))
    return InputError.of(unique or [(prefix, str(exc))])


def json_field(key: str, val: Any) -> str:
    """One top-level field of a plan-like JSON document: a list of objects one per line, else inline."""
    if isinstance(val, list) and val and isinstance(val[0], dict):
        items = ",\n".join(f"  {json.dumps(x)}" for x in val)
        return f" {json.dumps(key)}: [\n{items}\n ]"
    return f" {json.dumps(key)}: {json.dumps(val)}"
