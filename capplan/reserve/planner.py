"""Solve a reservation problem and turn the solver's numbers into a :class:`Plan`.

The guaranteed tiers are hard constraints. When they cannot be met, the problem is solved again
with a *ranked* objective (two solves, no big-M weights): first minimise the expected unmet
guaranteed demand, then, with that optimum fixed as a constraint, minimise cost. The plan then
says where the shortfall lands and which constraints bind there (:mod:`capplan.reserve.diagnose`).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

import numpy as np

from capplan.model.errors import CapplanError
from capplan.reserve.diagnose import explain
from capplan.reserve.lshaped import solve_decomposition
from capplan.reserve.milp import BuildCut, ReservationModel
from capplan.reserve.problem import Problem, useful_share
from capplan.reserve.result import Commitment, Order, Plan, TierOutcome
from capplan.reserve.solver import TOL, RawSolution, SolverSettings

log = logging.getLogger(__name__)
log.addHandler(logging.NullHandler())


class SolveError(CapplanError):
    """The solver found no solution (time limit without an incumbent); exit code 1."""


def solve(problem: Problem, settings: SolverSettings | None = None) -> Plan:
    """Plan orders and reservations for ``problem``.

    Parameters
    ----------
    problem
        From :func:`capplan.reserve.problem.build_problem`.
    settings
        Solver settings (time limit, threads, gap, backend).

    Returns
    -------
    Plan
        ``status`` is ``ok`` when every guaranteed tier is met, else ``guaranteed_unmet``.

    Raises
    ------
    SolveError
        When no solution was found within the time limit.
    """
    s = settings or SolverSettings()
    method = choose_method(problem, s)
    raw = _first_solve(problem, s, method)
    ranked: dict[str, Any] = {}
    if (raw.status == "infeasible" and raw.method == "decomposition"
            and choose_method(problem, replace(s, method="auto")) != "extensive"):
        # too large for the ranked extensive re-solve: keep the decomposition's plan, in which
        # unmet guaranteed demand is priced far above every other cost (see docs/reservations.md)
        ranked = {"hard_status": "infeasible", "ranked_by": "price"}
        raw.status = "feasible"
    # a decomposition plan that leaves guaranteed demand unmet reports "infeasible": the ranked
    # re-solve below (extensive form) then minimises the unmet demand first, then cost.
    if raw.status == "no_solution" and not _ranked_fits(problem, s):  # cut by the limit: nothing to re-solve in
        raise SolveError(f"no solution found within {s.time_limit:g} s ({raw.method}: the time limit passed "
                         f"before a first solution; building the extensive form alone takes about "
                         f"{_rows(problem) * BUILD_SECONDS_PER_ROW:.1f} s); raise --time-limit")
    if raw.status in ("infeasible", "no_solution"):
        hard_status, hard_time = raw.status, raw.runtime_s
        try:
            soft = ReservationModel(problem, soft=True, deadline=s.deadline)
        except BuildCut as cut:
            raise SolveError(f"no solution found within {s.time_limit:g} s ({cut} for the ranked re-solve); "
                             "raise --time-limit") from None
        best = soft.rank_excess_first(replace(s.now(0.5), method="extensive"))
        if best == float("inf"):
            raise SolveError(f"no solution found within {s.time_limit:g} s; raise --time-limit")
        if hard_status == "no_solution" and best <= TOL:
            raise SolveError(
                f"no solution found within {s.time_limit:g} s although the guaranteed tiers "
                "look feasible; raise --time-limit"
            )
        raw = soft.solve(replace(s.now(), method="extensive"))
        ranked = {
            "hard_status": hard_status,
            "hard_runtime_s": round(hard_time, 3),
            "expected_unmet_guaranteed_gpus": round(best, 6),
        }
        if raw.status not in ("optimal", "feasible"):
            raise SolveError(f"ranked re-solve found no solution within {s.time_limit:g} s")
    if raw.status not in ("optimal", "feasible"):
        raise SolveError(f"no solution found within {s.time_limit:g} s; raise --time-limit")
    return build_plan(problem, raw, ranked)


#: scenario-period-class rows above which ``auto`` does not go straight to the extensive form
AUTO_DECOMPOSITION_ROWS = 2000
#: Share of the time ``auto`` gives the extensive form first above :data:`AUTO_DECOMPOSITION_ROWS`
#: (the decomposition gets the rest when the extensive form has not proven its optimum by then).
AUTO_EXTENSIVE_SHARE = 0.4
#: Building the extensive form (PuLP) costs about this many seconds per scenario-period-class row
#: (measured on benchmarks/reserve_bench.py instances: 960 rows 1.1 s, 4,800 rows 3.6 s, 9,600 rows
#: 9.1 s at load 7; half of that on a quiet machine). ``auto`` tries the extensive form only when its
#: build takes at most half of that share.
BUILD_SECONDS_PER_ROW = 1e-3


def _rows(problem: Problem) -> int:
    W, C, T = problem.demand.shape
    return int(W * C * T)


def choose_method(problem: Problem, settings: SolverSettings) -> str:
    """``extensive``, ``decomposition`` or ``both`` for ``settings.method``.

    ``auto``: the extensive form when there is one scenario or at most :data:`AUTO_DECOMPOSITION_ROWS`
    scenario-period-class rows; else ``both`` (the extensive form first, for
    :data:`AUTO_EXTENSIVE_SHARE` of the time, then the decomposition if it has not proven its optimum)
    when building the extensive form fits half of that share; else the decomposition.
    """
    if settings.method != "auto":
        return settings.method
    rows = _rows(problem)
    if problem.demand.shape[0] <= 1 or rows <= AUTO_DECOMPOSITION_ROWS:
        return "extensive"
    if rows * BUILD_SECONDS_PER_ROW <= 0.5 * AUTO_EXTENSIVE_SHARE * settings.seconds():
        return "both"
    return "decomposition"


def _first_solve(problem: Problem, s: SolverSettings, method: str) -> RawSolution:
    """The solve of the hard problem by ``method`` (``both``: see :func:`choose_method`)."""
    if method == "extensive":
        try:
            return ReservationModel(problem, deadline=s.deadline).solve(s.now())
        except BuildCut as cut:  # the limit passed while building: the decomposition gets what is left, as auto
            log.info("extensive form cut while building: %s", cut)
            return _fallback(problem, s, str(cut))
    if method == "decomposition":
        return solve_decomposition(problem, s.now())
    try:
        first = ReservationModel(problem, deadline=s.deadline).solve(s.now(AUTO_EXTENSIVE_SHARE))
    except BuildCut as cut:
        log.info("auto: extensive form cut while building: %s", cut)
        return _fallback(problem, s, str(cut))
    log.info("auto: extensive form %s in %.1f s", first.status, first.runtime_s)
    if first.status in ("optimal", "infeasible"):  # proven: the optimum, or no plan meets the guarantees
        return first
    rest = solve_decomposition(problem, s.now())
    log.info("auto: decomposition %s in %.1f s", rest.status, rest.runtime_s)
    if first.status == "feasible" and (rest.status not in ("optimal", "feasible")
                                       or _total(problem, first) < _total(problem, rest)):
        return first
    return rest


def _fallback(problem: Problem, s: SolverSettings, why: str) -> RawSolution:
    """The decomposition in what is left of the deadline after the extensive form's build was cut (``why``)."""
    raw = solve_decomposition(problem, s.now())
    raw.note = f"{why}; the decomposition solved it instead"
    return raw


