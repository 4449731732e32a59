"""The two-stage stochastic MILP, built and solved with PuLP + HiGHS (the only PuLP module).

First stage (one value for all scenarios, i.e. non-anticipative): purchase lots per option,
site and order period; reserved-term and calendar-block starts; whole-gang blocks per class,
location and model. Second stage (per scenario and period): allocation of committed capacity
to classes, on-demand and spot use, guaranteed shortfall, flexible deferral and loss.
See ``docs/reservations.md`` for the formulation.
"""

from __future__ import annotations

import time

import numpy as np
import numpy.typing as npt
import pulp

from capplan.lp.highs import new_highs, running
from capplan.lp.program import LinearProgram
from capplan.model.deadline import Deadline
from capplan.reserve.problem import Problem, useful_share
from capplan.reserve.readback import program, read_solution
from capplan.reserve.solver import TOL, RawSolution, SolverSettings

#: Reading a solved extensive form back from HiGHS into PuLP and the raw arrays costs about this many seconds
#: per scenario-period-class row (benchmarks/reserve_bench.py at 50 scenarios, 4,800 rows: 0.5-1.2 s, quiet to
#: load 6): the HiGHS time limit is cut by it, so that the solve with its read-back ends by the deadline.
READBACK_SECONDS_PER_ROW = 2.5e-4
#: HiGHS's ``primal_solution_status`` of a feasible point
_FEASIBLE_POINT = 2
#: The least HiGHS time limit (s) when the deadline has (nearly) passed: it returns what it has at once.
MIN_HIGHS_SECONDS = 0.01


class BuildCut(Exception):
    """The deadline passed while the extensive form was being built (nothing was solved)."""

Arr = npt.NDArray[np.float64]


class _SilentHiGHS(pulp.HiGHS):  # type: ignore[misc]
    """PuLP's HiGHS interface on a HiGHS instance that never prints (``new_highs``): PuLP's own
    creates a plain ``highspy.Highs``, whose banner would reach the host's stdout."""

    #: ``time.perf_counter()`` value by which the solve and the read-back must be done (None: ``timeLimit`` only)
    end: float | None = None
    #: seconds kept after the solve for reading the solution back
    readback: float = 0.0

    def callSolver(self, lp: pulp.LpProblem) -> None:
        """Run HiGHS with the time left now: passing the model to HiGHS (PuLP, row by row) took part of the
        budget, and the read-back needs the rest (:data:`READBACK_SECONDS_PER_ROW`)."""
        h = lp.solverModel
        if self.end is not None:
            stop = self.end - self.readback
            left = stop - time.perf_counter()
            h.setOptionValue("time_limit", max(MIN_HIGHS_SECONDS, min(float(self.timeLimit), left)))

            def interrupt(e: object) -> None:  # HiGHS's own time limit is not always honoured in time (MIP, load)
                if time.perf_counter() > stop:
                    e.interrupt()  # type: ignore[attr-defined]

            h.cbMipInterrupt += interrupt
            h.cbSimplexInterrupt += interrupt
            h.cbIpmInterrupt += interrupt
        h.run()

    def findSolutionValues(self, lp: pulp.LpProblem) -> tuple[int, int]:
        """PuLP's reading, except that a solve stopped (time limit, interrupt) without a feasible point is
        "not solved" (PuLP reads an interrupted solve as feasible whatever it has)."""
        status: tuple[int, int] = super().findSolutionValues(lp)
        h = lp.solverModel
        stopped = getattr(h.getModelStatus(), "name", "") in ("kInterrupt", "kTimeLimit")  # (highspy's enum)
        if stopped and h.getInfo().primal_solution_status != _FEASIBLE_POINT:
            return pulp.LpStatusNotSolved, pulp.LpSolutionNoSolutionFound
        return status

    def createAndConfigureSolver(self, lp: pulp.LpProblem) -> None:
        lp.solverModel = h = new_highs()
        if self.gapRel is not None:
            h.setOptionValue("mip_rel_gap", self.gapRel)
        if self.threads is not None:
            h.setOptionValue("threads", self.threads)
        if self.timeLimit is not None:
            h.setOptionValue("time_limit", float(self.timeLimit))
        for key, value in self.optionsDict.items():
            h.setOptionValue(key, value)


