"""capplan: optimization-based GPU capacity planning.

The main entry points are :func:`load_scenario` (a validated, immutable :class:`Problem`),
:func:`solve` (one planner interface, many strategies; the result is checked by the independent
validator), :func:`schedule` (placement in space and time over a horizon, a validated
:class:`Schedule`) and :func:`check_plan` (the validator itself). Every name is loaded on first use
(PEP 562), so ``import capplan`` loads nothing heavy (no OR-Tools, no pydantic).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from capplan.io.scenario import dump_scenario, load_scenario, problem_from_data
    from capplan.model.catalog import Catalog, GpuModel, MigProfile, load_catalog
    from capplan.model.deadline import Deadline
    from capplan.model.errors import CapplanError, InputError, PlanValidationError
    from capplan.model.plan import Assignment, Eviction, Migration, MigSlot, Plan, Unplaced
    from capplan.model.problem import Cluster, Node, Problem, Workload
    from capplan.model.schedule import Schedule
    from capplan.model.validate import assert_valid, check_plan
    from capplan.placement import PlanOptions, solve
    from capplan.placement.schedule import schedule

# Where each public name lives; loaded on first use (PEP 562), so that ``import capplan`` (and the
# start of ``python -m capplan``, where Ctrl-C must end as "interrupted") stays light.
_HOMES = {
    "capplan.io.scenario": ("dump_scenario", "load_scenario", "problem_from_data"),
    "capplan.model.catalog": ("Catalog", "GpuModel", "MigProfile", "load_catalog"),
    "capplan.model.deadline": ("Deadline",),
    "capplan.model.errors": ("CapplanError", "InputError", "PlanValidationError"),
    "capplan.model.plan": ("Assignment", "Eviction", "Migration", "MigSlot", "Plan", "Unplaced"),
    "capplan.model.problem": ("Cluster", "Node", "Problem", "Workload"),
    "capplan.model.schedule": ("Schedule",),
    "capplan.model.validate": ("assert_valid", "check_plan"),
    "capplan.placement": ("PlanOptions", "solve"),
    "capplan.placement.schedule": ("schedule",),
    "capplan.placement.strategies": ("STRATEGIES", "register"),
}
_HOME = {name: module for module, names in _HOMES.items() for name in names}

__version__ = "0.1.0"

__all__ = [
    "STRATEGIES", "Assignment", "CapplanError", "Catalog", "Cluster", "Deadline", "Eviction", "GpuModel", "InputError",
    "MigProfile", "MigSlot", "Migration", "Node", "Plan", "PlanOptions", "PlanValidationError", "Problem",
    "Schedule", "Unplaced", "Workload", "assert_valid", "check_plan", "dump_scenario", "load_catalog",
    "load_scenario", "problem_from_data", "register", "schedule", "solve",
]


def __getattr__(name: str) -> Any:
    if name in _HOME:
        value = getattr(import_module(_HOME[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'capplan' has no attribute {name!r}")