def _ranked_fits(problem: Problem, s: SolverSettings) -> bool:
    """Whether the ranked re-solve (two more extensive-form solves) may be built in what is left of the deadline:
    its build alone is expected to take :data:`BUILD_SECONDS_PER_ROW` per row (without a deadline, always)."""
    return s.deadline is None or _rows(problem) * BUILD_SECONDS_PER_ROW < s.deadline.remaining()


def _total(pr: Problem, raw: RawSolution) -> float:
    """The plan's expected cost recomputed from the decisions: the two methods' objectives are not comparable
    (they leave out different constants, e.g. the power of the installed fleet)."""
    orders, commitments, _ = _decisions(pr, raw)
    return _costs(pr, raw, orders, commitments)["total"]


def build_plan(problem: Problem, raw: RawSolution, ranked: dict[str, Any] | None = None) -> Plan:
    """Assemble a :class:`Plan` from solver values; costs are recomputed from the decisions."""
    pr = problem
    orders, commitments, gang_blocks = _decisions(pr, raw)
    capacity, by_site = _capacity(pr, orders, commitments)
    tiers = _tier_outcomes(pr, raw)
    unmet = explain(pr, raw, orders, by_site) if float(raw.excess.sum()) > 1e-4 else ()
    return Plan(
        pr.name,
        "ok" if all(t.met for t in tiers) else "guaranteed_unmet",
        pr.labels,
        pr.scenario_names,
        pr.probabilities,
        _solver_stats(raw, ranked),
        orders,
        commitments,
        gang_blocks,
        capacity,
        _coverage(pr, raw),
        _costs(pr, raw, orders, commitments),
        tiers,
        unmet,
        effective_prices=effective_prices(pr),
    )


