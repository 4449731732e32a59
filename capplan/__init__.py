"""capplan: optimization-based GPU capacity planning.

The main entry points are :func:`load_scenario` (a validated, immutable :class:`Problem`),
:func:`solve` (one planner interface, many strategies; the result is checked by the independent
validator) and :func:`check_plan` (the validator itself).
"""

from capplan.catalog import Catalog, GpuModel, MigProfile, load_catalog
from capplan.errors import CapplanError, InputError, PlanValidationError
from capplan.plan import Assignment, Eviction, Migration, MigSlot, Plan, Unplaced
from capplan.planner import STRATEGIES, PlanOptions, register, solve
from capplan.problem import Cluster, Node, Problem, Workload
from capplan.scenario import dump_scenario, load_scenario, problem_from_data
from capplan.validate import assert_valid, check_plan

__version__ = "0.1.0"

__all__ = [
    "STRATEGIES", "Assignment", "CapplanError", "Catalog", "Cluster", "Eviction", "GpuModel", "InputError",
    "MigProfile", "MigSlot", "Migration", "Node", "Plan", "PlanOptions", "PlanValidationError", "Problem",
    "Unplaced", "Workload", "assert_valid", "check_plan", "dump_scenario", "load_catalog", "load_scenario",
    "problem_from_data", "register", "solve",
]
