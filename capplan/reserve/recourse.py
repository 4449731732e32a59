"""The second stage of one scenario as a small LP (numpy + :mod:`capplan.lp.highs`), for the decomposition.

The LP is the scenario block of the extensive form in :mod:`capplan.reserve.milp` (same
variables, rows and costs, not weighted by probability) plus one named slack per guaranteed
class and period, ``unmet_guaranteed``, priced at :attr:`RecourseLP.big`. That slack makes every
first-stage plan feasible in every scenario (complete recourse), so the master needs
optimality cuts only; a plan that still uses it is treated as infeasible by the caller.

First-stage decisions enter only through right-hand sides, the *tender*: committed capacity
``cap[m, p]`` (GPUs per model and period), whole-gang capacity ``gangs[c, m, p]`` (GPUs) and
the chance indicators ``z[k]`` of the scenario. One template is built once; each scenario
gets its own HiGHS instance, so its simplex basis warm-starts the next evaluation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from capplan.lp.highs import HighsSolver
from capplan.lp.program import ProgramBuilder
from capplan.reserve.problem import Problem

Arr = npt.NDArray[np.float64]
Idx = npt.NDArray[np.int32]
INF = float("inf")


@dataclass
class Evaluation:
    """Cost of one scenario at a tender, its subgradient, and the LP's column values."""

    cost: float
    d_cap: Arr  # (models, periods)
    d_gangs: Arr  # (classes, models, periods)
    d_z: Arr  # (tiers,)
    x: Arr


class _Template:
    """Columns and rows of one scenario's LP, built once (scenario data enters as bounds)."""

    def __init__(self, pr: Problem, big: float) -> None:
        self.pr, self.big = pr, big
        self.lp = ProgramBuilder()
        #: column maps: (c, m|o, p) -> column, and (c, p) -> column
        self.a_col: dict[tuple[int, int, int], int] = {}
        self.r_col: dict[tuple[int, int, int], int] = {}
        self.sh_col: dict[tuple[int, int], int] = {}
        self.ex_col: dict[tuple[int, int], int] = {}
        self.lo_col: dict[tuple[int, int], int] = {}
        self.bl_col: dict[tuple[int, int], int] = {}
        #: rows whose bounds a scenario or a tender sets, with their keys
        self.keyed: dict[str, tuple[list[int], list[tuple[int, ...]]]] = {
            k: ([], []) for k in ("dem", "pool", "gang", "ch")
        }
        self.mi = {m: i for i, m in enumerate(pr.models)}
        self.usable = [
            [
                o
                for o, ro in enumerate(pr.recourse)
                if ro.model in cl.ratios and (ro.kind == "on_demand" or pr.tiers[cl.tier].spot)
            ]
            for cl in pr.classes
        ]
        for p in range(pr.periods):
            self._period(p)

    def col(self, cost: float) -> int:
        return self.lp.add_col(cost)

    def row(
        self, entries: list[tuple[int, float]], lo: float, up: float, key: tuple[str, tuple[int, ...]] | None = None
    ) -> None:
        r = self.lp.add_row(entries, lo, up)
        if key is not None:
            rows, keys = self.keyed[key[0]]
            rows.append(r)
            keys.append(key[1])

    def _period(self, p: int) -> None:
        pr = self.pr
        pool: dict[int, list[tuple[int, float]]] = {}
        rpool: dict[int, list[tuple[int, float]]] = {}
        for c in range(len(pr.classes)):
            served = self._committed(c, p, pool) + self._recourse(c, p, rpool) + self._slack(c, p)
            self.row(served, 0.0, 0.0, ("dem", (c, p)))
        for m_i, terms in pool.items():
            self.row(terms, -INF, 0.0, ("pool", (m_i, p)))
        for o, terms in rpool.items():
            cap_o = pr.recourse[o].max_gpus
            if cap_o is not None:
                self.row(terms, -INF, cap_o)

    def _committed(self, c: int, p: int, pool: dict[int, list[tuple[int, float]]]) -> list[tuple[int, float]]:
        """Use of committed capacity by class ``c``: pooled per model, gang rows for site gangs."""
        cl, mi = self.pr.classes[c], self.mi
        served: list[tuple[int, float]] = []
        for m, ratio in cl.ratios.items():
            j = self.a_col[c, mi[m], p] = self.col(0.0)
            served.append((j, ratio))
            pool.setdefault(mi[m], []).append((j, cl.factor))
            if cl.site_gangs:
                self.row([(j, 1.0)], -INF, 0.0, ("gang", (c, mi[m], p)))
        return served

    def _recourse(self, c: int, p: int, rpool: dict[int, list[tuple[int, float]]]) -> list[tuple[int, float]]:
        """On-demand and spot GPUs class ``c`` may use."""
        cl = self.pr.classes[c]
        served: list[tuple[int, float]] = []
        for o in self.usable[c]:
            ro = self.pr.recourse[o]
            j = self.r_col[c, o, p] = self.col(ro.price_per_gpu_hour * self.pr.hours)
            served.append((j, cl.ratios[ro.model] * (1 - ro.interruption_rate)))
            rpool.setdefault(o, []).append((j, 1.0))
        return served

    def _slack(self, c: int, p: int) -> list[tuple[int, float]]:
        """Shortfall (chance tiers), the priced unmet_guaranteed slack, or loss and backlog."""
        pr, hours = self.pr, self.pr.hours
        tier = pr.tiers[pr.classes[c].tier]
        served: list[tuple[int, float]] = []
        if tier.kind == "guaranteed":
            if tier.service_level < 1:
                j = self.sh_col[c, p] = self.col(tier.penalty_per_gpu_hour * hours)
                served.append((j, 1.0))
                self.row([(j, 1.0)], -INF, 0.0, ("ch", (c, p)))
            j = self.ex_col[c, p] = self.col(self.big * hours)
            served.append((j, 1.0))
            return served
        j = self.lo_col[c, p] = self.col(tier.penalty_per_gpu_hour * hours)
        served.append((j, 1.0))
        if tier.max_deferral and p < pr.periods - 1:
            j = self.bl_col[c, p] = self.col(tier.deferral_penalty_per_gpu_hour * hours)
            served.append((j, 1.0))
        if (c, p - 1) in self.bl_col:
            served.append((self.bl_col[c, p - 1], -1.0))
        return served


