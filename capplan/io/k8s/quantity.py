"""Kubernetes resource quantities (``250m``, ``16Gi``, ``1000000Ki``, ``2e3``) as exact numbers."""

from __future__ import annotations

import math
import re
from fractions import Fraction

from capplan.model.decode import LIMITS
from capplan.model.errors import InputError

_SUFFIX = {
    "": Fraction(1),
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}
_MOST = Fraction(2**63 - 1)
#: Most devices (GPUs, or MIG devices) one node or pod may declare.
MAX_DEVICES = LIMITS.gpus_per_node * 8
_RE = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]))?$")


def parse_quantity(value: object, path: str) -> Fraction:
    """Parse a Kubernetes quantity into an exact :class:`~fractions.Fraction`.

    Parameters
    ----------
    value
        A string such as ``"250m"``, ``"16Gi"``, ``"2e3"`` or a plain JSON number.
    path
        Field path used in the error message.

    Raises
    ------
    InputError
        If ``value`` is not a valid, non-negative quantity.
    """
    if isinstance(value, bool):
        raise InputError(path, f"expected a Kubernetes quantity such as 250m or 16Gi, got {value!r}")
    if isinstance(value, int):
        q = Fraction(value)
    elif isinstance(value, float) and math.isfinite(value):
        q = Fraction(str(value))
    elif isinstance(value, str) and (m := _RE.match(value.strip())):
        number, exp, suffix = m.groups()
        q = Fraction(number)
        if exp:
            if abs(int(exp[1:])) > 40:  # 1e400 would build a 400-digit fraction; no quantity is that big
                raise InputError(path, f"{value!r} is out of range (Kubernetes quantities stay below 2^63)")
            q *= Fraction(10) ** int(exp[1:])
        elif suffix:
            q *= _SUFFIX[suffix]
    else:
        raise InputError(path, f"expected a Kubernetes quantity such as 250m or 16Gi, got {value!r}")
    if q < 0:
        raise InputError(path, f"a resource quantity must not be negative, got {value!r}")
    if q > _MOST:
        raise InputError(path, f"{value!r} is out of range (Kubernetes quantities stay below 2^63)")
    return q


def cpu_milli(value: object, path: str) -> int:
    """CPU quantity in milli-cores (rounded up, as Kubernetes does for requests)."""
    return math.ceil(parse_quantity(value, path) * 1000)


def memory_mib(value: object, path: str, round_up: bool = False) -> int:
    """Memory quantity in MiB: floor for capacities, ceiling for requests (``round_up``)."""
    q = parse_quantity(value, path) / 2**20
    return math.ceil(q) if round_up else math.floor(q)


def count(value: object, path: str, most: int | None = None) -> int:
    """An extended-resource count (``nvidia.com/gpu``): a whole number, at most ``most``."""
    q = parse_quantity(value, path)
    if q.denominator != 1:
        raise InputError(path, f"extended resources are whole numbers, got {value!r}")
    if most is not None and q > most:
        raise InputError(path, f"{value!r} devices is over the limit of {most} (see docs/formats.md, Limits)")
    return int(q)
