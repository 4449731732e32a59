"""Reservation planner: what GPUs to order or reserve, and when (two-stage stochastic MILP).

Pipeline: :func:`load_planning` -> :func:`build_problem` -> :func:`solve` -> :class:`Plan`.
See ``docs/reservations.md``. Names are imported lazily (PEP 562), so that importing the
CLI module does not load PuLP, highspy or matplotlib.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Plan": "capplan.reserve.result",
    "PlanningFile": "capplan.reserve.model",
    "Problem": "capplan.reserve.problem",
    "SolveError": "capplan.reserve.planner",
    "SolverSettings": "capplan.reserve.solver",
    "build_problem": "capplan.reserve.problem",
    "check_plan": "capplan.reserve.check",
    "load_planning": "capplan.reserve.model",
    "parse_planning": "capplan.reserve.model",
    "solve": "capplan.reserve.planner",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'capplan.reserve' has no attribute {name!r}")