def effective_prices(pr: Problem) -> tuple[dict[str, Any], ...]:
    """Per class and each on-demand or spot option it may use: price, useful share, price per useful GPU-hour.

    ``per_useful_gpu_hour`` is the price over the useful share; ``per_useful_reference_gpu_hour`` divides
    by the class's throughput ratio on the option's model too (what the planner compares).
    """
    rows = []
    for cl in pr.classes:
        for ro in pr.recourse:
            if ro.model not in cl.ratios or (ro.kind == "spot" and not pr.tiers[cl.tier].spot):
                continue
            share = useful_share(cl, ro)
            per = ro.price_per_gpu_hour / share if share > 0 else None
            rows.append({"class": cl.name, "option": ro.name, "kind": ro.kind, "model": ro.model,
                         "price_per_gpu_hour": ro.price_per_gpu_hour, "useful_share": _r(share),
                         "per_useful_gpu_hour": None if per is None else _r(per),
                         "per_useful_reference_gpu_hour": None if per is None else _r(per / cl.ratios[ro.model])})
    return tuple(rows)


def _decisions(
    pr: Problem, raw: RawSolution
) -> tuple[tuple[Order, ...], tuple[Commitment, ...], tuple[dict[str, Any], ...]]:
    """Orders, cloud commitments and whole-gang blocks, in time order."""
    lab, T = pr.labels, pr.periods
    orders = tuple(
        Order(
            pr.purchases[o].name,
            pr.purchases[o].model,
            pr.sites[s].name,
            n,
            n // pr.purchases[o].lot_size,
            lab[q],
            lab[q + pr.purchases[o].lead_time],
            pr.purchases[o].unit_cost,
        )
        for (o, s, q), n in sorted(raw.buys.items(), key=lambda kv: (kv[0][2], kv[0][0], kv[0][1]))
    )
    commitments = tuple(
        Commitment(
            pr.commits[k].kind,
            pr.commits[k].name,
            pr.commits[k].model,
            u * pr.commits[k].unit,
            u,
            lab[q],
            lab[min(T, q + pr.commits[k].duration) - 1],
            min(pr.commits[k].duration, T - q),
        )
        for (k, q), u in sorted(raw.commits.items(), key=lambda kv: (kv[0][1], kv[0][0]))
    )
    locs = [*(x.name for x in pr.sites), "cloud"]
    gang_blocks = tuple(
        {
            "class": pr.classes[c].name,
            "location": locs[loc],
            "model": pr.models[m],
            "period": lab[p],
            "gangs": n,
            "gpus": n * pr.classes[c].gang_size,
        }
        for (c, loc, m, p), n in sorted(raw.gangs.items())
    )
    return orders, commitments, gang_blocks


