"""capplan: optimization-based GPU capacity planning.

The main entry points are :func:`load_scenario` (a validated, immutable :class:`Problem`),
:func:`solve` (one planner interface, many strategies; the result is checked by the independent
validator), :func:`schedule` (placement in space and time over a horizon, a validated
:class:`Schedule`) and :func:`check_plan` (the validator itself). ``STRATEGIES`` and ``register`` are
loaded on first use (PEP 562), so ``import capplan`` does not load OR-Tools.
"""

from __future__ import annotations

from typing import Any

from capplan.io.scenario import dump_scenario, load_scenario, problem_from_data
from capplan.model.catalog import Catalog, GpuModel, MigProfile, load_catalog
from capplan.model.errors import CapplanError, InputError, PlanValidationError
from capplan.model.plan import Assignment, Eviction, Migration, MigSlot, Plan, Unplaced
from capplan.model.problem import Cluster, Node, Problem, Workload
from capplan.model.schedule import Schedule
from capplan.model.validate import assert_valid, check_plan
from capplan.placement import PlanOptions, solve
from capplan.placement.schedule import schedule

__version__ = "0.1.0"

__all__ = [
    "STRATEGIES", "Assignment", "CapplanError", "Catalog", "Cluster", "Eviction", "GpuModel", "InputError",
    "MigProfile", "MigSlot", "Migration", "Node", "Plan", "PlanOptions", "PlanValidationError", "Problem",
    "Schedule", "Unplaced", "Workload", "assert_valid", "check_plan", "dump_scenario", "load_catalog",
    "load_scenario", "problem_from_data", "register", "schedule", "solve",
]


def __getattr__(name: str) -> Any:
    if name in ("STRATEGIES", "register"):
        from capplan.placement import strategies

        return getattr(strategies, name)
    raise AttributeError(f"module 'capplan' has no attribute {name!r}")
