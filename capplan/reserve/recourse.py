"""The second stage of one scenario as a small LP (numpy + highspy), for the decomposition.

The LP is the scenario block of the extensive form in :mod:`capplan.reserve.milp` (same
variables, rows and costs, not weighted by probability) plus one named slack per guaranteed
class and period, ``unmet_guaranteed``, priced at :attr:`RecourseLP.big`. That slack makes every
first-stage plan feasible in every scenario (complete recourse), so the master needs
optimality cuts only; a plan that still uses it is treated as infeasible by the caller.

First-stage decisions enter only through right-hand sides, the *tender*: committed capacity
``cap[m, p]`` (GPUs per model and period), whole-gang capacity ``gangs[c, m, p]`` (GPUs) and
the chance indicators ``z[k]`` of the scenario. One template is built once; each scenario
gets its own highspy object, so its simplex basis warm-starts the next evaluation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import highspy
import numpy as np
import numpy.typing as npt

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


class RecourseLP:
    """Scenario LPs of a :class:`Problem` sharing one template.

    Parameters
    ----------
    problem
        The indexed problem.
    """

    def __init__(self, problem: Problem) -> None:
        self.p = pr = problem
        T = pr.periods
        mi = {m: i for i, m in enumerate(pr.models)}
        hours = pr.hours
        self.big = 10.0 * (1.0 + max([_max_rate(pr), 1.0]))
        cost: list[float] = []
        upper: list[float] = []
        #: column maps: (c, m|o, p) -> column, and (c, p) -> column
        self.a_col: dict[tuple[int, int, int], int] = {}
        self.r_col: dict[tuple[int, int, int], int] = {}
        self.sh_col: dict[tuple[int, int], int] = {}
        self.ex_col: dict[tuple[int, int], int] = {}
        self.lo_col: dict[tuple[int, int], int] = {}
        self.bl_col: dict[tuple[int, int], int] = {}

        def col(c_: float, ub: float = INF) -> int:
            cost.append(c_)
            upper.append(ub)
            return len(cost) - 1

        rows: list[list[tuple[int, float]]] = []
        rlo: list[float] = []
        rup: list[float] = []

        def row(entries: list[tuple[int, float]], lo: float, up: float) -> int:
            rows.append(entries)
            rlo.append(lo)
            rup.append(up)
            return len(rows) - 1

        usable = [
            [
                o
                for o, ro in enumerate(pr.recourse)
                if ro.model in cl.ratios and (ro.kind == "on_demand" or pr.tiers[cl.tier].spot)
            ]
            for cl in pr.classes
        ]
        dem_rows, dem_key, pool_rows, pool_key, gang_rows, gang_key, ch_rows, ch_key = ([] for _ in range(8))
        for p in range(T):
            pool: dict[int, list[tuple[int, float]]] = {}
            rpool: dict[int, list[tuple[int, float]]] = {}
            for c, cl in enumerate(pr.classes):
                tier = pr.tiers[cl.tier]
                served: list[tuple[int, float]] = []
                for m, ratio in cl.ratios.items():
                    j = self.a_col[c, mi[m], p] = col(0.0)
                    served.append((j, ratio))
                    pool.setdefault(mi[m], []).append((j, cl.factor))
                    if cl.site_gangs:
                        gang_rows.append(row([(j, 1.0)], -INF, 0.0))
                        gang_key.append((c, mi[m], p))
                for o in usable[c]:
                    ro = pr.recourse[o]
                    j = self.r_col[c, o, p] = col(ro.price_per_gpu_hour * hours)
                    served.append((j, cl.ratios[ro.model] * (1 - ro.interruption_rate)))
                    rpool.setdefault(o, []).append((j, 1.0))
                if tier.kind == "guaranteed":
                    if tier.service_level < 1:
                        j = self.sh_col[c, p] = col(tier.penalty_per_gpu_hour * hours)
                        served.append((j, 1.0))
                        ch_rows.append(row([(j, 1.0)], -INF, 0.0))
                        ch_key.append((c, p))
                    j = self.ex_col[c, p] = col(self.big * hours)
                    served.append((j, 1.0))
                else:
                    j = self.lo_col[c, p] = col(tier.penalty_per_gpu_hour * hours)
                    served.append((j, 1.0))
                    if tier.max_deferral and p < T - 1:
                        j = self.bl_col[c, p] = col(tier.deferral_penalty_per_gpu_hour * hours)
                        served.append((j, 1.0))
                    if (c, p - 1) in self.bl_col:
                        served.append((self.bl_col[c, p - 1], -1.0))
                dem_rows.append(row(served, 0.0, 0.0))
                dem_key.append((c, p))
            for m_i, terms in pool.items():
                pool_rows.append(row(terms, -INF, 0.0))
                pool_key.append((m_i, p))
            for o, terms in rpool.items():
                cap_o = pr.recourse[o].max_gpus
                if cap_o is not None:
                    row(terms, -INF, cap_o)
        as_idx = _as_idx
        self.dem_rows, self.dem_c, self.dem_p = as_idx(dem_rows), *_split(dem_key, 2)
        self.pool_rows, self.pool_m, self.pool_p = as_idx(pool_rows), *_split(pool_key, 2)
        self.gang_rows, self.gang_c, self.gang_m, self.gang_p = as_idx(gang_rows), *_split(gang_key, 3)
        self.ch_rows, self.ch_c, self.ch_p = as_idx(ch_rows), *_split(ch_key, 2)
        self.ch_tier = np.array([pr.classes[c].tier for c in self.ch_c], dtype=np.int32)
        bl = sorted(self.bl_col.items())
        self.bl_cols = as_idx([j for _, j in bl])
        self.bl_c, self.bl_p = _split([k for k, _ in bl], 2)
        self.cost = np.array(cost)
        self.n_cols, self.n_rows = len(cost), len(rows)
        #: the template in CSR form (scenario-dependent bounds are set per evaluation)
        self.upper, self.row_lower, self.row_upper = np.array(upper), np.array(rlo), np.array(rup)
        self.starts = np.cumsum([0] + [len(r) for r in rows]).astype(np.int32)
        self.index = np.array([j for r in rows for j, _ in r], dtype=np.int32)
        self.value = np.array([v for r in rows for _, v in r], dtype=float)
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = self.n_cols, self.n_rows
        lp.col_cost_ = self.cost
        lp.col_lower_ = np.zeros(self.n_cols)
        lp.col_upper_ = self.upper
        lp.row_lower_ = self.row_lower
        lp.row_upper_ = self.row_upper
        lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
        lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = self.starts, self.index, self.value
        self._lp = lp
        self._highs: dict[int, Any] = {}
        # cumulative demand window that bounds each backlog column, per scenario
        self.bl_ub = np.zeros((len(pr.scenario_names), len(bl)))
        for i, (c, p) in enumerate(zip(self.bl_c, self.bl_p, strict=True)):
            k = pr.tiers[pr.classes[c].tier].max_deferral
            self.bl_ub[:, i] = pr.demand[:, c, max(0, p - k + 1) : p + 1].sum(axis=1)

    def _solver(self, w: int) -> Any:
        h = self._highs.get(w)
        if h is None:
            h = highspy.Highs()  # type: ignore[no-untyped-call]
            h.setOptionValue("output_flag", False)
            h.setOptionValue("presolve", "off")
            h.passModel(self._lp)
            self._highs[w] = h
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
        h.changeRowsBounds(len(d), self.dem_rows, d, d)
        up = np.maximum(cap[self.pool_m, self.pool_p], 0.0)
        h.changeRowsBounds(len(up), self.pool_rows, np.full(len(up), -INF), up)
        if len(self.gang_rows):
            up = np.maximum(gangs[self.gang_c, self.gang_m, self.gang_p], 0.0)
            h.changeRowsBounds(len(up), self.gang_rows, np.full(len(up), -INF), up)
        dch = pr.demand[w, self.ch_c, self.ch_p]
        if len(self.ch_rows):
            up = dch * np.clip(z[self.ch_tier], 0.0, 1.0)
            h.changeRowsBounds(len(up), self.ch_rows, np.full(len(up), -INF), up)
        if len(self.bl_cols):
            ub = self.bl_ub[w]
            h.changeColsBounds(len(ub), self.bl_cols, np.zeros(len(ub)), ub)
        h.run()
        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            raise RuntimeError(f"scenario LP {pr.scenario_names[w]}: {h.modelStatusToString(h.getModelStatus())}")
        sol = h.getSolution()
        dual = np.asarray(sol.row_dual)
        M, C, T = len(pr.models), len(pr.classes), pr.periods
        d_cap = np.zeros((M, T))
        d_cap[self.pool_m, self.pool_p] = dual[self.pool_rows]
        d_gangs = np.zeros((C, M, T))
        if len(self.gang_rows):
            d_gangs[self.gang_c, self.gang_m, self.gang_p] = dual[self.gang_rows]
        d_z = np.zeros(len(pr.tiers))
        if len(self.ch_rows):
            np.add.at(d_z, self.ch_tier, dual[self.ch_rows] * dch)
        x = np.asarray(sol.col_value)
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