class RecourseLP:
    """Scenario LPs of a :class:`Problem` sharing one template.

    Parameters
    ----------
    problem
        The indexed problem.
    """

    def __init__(self, problem: Problem) -> None:
        self.p = pr = problem
        self.big = 10.0 * (1.0 + max([_max_rate(pr), 1.0]))
        t = _Template(pr, self.big)
        self.a_col, self.r_col, self.sh_col = t.a_col, t.r_col, t.sh_col
        self.ex_col, self.lo_col, self.bl_col = t.ex_col, t.lo_col, t.bl_col
        (dem_rows, dem_key), (pool_rows, pool_key) = t.keyed["dem"], t.keyed["pool"]
        (gang_rows, gang_key), (ch_rows, ch_key) = t.keyed["gang"], t.keyed["ch"]
        self.dem_rows, self.dem_c, self.dem_p = _as_idx(dem_rows), *_split(dem_key, 2)
        self.pool_rows, self.pool_m, self.pool_p = _as_idx(pool_rows), *_split(pool_key, 2)
        self.gang_rows, self.gang_c, self.gang_m, self.gang_p = _as_idx(gang_rows), *_split(gang_key, 3)
        self.ch_rows, self.ch_c, self.ch_p = _as_idx(ch_rows), *_split(ch_key, 2)
        self.ch_tier = np.array([pr.classes[c].tier for c in self.ch_c], dtype=np.int32)
        bl = sorted(self.bl_col.items())
        self.bl_cols = _as_idx([j for _, j in bl])
        self.bl_c, self.bl_p = _split([k for k, _ in bl], 2)
        #: the template in CSR form (scenario-dependent bounds are set per evaluation)
        self._lp = lp = t.lp.program()
        self.cost, self.upper = lp.cost, lp.upper
        self.row_lower, self.row_upper = lp.row_lower, lp.row_upper
        self.starts, self.index, self.value = lp.starts, lp.index, lp.value
        self.n_cols, self.n_rows = lp.num_cols, lp.num_rows
        self._highs: dict[int, HighsSolver] = {}
        # cumulative demand window that bounds each backlog column, per scenario
        self.bl_ub = np.zeros((len(pr.scenario_names), len(bl)))
        for i, (c, p) in enumerate(zip(self.bl_c, self.bl_p, strict=True)):
            k = pr.tiers[pr.classes[c].tier].max_deferral
            self.bl_ub[:, i] = pr.demand[:, c, max(0, p - k + 1) : p + 1].sum(axis=1)

    def _solver(self, w: int) -> HighsSolver:
        h = self._highs.get(w)
        if h is None:
            h = self._highs[w] = HighsSolver(self._lp, presolve=False)
        return h

    def evaluate(self, w: int, cap: Arr, gangs: Arr, z: Arr) -> Evaluation:
        """Solve scenario ``w`` at the tender ``cap`` (M, T), ``gangs`` (C, M, T), ``z`` (tiers,).

        Raises
        ------
        RuntimeError
            If HiGHS does not report an optimal LP (cannot happen with complete recourse).
        """
        pr, h = self.p, self._solver(w)
        d = pr.demand[w, self.dem_c, self.dem_p]
        h.set_row_bounds(self.dem_rows, d, d)
        up = np.maximum(cap[self.pool_m, self.pool_p], 0.0)
        h.set_row_bounds(self.pool_rows, np.full(len(up), -INF), up)
        if len(self.gang_rows):
            up = np.maximum(gangs[self.gang_c, self.gang_m, self.gang_p], 0.0)
            h.set_row_bounds(self.gang_rows, np.full(len(up), -INF), up)
        dch = pr.demand[w, self.ch_c, self.ch_p]
        if len(self.ch_rows):
            up = dch * np.clip(z[self.ch_tier], 0.0, 1.0)
            h.set_row_bounds(self.ch_rows, np.full(len(up), -INF), up)
        if len(self.bl_cols):
            ub = self.bl_ub[w]
            h.set_col_bounds(self.bl_cols, np.zeros(len(ub)), ub)
        if h.run() != "optimal":
            raise RuntimeError(f"scenario LP {pr.scenario_names[w]}: {h.status_text()}")
        x, dual = h.solution()
        M, C, T = len(pr.models), len(pr.classes), pr.periods
        d_cap = np.zeros((M, T))
        d_cap[self.pool_m, self.pool_p] = dual[self.pool_rows]
        d_gangs = np.zeros((C, M, T))
        if len(self.gang_rows):
            d_gangs[self.gang_c, self.gang_m, self.gang_p] = dual[self.gang_rows]
        d_z = np.zeros(len(pr.tiers))
        if len(self.ch_rows):
            np.add.at(d_z, self.ch_tier, dual[self.ch_rows] * dch)
        return Evaluation(float(self.cost @ x), d_cap, d_gangs, d_z, x)


def _max_rate(pr: Problem) -> float:
    """The largest cost of one GPU-hour of any option or penalty (buying: one period's worth)."""
    rates = [ro.price_per_gpu_hour for ro in pr.recourse]
    rates += [co.price_per_gpu_hour for co in pr.commits]
    rates += [t.penalty_per_gpu_hour + t.deferral_penalty_per_gpu_hour for t in pr.tiers]
    for po in pr.purchases:
        energy = max((s.energy_cost_per_w for s in pr.sites), default=0.0) * po.power_w
        rates.append((po.unit_cost + energy * pr.periods) / pr.hours)
    return max(rates, default=0.0)


def _as_idx(xs: list[int]) -> Idx:
    return np.array(xs, dtype=np.int32)


def _split(keys: Sequence[tuple[int, ...]], n: int) -> tuple[Idx, ...]:
    arr = np.array(keys, dtype=np.int32).reshape(-1, n)
    return tuple(arr[:, i].copy() for i in range(n))