def _capacity(
    pr: Problem, orders: tuple[Order, ...], commitments: tuple[Commitment, ...]
) -> tuple[tuple[dict[str, Any], ...], dict[tuple[int, str, int], int]]:
    """Capacity rows per model and period, and own GPUs per (site, model, period), from the decisions."""
    lab, T = pr.labels, pr.periods
    by_site = {
        (s, m, p): pr.base_count(s, m, p) for s in range(len(pr.sites)) for m in pr.models for p in range(T)
    }
    for od in orders:
        si = [x.name for x in pr.sites].index(od.site)
        for p in range(lab.index(od.arrival_period), T):
            by_site[si, od.model, p] += od.count
    cloud = {(m, p): 0 for m in pr.models for p in range(T)}
    for cm in commitments:
        q = lab.index(cm.start_period)
        for p in range(q, q + cm.periods):
            cloud[cm.model, p] += cm.gpus
    capacity = tuple(
        {
            "model": m,
            "period": lab[p],
            "own": sum(by_site[s, m, p] for s in range(len(pr.sites))),
            "cloud": cloud[m, p],
            "by_site": {x.name: by_site[s, m, p] for s, x in enumerate(pr.sites)},
        }
        for m in pr.models
        for p in range(T)
    )
    return capacity, by_site


def _coverage(pr: Problem, raw: RawSolution) -> tuple[dict[str, Any], ...]:
    """One row per scenario, class and period: demand, served, use by model and option, slack."""
    rows: list[dict[str, Any]] = []
    short = raw.short + raw.excess
    for w, sn in enumerate(pr.scenario_names):
        for c, cl in enumerate(pr.classes):
            for p in range(pr.periods):
                committed = {
                    pr.models[m]: _r(raw.alloc[w, c, m, p])
                    for m in range(len(pr.models))
                    if raw.alloc[w, c, m, p] > TOL
                }
                rec = {
                    pr.recourse[o].name: _r(raw.rec[w, c, o, p])
                    for o in range(len(pr.recourse))
                    if raw.rec[w, c, o, p] > TOL
                }
                prev = raw.backlog[w, c, p - 1] if p else 0.0
                d = float(pr.demand[w, c, p])
                served = d + prev - short[w, c, p] - raw.lost[w, c, p] - raw.backlog[w, c, p]
                rows.append(
                    {
                        "scenario": sn,
                        "class": cl.name,
                        "tier": pr.tiers[cl.tier].name,
                        "period": pr.labels[p],
                        "demand": _r(d),
                        "served": _r(served),
                        "committed": committed,
                        "recourse": rec,
                        "shortfall": _r(short[w, c, p]),
                        "lost": _r(raw.lost[w, c, p]),
                        "backlog": _r(raw.backlog[w, c, p]),
                    }
                )
    return tuple(rows)


