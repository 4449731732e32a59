"""Progress of long solves on stderr: elapsed seconds, GPUs placed, bound and gap.

The library reports progress through ``PlanOptions.progress`` (a callback receiving dicts with
``stage``, ``elapsed``, ``objective``, ``bound`` and, when known, ``gap``); this module turns
those into one line each on stderr for the CLI. It stays silent when stderr is not a terminal
or with ``--quiet``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TextIO


def format_progress(event: dict[str, Any]) -> str:
    """One readable line for a progress event, in user units (GPUs, replicas, %, seconds).

    See :mod:`capplan.placement.core.progress` for the event keys. ``objective`` and ``bound`` are
    GPUs placed (a list per priority, highest first, or one number for ``priority``).
    """
    parts = [f"[{_num(event.get('elapsed', 0)):>7.1f} s] {event.get('stage', '?')}"]
    obj, bnd = event.get("objective"), event.get("bound")
    where = f" at priority {event['priority']}" if event.get("priority") is not None else ""
    per = " per priority" if isinstance(obj, list | tuple) and len(obj) > 1 else ""
    if obj is not None:
        parts.append(f"placed {_gpus(obj)} GPUs{where}{per}")
    if bnd is not None:
        parts.append(f"bound {_gpus(bnd)} GPUs")
    if event.get("gap") is not None:
        parts.append(f"gap {100 * _num(event['gap']):.1f}%")
    if event.get("guaranteed") is not None:
        total = event.get("guaranteed_total")
        of = f" of {total}" if total is not None else ""
        parts.append(f"guaranteed replicas placed {event['guaranteed']}{of}")
    if event.get("step") is not None:
        parts.append(f"step {event['step']}")
    if event.get("message"):
        parts.append(str(event["message"]))
    return ", ".join(parts)


def _num(x: Any) -> float:
    try:
        return float(x) + 0.0  # + 0.0 turns -0.0 into 0.0
    except (TypeError, ValueError):
        return 0.0


def _gpus(x: Any) -> str:
    """GPUs with at most 2 decimals, never ``-0`` nor exponent notation."""
    def one(v: Any) -> str:
        r = round(_num(v), 2) + 0.0
        return f"{r:.2f}".rstrip("0").rstrip(".") if r != int(r) else f"{int(r)}"
    if isinstance(x, list | tuple):
        return "[" + ", ".join(one(v) for v in x) + "]"
    return one(x)


def stderr_progress(quiet: bool = False, stream: TextIO | None = None) -> Callable[[dict[str, Any]], None] | None:
    """A progress callback printing to ``stream`` (stderr), or None when quiet or not a terminal."""
    out = stream or sys.stderr
    if quiet or not out.isatty():
        return None

    def show(event: dict[str, Any]) -> None:
        print(format_progress(event), file=out, flush=True)
    return show
