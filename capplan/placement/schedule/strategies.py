"""The schedule strategy table: every built-in schedule strategy by name, what it supports, and ``auto``.

As for placement (:mod:`capplan.placement.strategies`), this is the one module that imports every
schedule strategy (each on first use, so the table loads no OR-Tools). A strategy runs on a problem,
its time grid and the run's :class:`~capplan.placement.core.options.PlanOptions` (whose deadline it
keeps) and returns a schedule not yet validated; :func:`capplan.placement.schedule.schedule`
validates it. ``auto`` runs the first strategy of :data:`AUTO_ORDER` that supports the problem.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from capplan.model.problem import Problem
from capplan.model.schedule import Schedule
from capplan.model.timing import ScheduleSpec
from capplan.placement.core.options import PlanOptions

#: From this many replicas ``heuristic`` uses the linear time-order sweep instead of earliest-start search.
SWEEP_FROM_REPLICAS = 2000
#: One earliest-start list-scheduling pass costs about this many seconds x replicas^2 (its windows grow with the
#: work running at once): 12.7 s for 1,761 replicas of schedule_bench's `medium` size (one core, quiet).
LIST_SECONDS_PER_REPLICA2 = 4.1e-6
#: The sweep also replaces that pass when one pass is expected to take more than this share of the run's
#: nominal budget (it cannot be cut short: the limit would not hold).
LIST_PASS_MAX_SHARE = 0.5


def use_sweep(p: Problem, budget: float) -> bool:
    """Whether the time-order sweep builds the first schedule instead of earliest-start list scheduling: from
    :data:`SWEEP_FROM_REPLICAS` replicas, or when one list pass would take more than
    :data:`LIST_PASS_MAX_SHARE` of ``budget`` (nominal seconds, so the choice does not depend on the load)."""
    replicas = sum(w.replicas for w in p.workloads)
    return replicas >= SWEEP_FROM_REPLICAS or LIST_SECONDS_PER_REPLICA2 * replicas ** 2 > LIST_PASS_MAX_SHARE * budget


#: The time model's per-replica work before its search (jobs, node capacities, the relaxations and the bound)
#: costs about this many seconds per replica (schedule_bench and limits_bench's ``cpureplicas100k``: 2.5-7 s
#: per 100,000 replicas, quiet to load 8): past :data:`MODEL_BUILD_MAX_SHARE` of the run's nominal budget the
#: time model is not built and the time-order sweep's schedule is returned (``metrics.cpsat_declined``).
MODEL_SECONDS_PER_REPLICA = 5e-5
MODEL_BUILD_MAX_SHARE = 0.5


def too_large_for_model(p: Problem, budget: float) -> str | None:
    """Why the time model is not built for ``p`` within ``budget`` nominal seconds, or None."""
    replicas = sum(w.replicas for w in p.workloads)
    need = MODEL_SECONDS_PER_REPLICA * replicas
    if need <= MODEL_BUILD_MAX_SHARE * budget:
        return None
    return (f"{replicas:,} replicas: building the time model (one job per replica) takes about {need:.0f} s, more "
            f"than {MODEL_BUILD_MAX_SHARE:.0%} of the {budget:.3g} s the limit leaves for scheduling; the time-order "
            f"sweep's schedule is kept (a limit of about {need / MODEL_BUILD_MAX_SHARE:.0f} s or more for what is "
            "left uses the time model)")


def _cpsat_declines(p: Problem) -> str | None:
    from capplan.placement.schedule.exact import unsupported

    return unsupported(p)


def _run_cpsat(p: Problem, spec: ScheduleSpec, options: PlanOptions) -> Schedule:
    from capplan.placement.schedule.exact import schedule_cpsat

    why = _cpsat_declines(p) or too_large_for_model(p, options.clock().budget)
    if why is not None:  # asked for by name on a problem it does not take: list scheduling, saying why
        result = _run_heuristic(p, spec, options)
        return result.model_copy(update={"metrics": dict(result.metrics, cpsat_declined=why)})
    return schedule_cpsat(p, spec.horizon, spec.step, options.clock(), options.seed, options.workers)


def _run_heuristic(p: Problem, spec: ScheduleSpec, options: PlanOptions) -> Schedule:
    """Earliest-start list scheduling, or the time-order sweep where :func:`use_sweep` says so."""
    if not use_sweep(p, options.clock().budget):
        from capplan.placement.schedule.heuristic import schedule_heuristic

        return schedule_heuristic(p, spec.horizon, spec.step, options.seed, options.clock())
    from capplan.placement.schedule.sweep import schedule_sweep

    return schedule_sweep(p, spec.horizon, spec.step, options.seed, options.clock())


def _always(p: Problem) -> str | None:
    return None


@dataclass(frozen=True)
class ScheduleStrategy:
    """One entry of the table: how to run the strategy and which problems it takes.

    Attributes
    ----------
    run
        ``run(problem, spec, options) -> Schedule`` (not yet validated), within ``options.clock()``.
    declines
        Why the strategy cannot take a problem exactly, or None (:meth:`supports`).
    """

    run: Callable[[Problem, ScheduleSpec, PlanOptions], Schedule]
    declines: Callable[[Problem], str | None] = _always

    def supports(self, p: Problem) -> bool:
        """Whether the strategy takes ``p`` (``auto`` runs the first of :data:`AUTO_ORDER` that does)."""
        return self.declines(p) is None


SCHEDULE_TABLE: dict[str, ScheduleStrategy] = {
    # the time model when it covers the problem (the full model when small, a neighbourhood search over time
    # windows and domains from list scheduling's schedule when large)
    "cpsat": ScheduleStrategy(_run_cpsat, _cpsat_declines),
    "heuristic": ScheduleStrategy(_run_heuristic),
}
#: The order in which ``auto`` asks the table's entries.
AUTO_ORDER = ("cpsat", "heuristic")


def choose_schedule_strategy(p: Problem) -> str:
    """What ``auto`` runs on ``p``: the first entry of :data:`AUTO_ORDER` in the table that supports it."""
    return next(name for name in AUTO_ORDER if name in SCHEDULE_TABLE and SCHEDULE_TABLE[name].supports(p))
