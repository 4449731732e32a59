"""The exact time model: list scheduling's schedule as a hint, CP-SAT stages, decoded and compared.

:mod:`capplan.placement.schedule.timemodel.model` holds the model (its relaxations in
:mod:`capplan.placement.schedule.timemodel.relax`); :mod:`capplan.placement.schedule.jobs` turns a problem
into its jobs and decodes a solution; this module keeps the better of the CP-SAT and list-scheduling
schedules and turns the stage bounds into the schedule's bound.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict

from capplan.model.deadline import Deadline
from capplan.model.problem import Problem
from capplan.model.schedule import Schedule
from capplan.model.timing import ceil_to
from capplan.model.units import UNITS_PER_GPU
from capplan.placement.core.fleet import kind_demands, node_kinds
from capplan.placement.schedule.heuristic import Outcome, best_list_schedule, compact, diagnose, fill
from capplan.placement.schedule.jobs import Jobs, job_busy, model_inputs, partial_nodes
from capplan.placement.schedule.result import energy_bound, lex_key, make_schedule
from capplan.placement.schedule.sweep import sweep_schedule
from capplan.placement.schedule.timemodel.data import TimeSolution
from capplan.placement.schedule.timemodel.model import TimeModel
from capplan.placement.schedule.timemodel.relax import EnergyItem, EnergyRelaxation, pooled
from capplan.placement.schedule.timemodel.split import pooled_gains, split_all
from capplan.placement.schedule.window import improve

__all__ = ["Jobs", "combined_bound", "job_busy", "model_inputs", "partial_nodes", "relaxation", "schedule_cpsat",
           "unsupported"]

#: Share of the time limit for list scheduling in several orders (the hint).
HINT_SHARE = 0.25
#: The same before a neighbourhood search, which gains more from the time than further orders do.
LNS_HINT_SHARE = 0.1
#: At time-order-sweep scale, the most of the time limit the sweep (the hint) may take: it runs to the horizon
#: unless the limit is short for the problem's size; what follows keeps :data:`POST_SHARE`.
SWEEP_HINT_SHARE = 0.65
#: Share of the time limit for the pooled relaxation (its stage bounds tighten the bound).
RELAXED_SHARE = 0.15
#: The same before a neighbourhood search: on the benchmark's 200-workload fleets (seeds 1-6, and ``small-mig``
#: 1-3) the pooled relaxation tightened no bound beyond the energy bounds, and where it proves its stages it
#: does so in 0.3-5 s; the search gains more from the rest.
LNS_RELAXED_SHARE = 0.05
#: Share of the time limit (at most 10 s) for the energy relaxation's bound (:func:`relaxation`).
BOUND_SHARE = 0.05
#: Share of the time left given to the rack split (one worker: it did better than two on a loaded machine)
#: when the pooled relaxation runs all the work (:mod:`.split`).
SPLIT_SHARE = 0.6
#: Share of the time limit kept, at time-order-sweep scale, for the reasons and the validator after the search.
POST_SHARE = 0.35
#: Below that scale, the time kept after the search for its compaction, the reasons and the validator, as a
#: share of the wall time list scheduling took (compaction is one list-scheduling pass; measured on the
#: benchmark's 200-workload fleets: list scheduling 4.4 s, then compaction 2.2 s and the reasons 0.5 s).
POST_OF_HINT = 0.7
#: The least wall time the pooled relaxation and the full time model get when the nominal budget (the user's
#: limit, load-independent) leaves them time but a loaded machine took the wall clock first: whether they run
#: then does not depend on the load (a bounded overrun instead of another schedule for the same seed).
MODEL_FLOOR_SECONDS = 0.3
#: Above this many optional intervals (jobs x candidate nodes), the full time model is replaced by
#: large-neighbourhood search over time windows and domains.
FULL_MODEL_INTERVALS = 3000


def unsupported(p: Problem) -> str | None:
    """Why the time model cannot take ``p`` exactly, or None.

    Declined: a MIG workload whose slice is worth different shares of a GPU on the models it may use
    (the work and wait then depend on the node, which the model's linear objective does not express).
    Preset GPU modes (``gpu_modes``, ``mig_strategy: single``) are taken (see
    :func:`capplan.placement.schedule.jobs.gpu_presets`).
    """
    kinds = node_kinds(p)
    for w in p.workloads:
        if w.mig is not None:
            units = sorted({d.units for d, _ in kind_demands(p, w, kinds)})
            if len(units) > 1:
                worth = " or ".join(f"{u / UNITS_PER_GPU:g}" for u in units)
                return (f"workload {w.name}: its MIG slice is worth {worth} GPUs depending on the GPU model; the "
                        "time model needs one value per workload (restrict gpu_models)")
    return None


def capacity_rate(p: Problem) -> int:
    """Most demand units the cluster can run at one instant: every GPU, less what power budgets forbid.

    Nodes are grouped by their outermost domain with a budget; such a group runs at most
    ``budget // (smallest TDP)`` GPUs at once (a GPU in use draws its TDP).
    """
    cl = p.cluster
    budgets = {(d.level, d.name): d.power_w for d in cl.domains if d.power_w is not None}
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    free = 0
    for n in cl.nodes:
        key = next(((lvl, dom) for lvl, dom in zip(cl.levels[:-1], n.path, strict=False)
                    if (lvl, dom) in budgets), None)
        model = p.gpu_model(n)
        if key is None or model is None or not model.tdp_w:
            free += n.gpus
        else:
            groups[key] += [model.tdp_w] * n.gpus
    for key, tdps in groups.items():
        budget = budgets[key]
        assert budget is not None
        free += min(len(tdps), budget // min(tdps))
    return free * UNITS_PER_GPU


def relaxation(p: Problem, horizon: int, step: int, points: int | None = None) -> EnergyRelaxation:
    """The energy relaxation of ``p``: a gang is one item, every other replica one item."""
    running = {a.key for a in p.running}
    ends = {(e.workload, e.replica): e.ends_in for e in p.ends_in}
    cl = p.cluster
    items: list[EnergyItem] = []
    kinds = node_kinds(p)
    for w in p.workloads:
        todo = [r for r in range(w.replicas) if (w.name, r) not in running]
        rates = [d.units for d, _ in kind_demands(p, w, kinds)]
        if not todo or not rates:
            continue
        earliest = ceil_to(w.release, step)
        limit = min(w.deadline if w.deadline is not None else horizon, horizon)
        last = (limit - w.duration) if w.duration is not None else horizon - 1
        latest = last // step * step
        if latest < earliest:
            continue
        most = max(rates) * (w.duration if w.duration is not None else horizon - earliest)
        for g in [todo] if w.is_gang else [[r] for r in todo]:
            items.append(EnergyItem(priority=w.priority, earliest=earliest, latest=latest, duration=w.duration,
                                    rate=min(rates) * len(g), work=most * len(g)))
    fixed = []
    for a in p.running:
        d = p.demand_on(p.workload(a.workload), cl.nodes[cl.node_index[a.node]])
        if d is not None and d.units:
            fixed.append((d.units, min(ends.get(a.key, horizon), horizon)))
    if points is None:  # windows from at most this many starts and ends: about 5e6 item-window terms
        points = max(24, min(300, int((5e6 / max(1, len(items))) ** 0.5)))
    return EnergyRelaxation(items, fixed, capacity_rate(p), horizon, points)


def combined_bound(p: Problem, horizon: int, step: int, *sols: TimeSolution | None,
                   relax: EnergyRelaxation | None = None, relax_time: float = 0.0, seed: int = 0) -> dict[int, int]:
    """Per-priority bound: the energy bound, tightened level by level by the CP-SAT stage bounds that hold.

    A stage's bound holds given the earlier stages at least at the values that model reached. So
    a level's stage bound is used only while every higher level's bound, as finally chosen, is at
    least that model's value there (then every schedule that reaches the chosen bounds above is one
    the stage covered). A model with a guaranteed stage conditions on every guaranteed job on
    time; its stages are used only when that stage is proven and met.
    """
    running = {a.key for a in p.running}
    needed = sum(1 for w in p.workloads if w.sla == "guaranteed" for r in range(w.replicas)
                 if (w.name, r) not in running)
    fixed = _running_work(p, horizon)
    usable: list[dict[str, tuple[int, float]]] = []
    for sol in sols:
        if sol is None:
            continue
        stages = {name: (value, bound) for name, value, bound, _ in sol.stages}
        g = next((x for x in sol.stages if x[0] == "guaranteed"), None)
        if g is not None and (g[3] != "optimal" or g[1] < needed):
            continue
        usable.append(stages)
    caps: dict[int, int] = {}
    out = energy_bound(p, horizon, step)
    for i, q in enumerate(p.priorities):
        for stages in usable:
            key = f"priority {q}"
            if key not in stages or not math.isfinite(stages[key][1]):
                continue
            if all(out[h] >= stages[f"priority {h}"][0] + fixed[h] for h in p.priorities[:i]
                   if f"priority {h}" in stages):
                caps[q] = min(caps.get(q, out[q]), int(stages[key][1] + 1e-6) + fixed[q])
        if relax is not None and relax_time > 0:
            floors = {h: max(0, out[h] - fixed[h]) for h in p.priorities[:i]}
            got = relax.level(q, floors, relax_time / len(p.priorities), seed)
            if got is not None:
                caps[q] = min(caps.get(q, out[q]), got + fixed[q])
        out = energy_bound(p, horizon, step, caps)
    return out


def _running_work(p: Problem, horizon: int) -> dict[int, int]:
    ends = {(e.workload, e.replica): e.ends_in for e in p.ends_in}
    out: dict[int, int] = defaultdict(int)
    cl = p.cluster
    for a in p.running:
        w = p.workload(a.workload)
        d = p.demand_on(w, cl.nodes[cl.node_index[a.node]])
        if d is not None:
            out[w.priority] += d.units * min(ends.get(a.key, horizon), horizon)
    return out


def schedule_cpsat(p: Problem, horizon: int, step: int, time_limit: Deadline | float, seed: int = 0,
                   workers: int = 1, lns: bool | None = None) -> Schedule:
    """CP-SAT over the jobs of ``p``, hinted by list scheduling; the better schedule of the two.

    Up to :data:`FULL_MODEL_INTERVALS` optional intervals the full time model is solved; above, a
    large-neighbourhood search over time windows and domains
    (:func:`capplan.placement.schedule.window.improve`) re-solves parts of list scheduling's schedule
    (``lns``: force one or the other).
    """
    from capplan.placement.schedule.strategies import use_sweep

    t0 = time.perf_counter()
    deadline = Deadline.coerce(time_limit)
    time_limit = deadline.remaining()  # the named shares below (HINT_SHARE, BOUND_SHARE, ...) are of this
    jobs = Jobs(p, horizon, step)
    caps, budgets, busy = model_inputs(p, horizon)
    if lns is None:
        lns = jobs.size(caps) > FULL_MODEL_INTERVALS
    known: Outcome | None = None
    if use_sweep(p, deadline.budget):
        known = sweep_schedule(p, horizon, step, deadline.share(SWEEP_HINT_SHARE))
        heuristic, order = known.items, "time-order sweep"
    else:
        heuristic, order = best_list_schedule(p, horizon, step, (LNS_HINT_SHARE if lns else HINT_SHARE) * time_limit)
    hint_seconds = time.perf_counter() - t0
    sol: TimeSolution | None = None
    items = heuristic
    strategy = "heuristic"
    left = time_limit - (time.perf_counter() - t0)
    relaxed: TimeSolution | None = None
    # the gates below and the floors of what they give read the nominal budget too, so that a load spike
    # (the wall clock gone before the step) does not drop a step that the same seed runs on a quiet machine
    nominal = deadline.budget
    share = LNS_RELAXED_SHARE if lns else RELAXED_SHARE
    if jobs.jobs and (left > 0.1 or nominal * (1 - HINT_SHARE) > 0.1) and known is None:
        # at sweep scale the pooled model proves nothing in time
        relaxed = pooled(jobs.jobs, busy, caps, horizon, step, gpus=[capacity_rate(p) // UNITS_PER_GPU]).solve(
            None, max(share * left, min(share * nominal, MODEL_FLOOR_SECONDS)), seed, workers)
    relax = relaxation(p, horizon, step)
    relax_time = min(BOUND_SHARE * time_limit, 10.0)
    bound: dict[int, int] | None = None
    if lns:  # the bound does not depend on the search's schedule: take it first, in the time it needs
        bound = combined_bound(p, horizon, step, relaxed, relax=relax, relax_time=relax_time, seed=seed)
    left = time_limit - (time.perf_counter() - t0)
    extra: dict[str, object] = {}
    model_nominal = nominal * (1 - HINT_SHARE - RELAXED_SHARE - BOUND_SHARE)
    if jobs.jobs and (left - relax_time > 0.1 or model_nominal > 0.1) and not lns:
        tm = TimeModel(jobs.jobs, busy, caps, budgets, horizon, step, quota=jobs.quota)
        sol = tm.solve(jobs.hint(heuristic), max(left - relax_time, min(model_nominal, MODEL_FLOOR_SECONDS)),
                       seed, workers)
        if sol is not None:
            cand = jobs.decode(sol)
            strategy = "cpsat"
            if lex_key(p, cand, step) >= lex_key(p, items, step):
                items = cand
            else:
                strategy = "cpsat+heuristic"
    elif jobs.jobs and lns and jobs.quota is not None:
        extra["cpsat_declined"] = ("ClusterQueue quotas: the neighbourhood search over time windows does not model "
                                   "them; list scheduling's schedule is kept")
    elif jobs.jobs and left > 0.1 and lns:
        # keep time for what follows the search: reasons and the validator take seconds on thousands of
        # replicas; below that scale, compaction (one list-scheduling pass) and the reasons
        left -= POST_SHARE * time_limit if known is not None else min(POST_SHARE * time_limit,
                                                                       POST_OF_HINT * hint_seconds)
        if known is None and relaxed is not None and pooled_gains(jobs, relaxed, items):
            # the pooled relaxation runs more work than list scheduling: try to run its jobs on the cluster
            began = time.perf_counter()
            split = split_all(p, jobs, (caps, budgets, busy), SPLIT_SHARE * left, seed, 1, relaxed.starts)
            if split is not None and lex_key(p, split, step) > lex_key(p, items, step):
                items = split
            left -= time.perf_counter() - began
            extra["split"] = split is not None
        items, more = improve(p, jobs, items, horizon, step, left, seed, workers, (caps, budgets, busy), bound)
        extra.update(more)
        strategy = "cpsat-lns"
        if known is None:  # the search's windows may leave work that could start earlier
            moved = compact(p, horizon, step, items)
            if lex_key(p, moved, step) > lex_key(p, items, step):
                items = moved
    proven = sol is not None and sol.proven() and items is not heuristic
    if known is None and not proven:  # a search or an unproven model may leave room a replica fits in
        filled = fill(p, horizon, step, items)
        if lex_key(p, filled, step) > lex_key(p, items, step):
            items = filled
    diag = diagnose(p, horizon, step, items, known)
    exact = sol if sol is not None and sol.exact else None  # a stricter model's stage bounds prove nothing
    if bound is None:
        bound = combined_bound(p, horizon, step, exact, relaxed, relax=relax, relax_time=relax_time, seed=seed)
    return make_schedule(p, strategy, items, diag.unscheduled, horizon=horizon, step=step,
                         reasons=diag.reasons, bound=bound, proven_optimal=proven,
                         seconds=time.perf_counter() - t0, seed=seed,
                         extra_metrics={"order": order, "stages": [list(s) for s in sol.stages] if sol else [],
                                        "pooled_stages": [list(s) for s in relaxed.stages] if relaxed else [],
                                        **({"model_exact": sol.exact} if sol is not None else {}), **extra})
