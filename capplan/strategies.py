"""Registration of the built-in planning strategies (imported lazily by :mod:`capplan.planner`)."""

from __future__ import annotations

from capplan.cpsat.solve import plan_cpsat
from capplan.greedy import plan_greedy
from capplan.planner import register

register("greedy", plan_greedy)
register("cpsat", plan_cpsat)
