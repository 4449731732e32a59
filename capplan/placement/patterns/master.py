"""Master problem: choose how many nodes of each type get each pattern (column generation + MIP).

LP: maximise the placed GPUs ``sum_j value_j x_j`` subject to ``sum_{j of type t} x_j <= nodes_t``
and ``sum_j copies_{s,j} x_j <= replicas_s``, ``x >= 0``. Columns (patterns) are added by
:class:`~capplan.placement.patterns.pricing.Pricer` until none improves or time runs out; each LP
is re-solved from the last basis (:class:`~capplan.lp.highs.ColumnLP`), and patterns are
priced at duals smoothed towards the best seen so far (Wentges), which cuts the iterations of the
slow tail. Integer counts: the LP solution rounded down; the nodes and replicas the rounding left
free are *repaired* (integer-feasible columns for them, built node after node within the replicas
still free, then the integer master over that remainder alone, by HiGHS); then large-neighbourhood
search: a random set of used nodes is freed and repaired the same way, starting from the freed
patterns, and kept when it places more. (HiGHS's MIP over all the columns at once stalls a few GPUs
below the LP on the Alibaba trace; the remainders are small enough to solve exactly.)
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from capplan.lp.highs import ColumnLP
from capplan.placement.patterns.pricing import Pattern, Pricer, homogeneous
from capplan.placement.patterns.shapes import NodeType, Shape

log = logging.getLogger(__name__)

_SMOOTH = 0.5  # weight of the stability centre in the pricing duals
_LNS_NODES = (0.03, 20, 60)  # share of the nodes a neighbourhood frees, at least, at most
_LNS_SECONDS = 0.4  # time limit of one neighbourhood's integer program
_IDLE_ROUNDS = 2  # rounds without an improving pattern after which a node type is priced only when needed


@dataclass
class MasterResult:
    """Chosen pattern counts and statistics."""

    use: list[tuple[Pattern, int]]
    lp_value: float
    mip_value: float
    columns: int
    iterations: int
    converged: bool
    lns_steps: int = 0


class _Columns:
    """The master's columns, passed to the LP as they are found, with a dense copy of the matrix."""

    def __init__(self, types: list[NodeType], rows: int, lp: ColumnLP) -> None:
        self.types, self.lp = types, lp
        self.nt, self.rows = len(types), rows
        self.cols: list[Pattern] = []
        self.seen: set[tuple[int, tuple[tuple[int, tuple[int, ...]], ...]]] = set()
        self._mat = np.zeros((rows, 256))

    def add(self, pats: list[Pattern]) -> int:
        """Add the patterns that are not columns yet; return how many were added."""
        new = []
        for pat in pats:
            key = (pat.type, pat.items)
            if key not in self.seen:
                self.seen.add(key)
                new.append(pat)
        starts: list[int] = []
        index: list[int] = []
        value: list[float] = []
        for pat in new:
            starts.append(len(index))
            counts = pat.counts()
            index += [pat.type] + [self.nt + s for s in counts]
            value += [1.0] + [float(k) for k in counts.values()]
        self.lp.add_columns(np.array([p.value for p in new]),
                            np.array([float(len(self.types[p.type].nodes)) for p in new]),
                            np.array(starts, dtype=np.int32), np.array(index, dtype=np.int32), np.array(value))
        j0 = len(self.cols)
        if j0 + len(new) > self._mat.shape[1]:
            grown = np.zeros((self.rows, 2 * (j0 + len(new))))
            grown[:, :j0] = self._mat[:, :j0]
            self._mat = grown
        for k, pat in enumerate(new):
            self._mat[pat.type, j0 + k] = 1.0
            for s, c in pat.counts().items():
                self._mat[self.nt + s, j0 + k] = c
        self.cols += new
        return len(new)

    def values(self) -> npt.NDArray[np.float64]:
        """Placed GPUs per column."""
        return np.array([p.value for p in self.cols])

    def matrix(self) -> npt.NDArray[np.float64]:
        """The constraint matrix (type rows, then shape rows), dense (a view)."""
        return self._mat[:, :len(self.cols)]


