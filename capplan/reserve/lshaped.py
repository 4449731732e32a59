"""The search of the decomposition: a stabilised LP phase, then integer masters with repair.

1. **LP phase** (in-out stabilisation): the master LP gives a point ``x_m`` and a lower bound;
   the scenario LPs are solved at ``x_s = a x_m + (1 - a) x_core`` where ``x_core`` is the best
   point evaluated so far. Cuts at ``x_s`` are valid everywhere; when none of them cuts off
   ``x_m`` the step falls back to ``a = 1`` (plain Kelley). This damps the zig-zag of
   first-stage purchases that made the plain L-shaped method need ~60 rounds.
2. **Dive and RENS**: whole-gang blocks are rounded period by period in the master LP and fixed
   (:meth:`Search.dive`), then the integer master is solved inside the floor/ceil box of the
   resulting point. Each candidate plan is *repaired* before its exact evaluation: gang blocks
   set to ``floor(capacity / gang)`` (:meth:`Decomposition.floor_gangs`, optimal for given
   purchases) and the chance indicators re-chosen for the fixed plan (:func:`choose_missed`).
   LP, dive and RENS repeat with the new cuts while the plan improves (``CYCLES``).
3. **Local search**: the lots of one (site, model) at a time are re-optimised in a small integer
   master with everything else fixed at the incumbent (:meth:`Search.local_search`).
4. **Full integer master** (every integer column integer) for at most ``FULL_MASTER_SCENARIOS``
   scenarios: it proves optimality on small problems. On large scenario sets the master has
   thousands of dense, badly scaled cuts and HiGHS's root cut loop ignores interrupts for tens
   of seconds, so the bound stays the LP bound there.

The time limit covers everything: each HiGHS call gets the time that is left and an interrupt
callback of the master (:class:`capplan.lp.highs.HighsSolver`) stops it at the deadline.
:func:`solve_decomposition` builds the decomposition and runs the search.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace

import numpy as np

from capplan.lp.highs import HighsSolver
from capplan.reserve.benders import INF, Arr, Decomposition, Incumbent
from capplan.reserve.problem import Problem
from capplan.reserve.recourse import Evaluation
from capplan.reserve.solver import TOL, RawSolution, SolverSettings

log = logging.getLogger(__name__)
log.addHandler(logging.NullHandler())

#: largest share of the time limit for the LP phase
LP_SHARE = 0.45
#: in-out step towards the master point
ALPHA = 0.5
#: LP phase stops when its own gap is below this (the integer phase refines further)
LP_GAP = 2e-4
#: LP / dive / RENS rounds after the first (each uses the cuts of the plans before)
CYCLES = 4
#: time limit of one local-search sub-MIP (s)
LOCAL_SECONDS = 5.0
#: largest scenario count for which the full integer master is solved after the rounding rounds
FULL_MASTER_SCENARIOS = 50


def choose_missed(prob: Arr, saving: Arr, budget: float) -> Arr:
    """Scenarios allowed to miss a chance-constrained tier (1) for a fixed first stage.

    ``saving[w]`` is the recourse cost avoided when scenario ``w`` may fall short; scenarios are
    taken by saving per unit of probability while their total probability stays within ``budget``
    (exact for equal probabilities, a feasible greedy choice otherwise).
    """
    z = np.zeros(len(prob))
    used = 0.0
    for w in np.argsort(-saving / prob, kind="stable"):
        if saving[w] <= 0:
            break
        if used + prob[w] <= budget + 1e-9:
            z[w] = 1.0
            used += prob[w]
    return z


class Search:
    """One run of the decomposition's search (see the module docstring)."""

    def __init__(self, dec: Decomposition, settings: SolverSettings) -> None:
        self.d = dec
        self.s = settings
        self.t0 = time.perf_counter()
        self.prob = np.array(dec.p.probabilities)
        self.lb = -INF
        self.best: Incumbent | None = None
        self.it = 0
        tiers = dec.p.tiers
        chance = [k for k in range(len(tiers)) if (dec.z_col[k] >= 0).any()]
        self._gang_bounds: tuple[Arr, Arr] | None = None
        self.budget = min((1.0 - tiers[k].service_level for k in chance), default=0.0)

    def left(self) -> float:
        """Seconds left of the time limit."""
        return self.s.time_limit - (time.perf_counter() - self.t0)

    def gap_ok(self) -> bool:
        """True when the incumbent is proven within the relative gap."""
        b = self.best
        return b is not None and b.cost - self.lb <= self.s.gap * max(1.0, abs(b.cost))

    def _total(self, x: Arr, evals: list[Evaluation]) -> float:
        return self.d.first_stage_cost(x) + float(self.prob @ np.array([e.cost for e in evals]))

    def _master(self, seconds: float, mip_gap: float) -> Arr | None:
        if not self.d.run_master(seconds, self.s, mip_gap):
            return None
        return self.d.master.col_values()

    # --------------------------------------------------------------------------- LP phase
    def lp_phase(self, share: float = LP_SHARE) -> Arr | None:
        """Stabilised Kelley on the master LP; returns the best LP point evaluated."""
        d = self.d
        d.set_integer(d.int_cols, False)
        d.master.set_presolve(False)
        core: Arr | None = None
        ub, alpha = INF, ALPHA
        stop = self.left() - share * self.left()
        while self.left() > stop:
            self.it += 1
            xm = self._master(self.left(), self.s.gap)
            if xm is None:
                break
            self.lb = max(self.lb, d.master.objective())
            xs = xm if core is None else alpha * xm + (1 - alpha) * core
            evals = d.evaluate(xs)
            val = self._total(xs, evals)
            if val < ub:
                ub, core = val, xs
            added = d.add_cuts(xs, evals, xm)
            log.debug("lp %d: %.1fs lb %.6g ub %.6g a %.2f cuts +%d", self.it, self.elapsed(), self.lb, ub,
                      alpha, added)
            if ub - self.lb <= LP_GAP * max(1.0, abs(ub)):
                break
            if not added:
                if alpha == 1.0:
                    break
                alpha = 1.0
            else:
                alpha = ALPHA
        return core

    def elapsed(self) -> float:
        """Seconds since the start."""
        return time.perf_counter() - self.t0

    # ---------------------------------------------------------------------- evaluation
    def consider(self, x: Arr, check: Arr | None) -> int:
        """Repair ``x`` (whole gangs, chance indicators), evaluate it, keep it if best; add cuts."""
        d = self.d
        x = d.floor_gangs(x)
        if len(d.z_all):
            x0, x1 = x.copy(), x.copy()
            x0[d.z_all], x1[d.z_all] = 0.0, 1.0
            e0, e1 = d.evaluate(x0), d.evaluate(x1)
            c0, c1 = np.array([e.cost for e in e0]), np.array([e.cost for e in e1])
            zw = choose_missed(self.prob, c0 - c1, self.budget)
            for k in range(d.z_col.shape[0]):
                has = d.z_col[k] >= 0
                x[d.z_col[k, has]] = zw[has]
            evals = [e1[w] if zw[w] else e0[w] for w in range(len(zw))]
            added = d.add_cuts(x0, e0, check) + d.add_cuts(x1, e1, check)
        else:
            evals = d.evaluate(x)
            added = d.add_cuts(x, evals, check)
        cost = self._total(x, evals)
        if self.best is None or cost < self.best.cost - 1e-9 * abs(cost):
            self.best = Incumbent(x.copy(), cost, evals)
        return added

    # ------------------------------------------------------------------------ MIP phase
    def mip_step(self, box: Arr | None, widen: float = 0.0) -> bool:
        """Solve the integer master (inside ``box``'s floor/ceil box when given); evaluate its plan."""
        d, h = self.d, self.d.master
        if self.left() <= 0.3 and self.best is not None:
            return False
        self.it += 1
        ic = d.plan_int
        lo0, up0 = h.col_bounds(ic)
        if box is not None:
            lo = np.maximum(lo0, np.floor(box[ic] + 1e-6))
            up = np.minimum(up0, np.ceil(box[ic] - 1e-6) + widen)
            h.set_col_bounds(ic, lo, up)
        xm = self._master(self.left(), self.s.gap / 2)
        if box is not None:
            h.set_col_bounds(ic, lo0, up0)
        elif xm is not None:
            self.lb = max(self.lb, h.mip_bound())
        if xm is None:
            log.debug("%s %d: %.1fs no plan (widen %g)", "rens" if box is not None else "mip", self.it,
                      self.elapsed(), widen)
            return False
        x = xm.copy()
        x[d.int_cols] = np.round(x[d.int_cols])
        added = self.consider(x, xm)
        log.debug("%s %d: %.1fs lb %.6g ub %.6g cuts +%d", "rens" if box is not None else "mip", self.it,
                  self.elapsed(), self.lb, self.best.cost if self.best else INF, added)
        return added > 0

    def dive(self, x: Arr) -> Arr | None:
        """Round whole-gang blocks up (else down) in the master LP and fix them; the LP point after.

        Whole gangs are what makes rounding the LP point hard: rounding purchases within their
        floor/ceil box rarely leaves room for the gangs the LP spread fractionally over sites.
        Fixing the gangs first and re-solving the LP moves purchases to support them, so the
        floor/ceil box of the new point usually contains a plan (:meth:`mip_step`).
        """
        d, h = self.d, self.d.master
        gi = d.gang_int
        if not len(gi):
            return x
        self._gang_bounds = h.col_bounds(gi)
        lo0, up0 = self._gang_bounds
        d.set_integer(d.int_cols, False)
        h.set_presolve(False)
        xm: Arr | None = x
        for cols in d.gang_by_period:
            assert xm is not None
            k = np.searchsorted(gi, cols)
            for rnd in (np.ceil, np.floor):
                v = np.clip(rnd(xm[cols] - 1e-6 if rnd is np.ceil else xm[cols] + 1e-6), lo0[k], up0[k])
                h.set_col_bounds(cols, v, v)
                trial = self._master(self.left(), self.s.gap)
                if trial is not None:
                    xm = trial
                    break
                h.set_col_bounds(cols, lo0[k], up0[k])
            if self.left() < 0.5 * self.s.time_limit * (1 - LP_SHARE):
                return None
        d.set_integer(d.plan_int, True)
        h.set_presolve(True)
        log.debug("dive: %.1fs %s", self.elapsed(), "ok" if xm is not None else "no LP point")
        return xm

    def restore_gangs(self) -> None:
        """Undo :meth:`dive`'s bounds; all integer columns integer again."""
        d = self.d
        if self._gang_bounds is not None:
            d.master.set_col_bounds(d.gang_int, *self._gang_bounds)
            self._gang_bounds = None
        d.set_integer(d.int_cols, True)

    def local_search(self) -> None:
        """Re-optimise the lots of one (site, model) at a time with everything else fixed.

        Each neighbourhood is a small integer master (the other purchases, commitments and chance
        indicators fixed at the incumbent; gang blocks free); its plan is repaired and evaluated
        exactly like every other candidate. Sweeps repeat while they improve and time is left.
        """
        d, h = self.d, self.d.master
        ic = d.plan_int
        lo0, up0 = h.col_bounds(ic)
        improved = True
        while improved and self.best is not None:
            improved = False
            for cols in d.lot_groups:
                if self.gap_ok() or self.left() < 0.1 * self.s.time_limit + 1.0:
                    return
                b = self.best
                assert b is not None
                free = np.isin(ic, cols)
                lo = np.where(free, lo0, np.round(b.x[ic]))
                up = np.where(free, up0, np.round(b.x[ic]))
                h.set_col_bounds(ic, lo, up)
                self.it += 1
                xm = self._master(min(self.left(), LOCAL_SECONDS), self.s.gap / 2)
                h.set_col_bounds(ic, lo0, up0)
                if xm is None:
                    continue
                x = xm.copy()
                x[d.int_cols] = np.round(x[d.int_cols])
                if np.array_equal(x[ic], np.round(b.x[ic])):
                    continue
                before = b.cost
                self.consider(x, xm)
                log.debug("local %d: %.1fs ub %.6g", self.it, self.elapsed(), self.best.cost if self.best else INF)
                if self.best is not None and self.best.cost < before - 1e-7 * abs(before):
                    improved = True

    def run(self) -> RawSolution:
        """All phases; the incumbent and the best bound as a :class:`RawSolution`."""
        d = self.d
        HighsSolver.reset_threads()  # earlier solves may have fixed another thread count
        d.master.deadline = self.t0 + self.s.time_limit
        x_lp = self.lp_phase()
        d.set_integer(d.int_cols, True)
        d.master.set_presolve(True)
        if x_lp is not None:
            box = self.dive(x_lp)
            if box is not None:
                self.mip_step(box)
            self.restore_gangs()
            if self.best is None:
                self.mip_step(x_lp)
        for _ in range(CYCLES):
            if self.gap_ok() or self.left() < 0.25 * self.s.time_limit:
                break
            before = self.best.cost if self.best else INF
            x_lp = self.lp_phase(share=0.5)
            d.set_integer(d.int_cols, True)
            d.master.set_presolve(True)
            if x_lp is None:
                break
            box = self.dive(x_lp)
            if box is not None:
                self.mip_step(box)
            self.restore_gangs()
            if not (self.best and self.best.cost < before - 1e-6 * abs(before)):
                break
        if not self.gap_ok():
            self.local_search()
        # the full master: exact, but its root cut loop ignores interrupts for tens of seconds on
        # large scenario sets (dense, badly scaled cuts), so it only runs where it stays in time
        full = len(d.p.scenario_names) <= FULL_MASTER_SCENARIOS
        while full and not self.gap_ok() and self.left() > 0.3:
            if not self.mip_step(None):
                break
        best = self.best
        if best is None:
            return d._raw("no_solution", None, self.lb, self.it, self.elapsed())
        self.lb = min(self.lb, best.cost)
        gap = max(0.0, (best.cost - self.lb) / max(1.0, abs(best.cost)))
        status = "optimal" if gap <= self.s.gap + 1e-9 else "feasible"
        ex = list(d.recourse.ex_col.values())
        if ex and any(e.x[ex].max(initial=0.0) > TOL for e in best.evals):
            status = "infeasible"  # the plan needs unmet guaranteed demand: let the caller rank
        return d._raw(status, best, self.lb, self.it, self.elapsed())


def solve_decomposition(problem: Problem, settings: SolverSettings, groups: int = 8) -> RawSolution:
    """Solve ``problem`` by L-shaped decomposition within ``settings.time_limit``.

    Building the master (``groups`` Jensen groups, see :class:`Decomposition`) counts against the
    time limit; the search gets the time that is left.
    """
    t0 = time.perf_counter()
    dec = Decomposition(problem, groups)
    left = max(1.0, settings.time_limit - (time.perf_counter() - t0))
    raw = Search(dec, replace(settings, time_limit=left)).run()
    raw.runtime_s = time.perf_counter() - t0
    return raw