def _costs(
    pr: Problem, raw: RawSolution, orders: tuple[Order, ...], commitments: tuple[Commitment, ...]
) -> dict[str, float]:
    """Expected cost per category and ``total``, recomputed from the plan."""
    lab, T, H = pr.labels, pr.periods, pr.hours
    prob = np.array(pr.probabilities)
    energy = {x.name: x.energy_cost_per_w for x in pr.sites}
    option = {po.name: po for po in pr.purchases}
    capex = sum(
        od.count * od.unit_cost / option[od.option].depreciation_periods
        * min(option[od.option].depreciation_periods, T - lab.index(od.arrival_period))
        for od in orders
    )
    power: float = sum(
        i.count * i.power_w * pr.sites[i.site].energy_cost_per_w * (i.end - i.start) for i in pr.installed
    )
    power += sum(
        od.count * option[od.option].power_w * energy[od.site] * (T - lab.index(od.arrival_period)) for od in orders
    )
    commit_cost = {"reserved": 0.0, "calendar": 0.0}
    for cm in commitments:
        kd = next(co for co in pr.commits if co.name == cm.option)
        commit_cost[cm.kind] += cm.gpus * kd.price_per_gpu_hour * H * cm.periods
    rec_cost = {"on_demand": 0.0, "spot": 0.0}
    for o, ro in enumerate(pr.recourse):
        rec_cost[ro.kind] += float(prob @ raw.rec[:, :, o, :].sum(axis=(1, 2))) * ro.price_per_gpu_hour * H
    pen = {"guaranteed": 0.0, "lost": 0.0, "deferral": 0.0}
    for c, cl in enumerate(pr.classes):
        t = pr.tiers[cl.tier]
        pen["guaranteed"] += float(prob @ raw.short[:, c, :].sum(axis=1)) * t.penalty_per_gpu_hour * H
        pen["lost"] += float(prob @ raw.lost[:, c, :].sum(axis=1)) * t.penalty_per_gpu_hour * H
        pen["deferral"] += float(prob @ raw.backlog[:, c, :].sum(axis=1)) * t.deferral_penalty_per_gpu_hour * H
    costs = {
        "capex_depreciation": capex,
        "power": power,
        "cloud_reserved": commit_cost["reserved"],
        "cloud_calendar": commit_cost["calendar"],
        "cloud_on_demand": rec_cost["on_demand"],
        "cloud_spot": rec_cost["spot"],
        "penalty_guaranteed_shortfall": pen["guaranteed"],
        "penalty_flexible_lost": pen["lost"],
        "penalty_deferral": pen["deferral"],
    }
    total = sum(costs.values())  # of the exact parts: the sum of rounded parts was up to a cent off per part
    costs = {k: round(v, 2) for k, v in costs.items()}
    costs["total"] = round(total, 2)
    return costs


def _tier_outcomes(pr: Problem, raw: RawSolution) -> tuple[TierOutcome, ...]:
    """Shortfall probability and size per tier; whether each guaranteed tier is met."""
    prob = np.array(pr.probabilities)
    W = len(pr.scenario_names)
    short = raw.short + raw.excess
    out: list[TierOutcome] = []
    for k, t in enumerate(pr.tiers):
        cs = [c for c, cl in enumerate(pr.classes) if cl.tier == k]
        miss = (short[:, cs, :] + raw.lost[:, cs, :]).sum(axis=(1, 2)) * pr.hours if cs else np.zeros(W)
        p_short = float(prob[miss > 1e-4].sum())
        worst = int(np.argmax(miss)) if W else 0
        met = t.kind != "guaranteed" or (
            p_short <= 1 - t.service_level + 1e-9 and float(raw.excess[:, cs, :].sum()) <= 1e-4
        )
        out.append(
            TierOutcome(
                t.name,
                t.kind,
                t.service_level,
                round(p_short, 9),
                _r(float(prob @ miss)),
                _r(float(miss[worst])) if W else 0.0,
                pr.scenario_names[worst] if W and miss[worst] > 1e-4 else None,
                met,
            )
        )
    return tuple(out)


def _solver_stats(raw: RawSolution, ranked: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "backend": raw.backend,
        "status": raw.status,
        "runtime_s": round(raw.runtime_s, 3),
        "objective": _r(raw.objective),
        "variables": raw.variables,
        "constraints": raw.constraints,
        "integer_variables": raw.integers,
        "method": raw.method,
        "bound": None if raw.bound is None else _r(raw.bound),
        "gap": None if raw.gap is None else round(raw.gap, 9),
        "iterations": raw.iterations,
        **({"note": raw.note} if raw.note else {}),
        **(ranked or {}),
    }


def _r(x: float) -> float:
    return round(float(x), 6) + 0.0