def _generate(lp: ColumnLP, cols: _Columns, pricer: Pricer, value: npt.NDArray[np.float64],
              rhs: npt.NDArray[np.float64], deadline: float
              ) -> tuple[float, npt.NDArray[np.float64], int, bool, npt.NDArray[np.float64]]:
    """Column generation until no pattern improves or ``deadline``: LP value, solution, iterations,
    converged, and the first LP's solution."""
    nt = len(cols.types)
    # The first LP runs whatever the time left: its solution rounded down is the plan's backbone.
    res = lp.solve(max(60.0, deadline - time.perf_counter()))
    if res.status != "optimal":
        return 0.0, np.zeros(0), 0, False, np.zeros(0)
    first = res.x
    centre, best = res.duals, np.inf
    it, converged = 0, False
    # Partial pricing: a node type whose pattern improved nothing in the last rounds is skipped (its
    # last gain stands in the Lagrangian) until a round finds nothing; convergence needs a full round.
    idle = np.zeros(nt, dtype=int)
    gain = np.zeros(nt)
    while time.perf_counter() < deadline:
        it += 1
        weight, full = _SMOOTH, it % 10 == 0  # a full round now and then refreshes the skipped types
        while True:
            pi = weight * centre + (1 - weight) * res.duals
            pricer.start()
            profit = value - pi[nt:]
            found = []
            for t in range(nt):
                if not full and idle[t] >= _IDLE_ROUNDS:
                    continue
                pat = pricer.price(t, profit)
                if pat is None:
                    gain[t] = 0.0
                    idle[t] += 1
                    continue
                gain[t] = max(0.0, sum(profit[s] for s, _ in pat.items) - pi[t]) * rhs[t]
                if sum(value[s] - res.duals[nt + s] for s, _ in pat.items) - res.duals[t] > 1e-6:
                    found.append(pat)
                    idle[t] = 0
                else:
                    idle[t] += 1
            lagrange = float(pi @ rhs) + float(gain.sum())
            if lagrange < best:
                best, centre = lagrange, pi
            if found:
                break
            if weight > 0.0:
                weight = 0.0  # nothing improves at the smoothed duals: price at the LP's own
            elif not full:
                full = True  # nor among the types priced: price them all before stopping
            else:
                break
        if cols.add(found) == 0:
            converged = True
            break
        nxt = lp.solve(max(0.01, deadline - time.perf_counter()))
        if nxt.status != "optimal":
            break
        res = nxt
        log.debug("column generation: iteration %d, %d columns, LP %.2f", it, len(cols.cols), res.value)
    return res.value, res.x, it, converged, first


