"""capplan's exact placement engine: an aggregated OR-Tools CP-SAT model (strategy ``cpsat``).

Only modules of this subpackage import OR-Tools. Entry points: :func:`capplan.placement.cpsat.solve.plan_cpsat`
and :func:`capplan.placement.cpsat.explain.explain_workload`. See ``docs/placement-model.md``.
"""
