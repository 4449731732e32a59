"""Shared pydantic base class and unit conversions used at the edge.

Inside planners every quantity is an integer: milli-CPU, MiB, watts, and *demand units*
(:data:`UNITS_PER_GPU` per whole GPU). Users write cores, GiB, kW and GPU fractions;
these helpers convert once, when a problem is built.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, Strict

#: Strict scalar types: no coercion of ``"3"`` to 3, ``3.0`` to 3 or ``"yes"`` to True.
Int = Annotated[int, Strict()]
Bool = Annotated[bool, Strict()]
Str = Annotated[str, Strict()]
#: A number (an integer is accepted); never a string or a boolean. Finite by :class:`Frozen`.
Float = Annotated[float, Strict()]
#: A non-empty string: a name.
Name = Annotated[str, Strict(), Field(min_length=1)]

#: Demand units per whole GPU. 7000 is divisible by 7, 4 and 8 (MIG / A30 / MI300X compute
#: slices) and by 1000 (milli-GPU fractions), so every demand is an exact integer.
UNITS_PER_GPU = 7000
MILLI = 1000
MIB_PER_GIB = 1024


class Frozen(BaseModel):
    """Immutable, strictly validated pydantic model (unknown fields and NaN or infinite numbers are errors)."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, allow_inf_nan=False)


def gib_to_mib(gib: float) -> int:
    """Convert GiB to whole MiB, rounding up so a requirement is never understated."""
    mib = gib * MIB_PER_GIB
    r = round(mib)
    return r if abs(mib - r) < 1e-6 else int(mib) + 1


def cores_to_milli(cores: float) -> int:
    """Convert CPU cores to milli-CPU, rounding up."""
    m = cores * MILLI
    r = round(m)
    return r if abs(m - r) < 1e-6 else int(m) + 1


def units_to_gpus(units: int) -> float:
    """Convert demand units to GPUs for output (rounded to 6 decimals)."""
    return round(units / UNITS_PER_GPU, 6)