def _sequential(cols: _Columns, pricer: Pricer, res: npt.NDArray[np.float64], profit: npt.NDArray[np.float64],
                deadline: float) -> None:
    """Add integer-feasible columns for the residual ``res``: node after node, the best pattern within
    the replicas still free (a pattern is repeated on as many nodes as the replicas allow)."""
    nt = cols.nt
    caps = res.copy()
    pricer.start()
    for t in sorted(range(nt), key=lambda t: -len(cols.types[t].slots)):
        while caps[t] >= 1 and time.perf_counter() < deadline:
            pricer.start([max(0, round(float(c))) for c in caps[nt:]], same_values=True)
            pat = pricer.price(t, profit)
            if pat is None:
                break
            cols.add([pat])
            counts = pat.counts()
            k = int(min([caps[t]] + [caps[nt + s] // c for s, c in counts.items()]))
            k = max(k, 1)
            caps[t] -= k
            for s, c in counts.items():
                caps[nt + s] -= k * c
    pricer.start()


def _repair(lp: ColumnLP, cols: _Columns, pricer: Pricer, rhs: npt.NDArray[np.float64], keep: npt.NDArray[np.float64],
            start: npt.NDArray[np.float64], value: npt.NDArray[np.float64], deadline: float,
            seconds: float = _LNS_SECONDS) -> npt.NDArray[np.float64] | None:
    """The best integer use of what ``keep`` leaves free (nodes and replicas), or None if none found.

    Integer-feasible columns for the residual are added first (:func:`_sequential`); the integer
    master over the residual then runs for at most ``seconds``, from ``start`` (counts that fit
    the residual).
    """
    res = rhs - cols.matrix()[:, :keep.size] @ keep
    _sequential(cols, pricer, res, value, deadline)
    lp.set_rhs(res)
    n = len(cols.cols)
    first = np.zeros(n)
    first[:start.size] = start
    out = lp.solve_integer(max(0.02, min(seconds, deadline - time.perf_counter())), 1e-6, start=first)
    lp.set_rhs(rhs)
    if out.status == "failed":
        return None
    y = np.round(out.x)
    full = np.zeros(n)
    full[:keep.size] = keep
    return full + y if np.all(cols.matrix() @ (full + y) <= rhs + 1e-6) else None


def _improve(lp: ColumnLP, cols: _Columns, pricer: Pricer, rhs: npt.NDArray[np.float64], x: npt.NDArray[np.float64],
             value: npt.NDArray[np.float64], deadline: float, seed: int, target: float
             ) -> tuple[npt.NDArray[np.float64], int]:
    """Large-neighbourhood search on the integer pattern counts ``x`` until ``deadline``.

    Each step frees a random set of used nodes (drawn by pattern count) and repairs
    (:func:`_repair`) starting from the freed patterns themselves: the result is never worse, and
    is kept when it places more. Stops early when the counts place ``target`` (the LP optimum).
    """
    rng = np.random.default_rng(seed)
    nodes = int(rhs[:cols.nt].sum())
    share, least, most = _LNS_NODES
    size = int(min(most, max(least, share * nodes)))
    steps = 0
    while time.perf_counter() + 0.05 < deadline and float(cols.values()[:x.size] @ x) < target - 1e-6:
        used = np.flatnonzero(x > 0.5)
        if used.size == 0:
            break
        steps += 1
        freed = np.zeros_like(x)
        picks = rng.choice(used, size=min(size, int(x[used].sum())), p=x[used] / x[used].sum())
        np.add.at(freed, picks, 1.0)
        freed = np.minimum(freed, x)
        y = _repair(lp, cols, pricer, rhs, x - freed, freed, value, deadline)
        if y is not None:
            vals = cols.values()
            xx = np.zeros(len(vals))
            xx[:x.size] = x
            x = y if float(vals @ y) > float(vals @ xx) + 1e-9 else xx
    return x, steps


def solve_master(types: list[NodeType], shapes: list[Shape], pricer: Pricer, deadline: float,
                 end: float, mip_share: float = 0.6, seed: int = 0) -> MasterResult:
    """Column generation until ``deadline`` (or convergence), then integer pattern counts for
    ``mip_share`` of the time left until ``end``: the LP solution rounded down, its rest repaired
    (:func:`_repair`), then large-neighbourhood search (:func:`_improve`)."""
    nt, ns = len(types), len(shapes)
    rhs = np.array([len(t.nodes) for t in types] + [len(s.replicas) for s in shapes], dtype=float)
    value = np.array([s.value for s in shapes])
    lp = ColumnLP(rhs, seed=seed)
    cols = _Columns(types, nt + ns, lp)
    cols.add(homogeneous(types, shapes))
    if not cols.cols:
        return MasterResult([], 0.0, 0.0, 0, 0, True)
    lp_value, lp_x, it, converged, first_x = _generate(lp, cols, pricer, value, rhs, deadline)
    vals = cols.values()
    # The LP solution rounded down is feasible (the matrix is >= 0), and so is the first LP's: the better
    # one is where the integer counts start (with little time a later LP may round down to less).
    x = np.zeros(len(vals))
    x[:lp_x.size] = np.floor(lp_x + 1e-9)
    x0 = np.zeros(len(vals))
    x0[:first_x.size] = np.floor(first_x + 1e-9)
    if float(vals @ x0) > float(vals @ x):
        x = x0
    now = time.perf_counter()
    stop = now + max(0.05, mip_share * (end - now))
    # The fractional part: its nodes and replicas are repaired like a neighbourhood of the search.
    y = _repair(lp, cols, pricer, rhs, x, np.zeros(0), value, stop, 0.5 * (stop - now))
    if y is not None:
        x = y
    x, steps = _improve(lp, cols, pricer, rhs, x, value, stop, seed, lp_value if converged else np.inf)
    vals = cols.values()
    use = [(cols.cols[j], int(x[j])) for j in np.flatnonzero(x > 0.5)]
    return MasterResult(use, lp_value, float(vals @ x), len(vals), it, converged, steps)