def make_solver(s: SolverSettings) -> pulp.LpSolver:
    """Return the PuLP solver for ``s``: HiGHS through highspy, or CBC as a fallback."""
    if s.backend == "highs" and pulp.HiGHS(msg=False).available():
        return _SilentHiGHS(msg=False, timeLimit=s.time_limit, threads=s.threads, gapRel=s.gap, random_seed=0)
    return pulp.PULP_CBC_CMD(
        msg=False, timeLimit=max(1, round(s.time_limit)), threads=s.threads, gapRel=s.gap
    )


def _n(*parts: object) -> str:
    return "_".join(str(p) for p in parts)


class ReservationModel:
    """The MILP of one :class:`Problem`.

    Parameters
    ----------
    problem
        The indexed problem.
    soft
        When true, guaranteed demand may go unmet through named ``excess`` slack variables
        (used to explain an infeasible guaranteed tier with a ranked, two-solve objective).
    first_stage_only
        Build only the first stage (orders, commitments, gang blocks, capacity, chance
        indicators and their constraints): the master problem of the decomposition
        (:mod:`capplan.reserve.benders`), exported with :meth:`export`.
    deadline
        Optional: checked after each scenario's block; when it passes, the build stops with
        :class:`BuildCut` (the caller falls back or reports no solution).
    """

    def __init__(self, problem: Problem, soft: bool = False, first_stage_only: bool = False,
                 deadline: Deadline | None = None) -> None:
        self.p = problem
        self.soft = soft
        self.first_stage_only = first_stage_only
        self.deadline = deadline
        self.lp = pulp.LpProblem(_n("reserve", problem.name or "plan").replace(" ", "_"), pulp.LpMinimize)
        self.cost_terms: list[tuple[pulp.LpVariable, float]] = []
        self.excess_terms: list[tuple[pulp.LpVariable, float]] = []
        self._mi = {m: i for i, m in enumerate(problem.models)}
        self._build()

    # ----------------------------------------------------------------------------------- build
    def _var(
        self, name: str, low: float | None = 0, up: float | None = None, cat: str = pulp.LpContinuous
    ) -> pulp.LpVariable:
        return self.lp.add_variable(name, low, up, cat=cat)

    def _build(self) -> None:
        """First stage (orders, commitments, site limits, capacity, gangs, chance), then scenarios."""
        self._purchases()
        self._commitments()
        own = self._own_capacity()
        self._site_limits()
        cloud = self._capacity(own)
        self._gang_blocks(own, cloud)
        self._chance_indicators()
        pr = self.p
        self.a: dict[tuple[int, int, int, int], pulp.LpVariable] = {}
        self.r: dict[tuple[int, int, int, int], pulp.LpVariable] = {}
        self.sh: dict[tuple[int, int, int], pulp.LpVariable] = {}
        self.ex: dict[tuple[int, int, int], pulp.LpVariable] = {}
        self.lo: dict[tuple[int, int, int], pulp.LpVariable] = {}
        self.bl: dict[tuple[int, int, int], pulp.LpVariable] = {}
        self._usable_rec = [
            [
                o
                for o, ro in enumerate(pr.recourse)
                if ro.model in cl.ratios and (ro.kind == "on_demand" or pr.tiers[cl.tier].spot)
            ]
            for cl in pr.classes
        ]
        for w in range(0 if self.first_stage_only else len(pr.scenario_names)):
            for p in range(pr.periods):
                self._scenario_period(w, p)
            if self.deadline is not None and self.deadline.expired():
                raise BuildCut(f"building the extensive form reached scenario {w + 1} of "
                               f"{len(pr.scenario_names)} by the time limit")
        self.shape = (len(pr.scenario_names), len(pr.classes), len(pr.models), len(pr.recourse), pr.periods)
        self.set_objective_cost()

    # first stage ------------------------------------------------------------------------
    def _purchases(self) -> None:
        """Integer purchase lots per option, site and order period; per-period supply caps."""
        pr, T, lab = self.p, self.p.periods, self.p.labels
        self.buy: dict[tuple[int, int, int], pulp.LpVariable] = {}
        for o, po in enumerate(pr.purchases):
            ub = None if po.supply_cap is None else po.supply_cap // po.lot_size
            for s in po.sites:
                for q in range(T - po.lead_time):
                    v = self._var(_n("buy_lots", po.name, pr.sites[s].name, lab[q]), 0, ub, pulp.LpInteger)
                    self.buy[o, s, q] = v
                    in_service = T - (q + po.lead_time)
                    capex = po.unit_cost / po.depreciation_periods * min(po.depreciation_periods, in_service)
                    energy = po.power_w * pr.sites[s].energy_cost_per_w * in_service
                    self.cost_terms.append((v, po.lot_size * (capex + energy)))
        for o, po in enumerate(pr.purchases):
            if po.supply_cap is not None:
                for q in range(T - po.lead_time):
                    self.lp += (
                        pulp.lpSum(po.lot_size * self.buy[o, s, q] for s in po.sites) <= po.supply_cap,
                        _n("supply_cap", po.name, lab[q]),
                    )

    def _commitments(self) -> None:
        """Reserved-term and calendar-block starts; calendar counts and reserved maxima."""
        pr, T, lab = self.p, self.p.periods, self.p.labels
        self.com: dict[tuple[int, int], pulp.LpVariable] = {}
        for k, co in enumerate(pr.commits):
            for q in co.starts:
                v = self._var(_n(co.kind, co.name, lab[q]), 0, co.max_units, pulp.LpInteger)
                self.com[k, q] = v
                self.cost_terms.append((v, co.unit * co.price_per_gpu_hour * pr.hours * min(co.duration, T - q)))
            if co.max_units is not None:
                self.lp += (
                    pulp.lpSum(self.com[k, q] for q in co.starts) <= co.max_units,
                    _n("calendar_count", co.name),
                )
        for k, co in enumerate(pr.commits):
            if co.max_gpus is not None:
                for p in range(T):
                    terms = self._commit_active(k, p)
                    if terms:
                        self.lp += (
                            pulp.LpAffineExpression(terms) <= co.max_gpus,
                            _n("reserved_max", co.name, lab[p]),
                        )

    def _commit_active(self, k: int, p: int) -> list[tuple[pulp.LpVariable, float]]:
        co = self.p.commits[k]
        return [(self.com[k, q], float(co.unit)) for q in co.starts if q <= p < q + co.duration]

    def _own_capacity(self) -> dict[tuple[int, str, int], list[tuple[pulp.LpVariable, float]]]:
        """Purchased GPUs in service per (site, model, period), as terms over the lot variables."""
        own: dict[tuple[int, str, int], list[tuple[pulp.LpVariable, float]]] = {}
        for (o, s, q), v in self.buy.items():
            po = self.p.purchases[o]
            for p in range(q + po.lead_time, self.p.periods):
                own.setdefault((s, po.model, p), []).append((v, float(po.lot_size)))
        return own

    def _site_limits(self) -> None:
        """Power, rack space and installs per period at each site (fleet and in-flight included)."""
        pr, lab = self.p, self.p.labels
        for s, site in enumerate(pr.sites):
            for p in range(pr.periods):
                inst = [i for i in pr.installed if i.site == s and i.start <= p < i.end]
                arrived = [
                    (pr.purchases[o], q, v)
                    for (o, s2, q), v in self.buy.items()
                    if s2 == s and q + pr.purchases[o].lead_time <= p
                ]
                limits = (
                    ("power", site.power_w, "power_w"),
                    ("rack_space", site.rack_units, "rack_units_per_gpu"),
                )
                for what, cap, attr in limits:
                    if cap is not None:
                        used = sum(i.count * getattr(i, attr) for i in inst)
                        terms = [(v, po.lot_size * getattr(po, attr)) for po, q, v in arrived]
                        self.lp += (pulp.LpAffineExpression(terms) <= cap - used, _n(what, site.name, lab[p]))
                if site.max_installs is not None:
                    new = [(v, float(po.lot_size)) for po, q, v in arrived if q + po.lead_time == p]
                    if new:
                        self.lp += (
                            pulp.LpAffineExpression(new) <= site.max_installs,
                            _n("installs", site.name, lab[p]),
                        )

    def _capacity(
        self, own: dict[tuple[int, str, int], list[tuple[pulp.LpVariable, float]]]
    ) -> dict[tuple[str, int], list[tuple[pulp.LpVariable, float]]]:
        """Committed capacity per model and period (a defined variable keeps scenario rows short).

        Returns the cloud commitment terms per (model, period).
        """
        pr, T, S = self.p, self.p.periods, len(self.p.sites)
        self.cap: dict[tuple[str, int], pulp.LpVariable] = {}
        cloud: dict[tuple[str, int], list[tuple[pulp.LpVariable, float]]] = {}
        for k, co in enumerate(pr.commits):
            for p in range(T):
                cloud.setdefault((co.model, p), []).extend(self._commit_active(k, p))
        for m in pr.models:
            for p in range(T):
                v = self._var(_n("capacity", m, pr.labels[p]), 0)
                self.cap[m, p] = v
                terms = [t for s in range(S) for t in own.get((s, m, p), [])] + cloud.get((m, p), [])
                self.lp += (
                    pulp.LpAffineExpression([*terms, (v, -1.0)]) == -sum(pr.base_count(s, m, p) for s in range(S)),
                    _n("capacity_def", m, pr.labels[p]),
                )
        return cloud

    def _gang_blocks(
        self,
        own: dict[tuple[int, str, int], list[tuple[pulp.LpVariable, float]]],
        cloud: dict[tuple[str, int], list[tuple[pulp.LpVariable, float]]],
    ) -> None:
        """Whole-gang blocks per class (topology: site), location (sites + cloud), model, period."""
        pr, T, S, lab = self.p, self.p.periods, len(self.p.sites), self.p.labels
        mi = {m: i for i, m in enumerate(pr.models)}
        self.gang: dict[tuple[int, int, int, int], pulp.LpVariable] = {}
        locs = [*(x.name for x in pr.sites), "cloud"]
        for c, cl in enumerate(pr.classes):
            if not cl.site_gangs:
                continue
            for m in cl.ratios:
                for p in range(T):
                    for loc in range(S + 1):
                        self.gang[c, loc, mi[m], p] = self._var(
                            _n("gangs", cl.name, locs[loc], m, lab[p]), 0, None, pulp.LpInteger
                        )
        by_loc: dict[tuple[int, int, int], list[tuple[pulp.LpVariable, float]]] = {}
        self._gang_of: dict[tuple[int, int, int], list[tuple[pulp.LpVariable, float]]] = {}
        for (c, loc, m_i, p), v in self.gang.items():
            g = float(pr.classes[c].gang_size)
            by_loc.setdefault((loc, m_i, p), []).append((v, g))
            self._gang_of.setdefault((c, m_i, p), []).append((v, -g))
        for m in pr.models:
            for p in range(T):
                for loc in range(S + 1):
                    terms = by_loc.get((loc, mi[m], p), [])
                    if not terms:
                        continue
                    held = own.get((loc, m, p), []) if loc < S else cloud.get((m, p), [])
                    rhs = float(pr.base_count(loc, m, p)) if loc < S else 0.0
                    self.lp += (
                        pulp.LpAffineExpression(terms + [(v, -w) for v, w in held]) <= rhs,
                        _n("gang_fit", locs[loc], m, lab[p]),
                    )

    def _chance_indicators(self) -> None:
        """One missed indicator per chance tier and scenario; their probability within the budget."""
        pr = self.p
        self.z: dict[tuple[int, int], pulp.LpVariable] = {}
        for k, tier in enumerate(pr.tiers):
            if tier.kind == "guaranteed" and tier.service_level < 1:
                for w, sn in enumerate(pr.scenario_names):
                    self.z[k, w] = self._var(_n("missed", tier.name, sn), 0, 1, pulp.LpInteger)
                self.lp += (
                    pulp.lpSum(pr.probabilities[w] * self.z[k, w] for w in range(len(pr.scenario_names)))
                    <= 1 - tier.service_level + 1e-9,
                    _n("service_level", tier.name),
                )

    # second stage -----------------------------------------------------------------------
    def _scenario_period(self, w: int, p: int) -> None:
        """Demand rows of every class, capacity pools per model and availability caps."""
        pr = self.p
        sn, lab = pr.scenario_names[w], pr.labels
        pool: dict[int, list[tuple[pulp.LpVariable, float]]] = {}
        rpool: dict[int, list[pulp.LpVariable]] = {}
        for c, cl in enumerate(pr.classes):
            d = float(pr.demand[w, c, p])
            served = self._committed(w, c, p, pool) + self._recourse(w, c, p, rpool) + self._slack(w, c, p, d)
            self.lp += (pulp.LpAffineExpression(served) == d, _n("demand", cl.name, lab[p], sn))
        for m_i, terms in pool.items():
            self.lp += (
                pulp.LpAffineExpression([*terms, (self.cap[pr.models[m_i], p], -1.0)]) <= 0,
                _n("pool", pr.models[m_i], lab[p], sn),
            )
        for o, vs in rpool.items():
            cap_o = pr.recourse[o].max_gpus
            if cap_o is not None:
                self.lp += (pulp.lpSum(vs) <= cap_o, _n("availability", pr.recourse[o].name, lab[p], sn))

    def _committed(
        self, w: int, c: int, p: int, pool: dict[int, list[tuple[pulp.LpVariable, float]]]
    ) -> list[tuple[pulp.LpVariable, float]]:
        """Use of committed GPUs by class ``c``; whole-gang classes only inside their blocks."""
        pr = self.p
        cl, sn, lab = pr.classes[c], pr.scenario_names[w], pr.labels
        served: list[tuple[pulp.LpVariable, float]] = []
        for m, ratio in cl.ratios.items():
            m_i = self._mi[m]
            v = self._var(_n("use", cl.name, m, lab[p], sn), 0)
            self.a[w, c, m_i, p] = v
            served.append((v, ratio))
            pool.setdefault(m_i, []).append((v, cl.factor))
            if cl.site_gangs:
                self.lp += (
                    pulp.LpAffineExpression([(v, 1.0), *self._gang_of[c, m_i, p]]) <= 0,
                    _n("gang_use", cl.name, m, lab[p], sn),
                )
        return served

    def _recourse(
        self, w: int, c: int, p: int, rpool: dict[int, list[pulp.LpVariable]]
    ) -> list[tuple[pulp.LpVariable, float]]:
        """On-demand and spot GPUs class ``c`` may use, priced by probability."""
        pr = self.p
        cl, sn, prob = pr.classes[c], pr.scenario_names[w], pr.probabilities[w]
        served: list[tuple[pulp.LpVariable, float]] = []
        for o in self._usable_rec[c]:
            ro = pr.recourse[o]
            v = self._var(_n(ro.kind, cl.name, ro.name, pr.labels[p], sn), 0)
            self.r[w, c, o, p] = v
            served.append((v, cl.ratios[ro.model] * useful_share(cl, ro)))
            rpool.setdefault(o, []).append(v)
            self.cost_terms.append((v, prob * ro.price_per_gpu_hour * pr.hours))
        return served

    def _slack(self, w: int, c: int, p: int, d: float) -> list[tuple[pulp.LpVariable, float]]:
        """Guaranteed shortfall (chance tiers) and unmet slack (soft model), or flexible loss and backlog."""
        pr = self.p
        cl, sn, lab, prob, hours = pr.classes[c], pr.scenario_names[w], pr.labels, pr.probabilities[w], pr.hours
        tier = pr.tiers[cl.tier]
        served: list[tuple[pulp.LpVariable, float]] = []
        if tier.kind == "guaranteed":
            if tier.service_level < 1:
                v = self._var(_n("shortfall", cl.name, lab[p], sn), 0, d)
                self.sh[w, c, p] = v
                served.append((v, 1.0))
                self.cost_terms.append((v, prob * tier.penalty_per_gpu_hour * hours))
                self.lp += (
                    pulp.LpAffineExpression([(v, 1.0), (self.z[cl.tier, w], -d)]) <= 0,
                    _n("chance_link", cl.name, lab[p], sn),
                )
            if self.soft:
                v = self._var(_n("unmet_guaranteed", cl.name, lab[p], sn), 0, d)
                self.ex[w, c, p] = v
                served.append((v, 1.0))
                self.excess_terms.append((v, prob))
            return served
        v = self._var(_n("lost", cl.name, lab[p], sn), 0)
        self.lo[w, c, p] = v
        served.append((v, 1.0))
        self.cost_terms.append((v, prob * tier.penalty_per_gpu_hour * hours))
        if tier.max_deferral and p < pr.periods - 1:
            cap = float(pr.demand[w, c, max(0, p - tier.max_deferral + 1) : p + 1].sum())
            v = self._var(_n("backlog", cl.name, lab[p], sn), 0, cap)
            self.bl[w, c, p] = v
            served.append((v, 1.0))
            self.cost_terms.append((v, prob * tier.deferral_penalty_per_gpu_hour * hours))
        if (w, c, p - 1) in self.bl:
            served.append((self.bl[w, c, p - 1], -1.0))
        return served

    # ----------------------------------------------------------------------------- objective
    def set_objective_cost(self) -> None:
        """Minimise expected total cost (the default objective)."""
        self.lp.setObjective(pulp.LpAffineExpression(self.cost_terms))

    def rank_excess_first(self, settings: SolverSettings) -> float:
        """Ranked objective, first solve: minimise the expected unmet guaranteed demand.

        Returns the optimum; the second solve keeps it as a constraint and minimises cost.
        """
        self.lp.setObjective(pulp.LpAffineExpression(self.excess_terms))
        raw = self.solve(settings)
        if raw.status not in ("optimal", "feasible"):
            return float("inf")
        best = raw.objective
        self.lp += (
            pulp.LpAffineExpression(self.excess_terms) <= best * (1 + 1e-6) + 1e-6,
            "rank_unmet_guaranteed_fixed",
        )
        self.set_objective_cost()
        return best

    def export(self) -> LinearProgram:
        """The model (objective, bounds, integrality, rows) as arrays, column and row names kept."""
        inf = float("inf")
        seen: dict[str, pulp.LpVariable] = {v.name: v for v in self.lp.variables()}
        for d in (self.buy, self.com, self.gang, self.z, self.cap):
            for v in d.values():
                seen.setdefault(v.name, v)
        columns = [(n, v.lowBound, v.upBound, v.cat == pulp.LpInteger) for n, v in seen.items()]
        rows = [(con.name,
                 -con.constant if con.sense in (pulp.LpConstraintEQ, pulp.LpConstraintGE) else -inf,
                 -con.constant if con.sense in (pulp.LpConstraintEQ, pulp.LpConstraintLE) else inf,
                 [(v.name, c) for v, c in con.items()]) for con in self.lp.constraints()]
        return program(columns, [(v.name, c) for v, c in self.lp.objective.items()], rows)

    # --------------------------------------------------------------------------------- solve
    def solve(self, settings: SolverSettings) -> RawSolution:
        """Solve and read the values back into a :class:`RawSolution`."""
        t0 = time.perf_counter()
        solver = make_solver(settings)
        if isinstance(solver, _SilentHiGHS):  # the limit holds for the transfer to HiGHS and the read-back too
            W, C, T = self.p.demand.shape
            solver.end = t0 + settings.time_limit
            if settings.deadline is not None:
                solver.end = min(solver.end, settings.deadline.end)
            solver.readback = READBACK_SECONDS_PER_ROW * W * C * T
        with running():
            self.lp.solve(solver)
        runtime = time.perf_counter() - t0
        st, sol = self.lp.status, self.lp.sol_status
        if st == pulp.LpStatusOptimal and sol == pulp.LpSolutionOptimal:
            status = "optimal"
        elif st == pulp.LpStatusOptimal:
            status = "feasible"
        elif st == pulp.LpStatusInfeasible:
            status = "infeasible"
        else:
            status = "no_solution"
        ok = status in ("optimal", "feasible")

        def val(v: pulp.LpVariable) -> float:
            x = v.varValue if ok else 0.0
            return 0.0 if x is None or abs(x) < TOL else float(x)

        variables = self.lp.variables()
        return read_solution(
            self, val, status=status,
            objective=float(pulp.value(self.lp.objective) or 0.0) if ok else float("nan"),
            runtime_s=runtime,
            size=(len(variables), self.lp.numConstraints(), sum(1 for v in variables if v.cat == pulp.LpInteger)),
            backend=type(solver).__name__,
        )
