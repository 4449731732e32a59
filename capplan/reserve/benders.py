"""L-shaped (Benders) decomposition of the two-stage MILP, solved with HiGHS (:mod:`capplan.lp.highs`).

The master holds the first stage exactly as :class:`capplan.reserve.milp.ReservationModel`
builds it (``first_stage_only=True``, exported with its names) plus one cost variable
``theta_<scenario>`` per scenario (multi-cut). Each scenario's recourse is a small LP
(:class:`capplan.reserve.recourse.RecourseLP`); its duals give an optimality cut
``theta_w >= Q_w(x^) + g_w (x - x^)`` in the tender (capacity, gang capacity, chance indicator).

The master also holds the recourse of a few scenario groups at their mean demand (Jensen) and
coverage rows for the guaranteed classes (:meth:`Decomposition._add_coverage`). This module
builds the master, evaluates tenders, adds cuts and repairs candidate plans; the search that
drives it (stabilised LP phase, dive and RENS, local search, full master) is
:mod:`capplan.reserve.lshaped`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from capplan.lp.highs import HighsSolver
from capplan.lp.program import LinearProgram, ProgramBuilder
from capplan.reserve.milp import ReservationModel
from capplan.reserve.problem import Problem
from capplan.reserve.recourse import Evaluation, RecourseLP
from capplan.reserve.solver import TOL, RawSolution, SolverSettings

log = logging.getLogger(__name__)
log.addHandler(logging.NullHandler())
Arr = npt.NDArray[np.float64]
INF = float("inf")


@dataclass
class Incumbent:
    """The best evaluated plan: master vector, expected total cost, scenario evaluations."""

    x: Arr
    cost: float
    evals: list[Evaluation]


class Decomposition:
    """Master + scenario LPs of one :class:`Problem`.

    Parameters
    ----------
    problem
        The indexed problem.
    groups
        Scenario groups whose expected-demand recourse is kept in the master (see
        :meth:`_add_group`); as many groups as scenarios make the master the extensive form.
    """

    def __init__(self, problem: Problem, groups: int = 8) -> None:
        self.p = pr = problem
        self.model = ReservationModel(problem, first_stage_only=True)
        A = self.arrays = self.model.export()
        W, M, T, C = len(pr.scenario_names), len(pr.models), pr.periods, len(pr.classes)
        self.n = n = A.num_cols
        #: master column of each first-stage variable, by name
        self.col_index = ci = {name: j for j, name in enumerate(A.col_names)}
        self.cap_col = np.array([[ci[self.model.cap[m, p].name] for p in range(T)] for m in pr.models], dtype=np.int32)
        #: gang columns: (class, model, period) -> [(column, gang size)]
        self.gang_cols: dict[tuple[int, int, int], list[int]] = {}
        for (c, _loc, m_i, p), v in self.model.gang.items():
            self.gang_cols.setdefault((c, m_i, p), []).append(ci[v.name])
        self.z_col = np.full((len(pr.tiers), W), -1, dtype=np.int32)
        for (k, w), v in self.model.z.items():
            self.z_col[k, w] = ci[v.name]
        self.shape = (W, C, M, T)
        self.recourse = RecourseLP(problem)
        self.theta = np.arange(n, n + W, dtype=np.int32)
        lp = self._master_program(groups)
        #: the master (LP or MIP as the search switches integrality); the search sets its deadline
        self.master = HighsSolver(lp, interruptible=True)
        self.n_master = lp.num_cols
        self._index_columns()
        self.cuts = 0

    def _master_program(self, groups: int) -> LinearProgram:
        """First stage + one ``theta`` per scenario + Jensen groups + coverage rows."""
        pr, A = self.p, self.arrays
        lp = ProgramBuilder(A)
        for w, s in enumerate(pr.scenario_names):
            lp.add_col(pr.probabilities[w], 0.0, INF, f"theta_{s}")
        for g, members in enumerate(scenario_groups(pr, groups)):
            self._add_group(lp, g, members)
        self._add_coverage(lp)
        return lp.program()

    def _index_columns(self) -> None:
        """Column groups the search works on: integers, gang blocks, lots, gang_fit rows."""
        A = self.arrays
        self.int_cols = A.integer_cols
        gang_all = np.array(sorted(j for cols_ in self.gang_cols.values() for j in cols_), dtype=np.int32)
        self.gang_int = np.intersect1d(self.int_cols, gang_all).astype(np.int32)
        #: integer columns other than gang blocks (purchase lots, commitments, chance indicators)
        self.plan_int = np.setdiff1d(self.int_cols, gang_all).astype(np.int32)
        self.z_all = self.z_col[self.z_col >= 0]
        by_p: dict[int, list[int]] = {}
        for (_c, _m, p), cols_ in self.gang_cols.items():
            by_p.setdefault(p, []).extend(cols_)
        lots: dict[tuple[int, str], list[int]] = {}
        for (o, site, _q), var in self.model.buy.items():
            lots.setdefault((site, self.p.purchases[o].model), []).append(self.col_index[var.name])
        #: purchase-lot columns per (site, model): the local-search neighbourhoods
        self.lot_groups = [np.array(sorted(v), dtype=np.int32) for _, v in sorted(lots.items())]
        #: gang columns per period, in period order (for the rounding dive)
        self.gang_by_period = [np.array(sorted(by_p[p]), dtype=np.int32) for p in sorted(by_p)]
        #: gang_fit rows: (other columns, their coefficients, rhs, gang columns, gang sizes)
        self._fit: list[tuple[npt.NDArray[np.int32], Arr, float, npt.NDArray[np.int32], Arr]] = []
        for r, name in enumerate(A.row_names):
            if name.startswith("gang_fit_"):
                idx, val = A.index[A.starts[r] : A.starts[r + 1]], A.value[A.starts[r] : A.starts[r + 1]]
                isg = np.isin(idx, gang_all)
                self._fit.append((idx[~isg], val[~isg], float(A.row_upper[r]), idx[isg], val[isg]))

    def _add_coverage(self, lp: ProgramBuilder) -> None:
        """Induced rows: each guaranteed class alone can be covered wherever its tier must be met.

        For a guaranteed class and period ``p``: ``sum_m ratio_m u_m + on-demand >= q``, with
        ``u_m`` at most the model's capacity (and its whole-gang GPUs) and ``q`` the demand that
        only scenarios of total probability ``<= 1 - service_level`` exceed (the worst scenario
        for service level 1): those are the only scenarios the chance constraint lets fall short.
        Every plan that meets the tiers satisfies them, so the master stays a relaxation of the
        hard problem, and its plans stop relying on the priced ``unmet_guaranteed`` slack.
        """
        pr = self.p
        mi = {m: i for i, m in enumerate(pr.models)}
        prob = np.array(pr.probabilities)
        for c, cl in enumerate(pr.classes):
            tier = pr.tiers[cl.tier]
            if tier.kind != "guaranteed":
                continue
            recs = [ro for ro in pr.recourse if ro.model in cl.ratios and ro.kind == "on_demand"]
            if any(ro.max_gpus is None for ro in recs):
                continue
            extra = sum(cl.ratios[ro.model] * float(ro.max_gpus or 0.0) for ro in recs)
            for p in range(pr.periods):
                need = _quantile(pr.demand[:, c, p], prob, 1.0 - tier.service_level) - extra
                if need <= 0:
                    continue
                cover: list[tuple[int, float]] = []
                for m, ratio in cl.ratios.items():
                    j = lp.add_col(0.0, 0.0, INF, f"cover_{cl.name}_{m}_{pr.labels[p]}")
                    cover.append((j, ratio))
                    cap = int(self.cap_col[mi[m], p])
                    lp.add_row([(j, cl.factor), (cap, -1.0)], -INF, 0.0, f"cover_cap_{cl.name}_{m}_{pr.labels[p]}")
                    if cl.site_gangs:
                        gs = [(g, -float(cl.gang_size)) for g in self.gang_cols.get((c, mi[m], p), [])]
                        lp.add_row([(j, 1.0), *gs], -INF, 0.0, f"cover_gangs_{cl.name}_{m}_{pr.labels[p]}")
                lp.add_row(cover, need, INF, f"cover_{cl.name}_{pr.labels[p]}")

    def _add_group(self, lp: ProgramBuilder, g: int, members: list[int]) -> None:
        """Add the recourse LP of a group's mean scenario and ``sum p_w theta_w >= P_g Q(mean)``.

        The scenario LP's value is convex in its right-hand side (demand, backlog bounds and the
        chance rows ``d_w z_w``), so by Jensen's inequality the probability-weighted mean of the
        members' costs is at least the cost at the mean right-hand side: a valid inequality
        that gives the master most of the recourse structure from the first iteration.
        """
        pr, rl = self.p, self.recourse
        prob = np.array(pr.probabilities)[members]
        P = float(prob.sum())
        wts = prob / P
        off = lp.num_cols
        ub = rl.upper.copy()
        ub[rl.bl_cols] = wts @ rl.bl_ub[members]
        for j in range(rl.n_cols):
            lp.add_col(0.0, 0.0, float(ub[j]), f"group{g}_x{j}")
        lo, up = rl.row_lower.copy(), rl.row_upper.copy()
        dmean = wts @ pr.demand[members][:, rl.dem_c, rl.dem_p]
        lo[rl.dem_rows] = up[rl.dem_rows] = dmean
        extra: dict[int, list[tuple[int, float]]] = {}
        for r, m, p in zip(rl.pool_rows, rl.pool_m, rl.pool_p, strict=True):
            extra[int(r)] = [(int(self.cap_col[m, p]), -1.0)]
        for r, c, m, p in zip(rl.gang_rows, rl.gang_c, rl.gang_m, rl.gang_p, strict=True):
            gs = float(pr.classes[c].gang_size)
            extra[int(r)] = [(j, -gs) for j in self.gang_cols.get((int(c), int(m), int(p)), [])]
        for r, c, p, k in zip(rl.ch_rows, rl.ch_c, rl.ch_p, rl.ch_tier, strict=True):
            extra[int(r)] = [
                (int(self.z_col[k, w]), -float(wts[i] * pr.demand[w, c, p])) for i, w in enumerate(members)
            ]
        for r in range(rl.n_rows):
            a, b = rl.starts[r], rl.starts[r + 1]
            entries = [(off + int(j), float(v)) for j, v in zip(rl.index[a:b], rl.value[a:b], strict=True)]
            lp.add_row(entries + extra.get(r, []), float(lo[r]), float(up[r]), f"group{g}_r{r}")
        link = [(int(self.theta[w]), float(pr.probabilities[w])) for w in members]
        link += [(off + j, -P * float(c)) for j, c in enumerate(rl.cost) if c]
        lp.add_row(link, 0.0, INF, f"jensen_group{g}")

    # ---------------------------------------------------------------------------- tender
    def tender(self, x: Arr) -> tuple[Arr, Arr, Arr]:
        """Capacity (M, T), gang GPUs (C, M, T) and chance indicators (tiers, W) of master ``x``."""
        _, C, M, T = self.shape
        cap = x[self.cap_col]
        gangs = np.zeros((C, M, T))
        for (c, m, p), cols in self.gang_cols.items():
            gangs[c, m, p] = self.p.classes[c].gang_size * x[cols].sum()
        z = np.where(self.z_col >= 0, x[np.maximum(self.z_col, 0)], 0.0)
        return cap, gangs, z

    def evaluate(self, x: Arr) -> list[Evaluation]:
        """Solve every scenario LP at master ``x``."""
        cap, gangs, z = self.tender(x)
        return [self.recourse.evaluate(w, cap, gangs, z[:, w]) for w in range(self.shape[0])]

    def first_stage_cost(self, x: Arr) -> float:
        """Cost of the first-stage decisions in ``x``."""
        return float(self.arrays.cost @ x[: self.n])

    def add_cuts(self, x: Arr, evals: list[Evaluation], check: Arr | None = None) -> int:
        """Add the optimality cuts at ``x``; with ``check`` (a master solution) only the violated ones.

        A cut ``theta_w >= Q_w(x) + g_w (y - x)`` is kept when its value at ``check`` exceeds
        ``check``'s ``theta_w`` (so cuts taken at a stabilised point are tested at the master's).
        """
        cap, gangs, z = self.tender(x)
        if check is not None:
            cap_c, gangs_c, z_c = self.tender(check)
            dcap, dg, dz = cap_c - cap, gangs_c - gangs, z_c - z
        lower, starts, index, value = [], [0], [], []
        for w, ev in enumerate(evals):
            if check is not None:
                at = ev.cost + float((ev.d_cap * dcap).sum() + (ev.d_gangs * dg).sum() + ev.d_z @ dz[:, w])
                if check[self.theta[w]] >= at - 1e-7 * max(1.0, abs(at)):
                    continue
            cols: list[int] = [int(self.theta[w])]
            vals: list[float] = [1.0]
            rhs = ev.cost - float((ev.d_cap * cap).sum() + (ev.d_gangs * gangs).sum())
            nz = np.flatnonzero(np.abs(ev.d_cap) > 1e-9)
            cols += self.cap_col.ravel()[nz].tolist()
            vals += (-ev.d_cap.ravel()[nz]).tolist()
            for (c, m, p), gc in self.gang_cols.items():
                g = ev.d_gangs[c, m, p]
                if abs(g) > 1e-9:
                    cols += gc
                    vals += [-g * self.p.classes[c].gang_size] * len(gc)
            for k in np.flatnonzero(np.abs(ev.d_z) > 1e-9):
                if self.z_col[k, w] >= 0:
                    cols.append(int(self.z_col[k, w]))
                    vals.append(-float(ev.d_z[k]))
                    rhs -= float(ev.d_z[k] * z[k, w])
            lower.append(rhs)
            index += cols
            value += vals
            starts.append(len(index))
        if lower:
            self.master.add_rows(
                np.array(lower),
                np.full(len(lower), INF),
                np.array(starts[:-1], dtype=np.int32),
                np.array(index, dtype=np.int32),
                np.array(value),
            )
            self.cuts += len(lower)
        return len(lower)

    def set_integer(self, cols: npt.NDArray[np.int32], on: bool) -> None:
        """Make master columns ``cols`` integer (``on``) or continuous."""
        self.master.set_integer(cols, on)

    def floor_gangs(self, x: Arr) -> Arr:
        """``x`` with whole gang blocks set to fit the capacity its other decisions give.

        Gang blocks cost nothing and only enable use, so given the purchases and commitments the
        best choice for one gang class per location is ``floor(capacity / gang size)``; several
        classes sharing a location keep the master's whole blocks first, then fill in order.
        """
        y = x.copy()
        for idx, val, rhs, gidx, gsize in self._fit:
            room = max(0.0, rhs - float(val @ y[idx]))
            n = np.zeros(len(gidx))
            for i, (j, g) in enumerate(zip(gidx, gsize, strict=True)):
                n[i] = min(np.floor(x[j] + 1e-6), np.floor(room / g + 1e-9))
                room -= n[i] * g
            for i, g in enumerate(gsize):
                extra = np.floor(room / g + 1e-9)
                n[i] += extra
                room -= extra * g
            y[gidx] = n
        return y

    def run_master(self, seconds: float, settings: SolverSettings, mip_gap: float) -> bool:
        """Solve the master for at most ``seconds``; true when it left a usable point."""
        h = self.master
        h.configure(max(0.5, seconds), settings.threads, mip_gap, seed=0)
        status = h.run()
        return h.has_solution() and status in ("optimal", "time_limit", "interrupted")

    def _raw(self, status: str, best: Incumbent | None, lb: float, it: int, runtime: float) -> RawSolution:
        pr, rl = self.p, self.recourse
        W, C, M, T = self.shape
        R = len(pr.recourse)
        alloc, rec = np.zeros((W, C, M, T)), np.zeros((W, C, R, T))
        short, lost, backlog, excess = (np.zeros((W, C, T)) for _ in range(4))
        buys: dict[tuple[int, int, int], int] = {}
        commits: dict[tuple[int, int], int] = {}
        gangs: dict[tuple[int, int, int, int], int] = {}
        missed: dict[tuple[int, int], bool] = {}
        if best is not None:
            x, ci = best.x, self.col_index
            for w, ev in enumerate(best.evals):
                v = np.where(np.abs(ev.x) < TOL, 0.0, ev.x)
                for (c, m, p), j in rl.a_col.items():
                    alloc[w, c, m, p] = v[j]
                for (c, o, p), j in rl.r_col.items():
                    rec[w, c, o, p] = v[j]
                for arr, cols in ((short, rl.sh_col), (lost, rl.lo_col), (backlog, rl.bl_col), (excess, rl.ex_col)):
                    for (c, p), j in cols.items():
                        arr[w, c, p] = v[j]
            for (o, s, q), var in self.model.buy.items():
                n = round(x[ci[var.name]])
                if n:
                    buys[o, s, q] = n * pr.purchases[o].lot_size
            for (k, q), var in self.model.com.items():
                n = round(x[ci[var.name]])
                if n:
                    commits[k, q] = n
            for key, var in self.model.gang.items():
                n = round(x[ci[var.name]])
                if n:
                    gangs[key] = n
            missed = {k: bool(x[ci[var.name]] > 0.5) for k, var in self.model.z.items()}
        sub = self.recourse
        return RawSolution(
            status=status,
            objective=float("nan") if best is None else best.cost,
            runtime_s=runtime,
            variables=self.n + W * (1 + sub.n_cols),
            constraints=self.arrays.num_rows + self.cuts + W * sub.n_rows,
            integers=len(self.int_cols),
            backend="HiGHS-decomposition",
            buys=buys,
            commits=commits,
            gangs=gangs,
            alloc=alloc,
            rec=rec,
            short=short,
            excess=excess,
            lost=lost,
            backlog=backlog,
            missed=missed,
            method="decomposition",
            bound=None if lb == -INF else lb,
            gap=None if best is None else max(0.0, (best.cost - lb) / max(1.0, abs(best.cost))),
            iterations=it,
        )


def _quantile(values: Arr, prob: Arr, budget: float) -> float:
    """The largest value left after dropping the largest values of total probability <= ``budget``."""
    order = np.argsort(-values, kind="stable")
    skipped = 0.0
    for w in order:
        if skipped + prob[w] > budget + 1e-9:
            return float(values[w])
        skipped += prob[w]
    return 0.0


def scenario_groups(problem: Problem, groups: int) -> list[list[int]]:
    """Split scenarios into ``groups`` groups of similar size, ordered by total demand."""
    W = len(problem.scenario_names)
    k = max(1, min(groups, W))
    order = np.argsort(problem.demand.sum(axis=(1, 2)), kind="stable")
    return [sorted(int(w) for w in part) for part in np.array_split(order, k)]
