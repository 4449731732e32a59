"""Progress of long solves on stderr: elapsed time, best objective, bound and gap.

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
    """One readable line for a progress event."""
    obj, bnd = event.get("objective"), event.get("bound")
    parts = [f"[{event.get('elapsed', 0):8.2f}s] {event.get('stage', '?'):<10}"]
    if obj is not None:
        parts.append(f"objective {_fmt(obj)}")
    if bnd is not None:
        parts.append(f"bound {_fmt(bnd)}")
    if event.get("gap") is not None:
        parts.append(f"gap {float(event['gap']):.3%}")
    return "  ".join(parts)


def _fmt(x: Any) -> str:
    if isinstance(x, list | tuple):
        return "[" + ", ".join(f"{v:g}" if isinstance(v, float | int) else str(v) for v in x) + "]"
    return f"{x:g}" if isinstance(x, float | int) else str(x)


def stderr_progress(quiet: bool = False, stream: TextIO | None = None) -> Callable[[dict[str, Any]], None] | None:
    """A progress callback printing to ``stream`` (stderr), or None when quiet or not a terminal."""
    out = stream or sys.stderr
    if quiet or not out.isatty():
        return None

    def show(event: dict[str, Any]) -> None:
        print(format_progress(event), file=out, flush=True)
    return show
