"""Progress of long solves on stderr: elapsed seconds, GPUs placed, bound and gap.

The library reports progress through ``PlanOptions.progress`` (a callback receiving dicts with
``stage``, ``elapsed``, ``objective``, ``bound`` and, when known, ``gap``); this module turns
those into one line each on stderr for the CLI, in plain numbers (``placed 12 / 3.5 GPUs per
priority``) and on the command's one clock. Text lines stay silent when stderr is not a terminal
or with ``--quiet``; JSON records come with ``--log-format json -v``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TextIO

from capplan.cli import console


def format_progress(event: dict[str, Any]) -> str:
    """One readable line for a progress event, in user units (GPUs, replicas, %, seconds).

    See :mod:`capplan.placement.core.progress` for the event keys. ``objective`` and ``bound`` are
    GPUs placed (a list per priority, highest first, or one number for ``priority``).
    """
    parts = [f"[{_num(event.get('elapsed', 0)):>7.1f} s] {event.get('stage', '?')}"]  # the caller's clock
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
    if isinstance(x, list | tuple):  # per priority, highest first: "12 / 3.5"
        return " / ".join(one(v) for v in x)
    return one(x)


def stderr_progress(quiet: bool = False, stream: TextIO | None = None,
                    verbose: bool = False) -> Callable[[dict[str, Any]], None] | None:
    """A progress callback printing to ``stream`` (stderr), or None when quiet.

    Text lines go to a terminal only; with ``--log-format json`` and ``-v``, each event is a JSON
    record (``level`` ``info``, ``event`` ``progress`` and the event's numbers). Elapsed times are
    the command's clock (:func:`capplan.cli.console.elapsed`), as in the log.
    """
    out = stream or sys.stderr
    if quiet or not (verbose if console.is_json() else out.isatty()):
        return None

    def show(event: dict[str, Any]) -> None:
        event = {**event, "elapsed": console.elapsed()}
        if console.is_json():
            fields: dict[str, Any] = {k: v for k, v in event.items()
                      if k not in ("message", "elapsed") and isinstance(v, int | float | str | list)}
            console.say(str(event.get("message") or event.get("stage", "progress")), event="progress", **fields)
        else:
            print(format_progress(event), file=out, flush=True)
    return show
