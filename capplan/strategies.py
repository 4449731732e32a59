"""Registration of the built-in planning strategies (imported lazily by :mod:`capplan.planner`)."""

from __future__ import annotations

from capplan.cpsat.solve import plan_cpsat
from capplan.decompose import plan_decompose
from capplan.greedy import plan_greedy
from capplan.heuristics.run import plan_heuristic
from capplan.lns import plan_lns
from capplan.patterns import plan_patterns
from capplan.planner import register

register("greedy", plan_greedy)
register("cpsat", plan_cpsat)
register("heuristic", plan_heuristic)
register("lns", plan_lns)
register("decompose", plan_decompose)
register("patterns", plan_patterns)
