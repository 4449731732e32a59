"""Time quantities of the scenario format: ``90s``, ``15m``, ``2h``, ``3d`` or integer seconds.

Inside the model every time is an integer number of seconds. :class:`ScheduleSpec` holds the
top-level ``schedule: {horizon, step}`` settings of a scenario.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, field_validator, model_validator

from capplan.model.decode import LIMITS
from capplan.model.units import Frozen

_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_TIME_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
DEFAULT_HORIZON_S = 7 * 86400
DEFAULT_STEP_S = 60


def parse_seconds(value: Any) -> int:
    """Convert ``value`` (integer seconds or a string such as ``90s``, ``15m``, ``2h``, ``3d``) to seconds.

    Parameters
    ----------
    value
        A non-negative integer, or a string: a number followed by one unit ``s``, ``m``, ``h`` or ``d``.

    Returns
    -------
    int
        Whole seconds.

    Raises
    ------
    ValueError
        With a message that names the accepted forms, or the limit when the time is above the file limit
        on numbers (``LIMITS.magnitude``, 10^15 s: flags obey the file limits too).
    """
    secs = _parse_seconds(value)
    if secs > LIMITS.magnitude:
        raise _too_long(value, secs)
    return secs


def _too_long(value: Any, secs: float) -> ValueError:
    return ValueError(f"{value!r} is {secs:.3g} s, above the limit of {LIMITS.magnitude:g} s "
                      "(see docs/formats.md, Limits)")


def _parse_seconds(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError(f"expected seconds or a time such as 90s, 15m, 2h, 3d; got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"must be zero or more seconds, got {value}")
        return value
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    if isinstance(value, str):
        m = _TIME_RE.match(value)
        if m:
            secs = float(m.group(1)) * _UNIT_SECONDS[m.group(2) or "s"]
            if secs > LIMITS.magnitude:  # before round(): 1e21 days would overflow nothing but mean nothing
                raise _too_long(value, secs)
            if abs(secs - round(secs)) < 1e-9:
                return round(secs)
            raise ValueError(f"{value!r} is not a whole number of seconds")
    raise ValueError(f"expected seconds or a time such as 90s, 15m, 2h, 3d; got {value!r}")


def format_seconds(secs: int) -> str:
    """Short text of a time in its largest whole unit up to hours: ``31h``, ``150m``, ``90s`` (parseable)."""
    if secs % 3600 == 0:
        return f"{secs // 3600}h"
    if secs % 60 == 0:
        return f"{secs // 60}m"
    return f"{secs}s"


def describe_seconds(secs: int) -> str:
    """A time for messages: ``31h``, ``14h15m``, ``90s``, ``2h0m30s``."""
    h, rest = divmod(secs, 3600)
    m, s = divmod(rest, 60)
    if not secs:
        return "0h"
    out = f"{h}h" if h else ""
    if m or (s and h):
        out += f"{m}m"
    if s:
        out += f"{s}s"
    return out


def ceil_to(t: int, step: int) -> int:
    """The first multiple of ``step`` at or after ``t``."""
    return -(-t // step) * step


class ScheduleSpec(Frozen):
    """The time grid of ``capplan schedule``: a horizon and the step of start times (seconds)."""

    horizon: int = Field(default=DEFAULT_HORIZON_S, gt=0)
    step: int = Field(default=DEFAULT_STEP_S, gt=0)

    @field_validator("horizon", "step", mode="before")
    @classmethod
    def _seconds(cls, v: Any) -> int:
        return parse_seconds(v)

    @model_validator(mode="after")
    def _grid(self) -> ScheduleSpec:
        if self.step > self.horizon:
            raise ValueError(f"step {format_seconds(self.step)} is longer than the horizon "
                             f"{format_seconds(self.horizon)}; use a smaller step")
        if self.horizon // self.step > 10_000_000:
            raise ValueError("the horizon has more than 10,000,000 steps; use a larger step")
        return self


class RunningEnd(Frozen):
    """Remaining run time of one running replica (``ends_in`` of a ``running:`` entry), in seconds; ``elapsed``
    (optional): how long it has run, which a run-time spread conditions on (``schedule --duration-spread``)."""

    workload: str
    replica: int = Field(ge=0)
    ends_in: int = Field(gt=0)
    elapsed: int | None = Field(default=None, ge=0)

    @field_validator("ends_in", mode="before")
    @classmethod
    def _seconds(cls, v: Any) -> int:
        return parse_seconds(v)

    @field_validator("elapsed", mode="before")
    @classmethod
    def _elapsed(cls, v: Any) -> int | None:
        return None if v is None else parse_seconds(v)
