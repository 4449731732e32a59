"""Reservation planner: what GPUs to order or reserve, and when (two-stage stochastic MILP).

Pipeline: :func:`load_planning` -> :func:`build_problem` -> :func:`solve` -> :class:`Plan`.
See ``docs/reservations.md``.
"""

from capplan.reserve.check import check_plan
from capplan.reserve.milp import SolverSettings
from capplan.reserve.model import PlanningFile, load_planning, parse_planning
from capplan.reserve.planner import SolveError, solve
from capplan.reserve.problem import Problem, build_problem
from capplan.reserve.result import Plan

__all__ = ["Plan", "PlanningFile", "Problem", "SolveError", "SolverSettings", "build_problem", "check_plan",
           "load_planning", "parse_planning", "solve"]
