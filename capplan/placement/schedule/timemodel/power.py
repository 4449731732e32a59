"""Power of the per-GPU time model: which intervals draw a GPU's TDP when MIG slices and shares share it.

A MIG slice or share makes its GPU draw its TDP once however many run on it: per GPU, the union of their
intervals (:func:`power_uses`), exact on the nodes under a budget that could bind (each GPU's busy time
cut into *pieces*, one per use), and the hint of those pieces (:func:`hint_power`). The uses of one GPU
(:class:`GpuUse`) are built by :class:`~capplan.placement.schedule.timemodel.gpu.GpuLevel`.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ortools.sat.python import cp_model, cp_model_helper

if TYPE_CHECKING:
    from capplan.placement.schedule.timemodel.gpu import GpuLevel


@dataclass(frozen=True)
class GpuUse:
    """One use of one GPU: a time interval, its memory-slice interval (MIG and whole GPUs on MIG models)."""

    iv: cp_model.IntervalVar
    y: cp_model.IntervalVar | None
    kind: str  # whole, mig, share
    lo: int  # the time window it may occupy
    hi: int
    fixed: bool
    fraction: int = 0
    gpu_mem: int = 0
    profile: str = ""
    compute: int = 0
    max_count: int = 0
    tenant: str = ""
    tenant_isolated: bool = False
    lit: cp_model.IntVar | None = None  # presence (None: fixed)
    begin: cp_model.LinearExprT = 0  # start and end (variables of the job's start, or constants when fixed)
    finish: cp_model.LinearExprT = 0


def meet(a: GpuUse, b: GpuUse) -> bool:
    return not (a.fixed and b.fixed) and a.lo < b.hi and b.lo < a.hi


def may_cover(a: GpuUse, b: GpuUse) -> bool:
    """Use ``a`` may run over the start of use ``b`` on one GPU (see :func:`power_uses`): their
    windows meet and the kinds may run at once (a MIG instance and a share never do)."""
    kinds = {a.kind, b.kind}
    if "fixed" in kinds:  # a merged span of fixed slices and shares
        return a.lo < b.hi and b.lo < a.hi
    return len(kinds) == 1 and meet(a, b)


@dataclass(frozen=True)
class Piece:
    """The piece of use ``use`` of one GPU drawing its TDP (see :func:`power_uses`): its start ``t``,
    size, whether it starts after the use (``gap``) and, per earlier use that may cover the gap, a literal."""

    use: int
    t: cp_model.IntVar
    size: cp_model.IntVar
    gap: cp_model.IntVar
    by: dict[int, cp_model.IntVar]


def fixed_spans(items: list[GpuUse]) -> list[tuple[int, int]]:
    """The union of the fixed MIG slices' and shares' time on one GPU, as disjoint spans."""
    merged: list[list[int]] = []
    for a, b in sorted((it.lo, it.hi) for it in items if it.fixed and it.kind != "whole"):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return [(a, b) for a, b in merged]

def partial_uses(level: GpuLevel) -> dict[int, int]:
    """Per node with free MIG slices or shares: how many intervals :func:`power_uses` gives it at most
    (free uses and merged fixed spans)."""
    out: dict[int, int] = defaultdict(int)
    for (n, _), items in level.items.items():
        free = sum(1 for it in items if not it.fixed and it.kind != "whole")
        if free:
            out[n] += free + len(fixed_spans(items))
    return dict(out)

def power_uses(level: GpuLevel, exact: set[int]) -> list[tuple[int, cp_model.IntervalVar, bool]]:
    """Intervals that each draw one TDP of their node's GPU model, for the power budgets:
    ``(node, interval, stricter)``; ``stricter`` marks a free MIG slice or share charged a full TDP of
    its own, more than the rule when it shares its GPU with another.

    A MIG slice or share makes its GPU draw its TDP once however many run on it: per GPU, the union
    of their intervals. Fixed ones are merged per GPU. On the nodes in ``exact`` (those under a budget
    that could bind), each GPU's union is cut into *pieces*, one per use ``j``: ``[t_j, end_j)`` with
    ``start_j <= t_j``, where ``t_j > start_j`` only when ``[start_j, t_j)`` lies inside one earlier use
    ``i`` (``start_i <= start_j``, ties broken by order, ``end_i >= t_j``). Every instant of the union
    then lies in the piece of the earliest use that covers it, so the pieces draw at least the rule's
    power; and the rule's own split (each use from the latest end of the earlier uses) is one choice
    of pieces, so the model allows every schedule the rule does. Elsewhere, each free use draws a TDP.
    """
    m = level.m
    out: list[tuple[int, cp_model.IntervalVar, bool]] = []
    level.pieces = []
    for (n, g), items in sorted(level.items.items()):
        spans = fixed_spans(items)
        free = [it for it in items if not it.fixed and it.kind != "whole"]
        if n not in exact or not free:
            out += [(n, m.new_fixed_size_interval_var(a, b - a, f"pw{n}_{g}_{a}"), False) for a, b in spans]
            out += [(n, it.iv, True) for it in free]
            continue
        uses = [GpuUse(m.new_fixed_size_interval_var(a, b - a, f"pw{n}_{g}_{a}"), None, "fixed", a, b, True,
                      begin=a, finish=b) for a, b in spans] + free
        group: list[Piece] = []
        level.pieces.append((uses, group))
        for j, it in enumerate(uses):
            cover = [i for i, other in enumerate(uses) if i != j and may_cover(other, it)]
            if not cover:
                out.append((n, it.iv, False))
                continue
            on = [it.lit] if it.lit is not None else []
            t = m.new_int_var(it.lo, it.hi, f"pt{n}_{g}_{j}")
            size = m.new_int_var(0, it.hi - it.lo, f"pz{n}_{g}_{j}")
            piece = (m.new_optional_interval_var(t, size, it.finish, on[0], f"pc{n}_{g}_{j}") if on
                     else m.new_interval_var(t, size, it.finish, f"pc{n}_{g}_{j}"))
            m.add(t >= it.begin).only_enforce_if(on)
            gap = m.new_bool_var(f"pg{n}_{g}_{j}")
            m.add(t == it.begin).only_enforce_if([*on, ~gap])
            by = []
            group.append(Piece(j, t, size, gap, {}))
            for i in cover:
                other = uses[i]
                a = group[-1].by[i] = m.new_bool_var(f"pa{n}_{g}_{j}_{i}")
                by.append(a)
                if other.lit is not None:
                    m.add_implication(a, other.lit)
                m.add(other.begin + (1 if i > j else 0) <= it.begin).only_enforce_if(a)
                m.add(other.finish >= t).only_enforce_if(a)
            m.add_bool_or(by).only_enforce_if(gap)
            out.append((n, piece, False))
    return out

def hint_power(level: GpuLevel) -> None:
    """Complete the model's hint (starts, GPUs) with the power pieces of :func:`power_uses`: the rule's
    own split of each GPU's busy time (each use from the latest end of the uses before it)."""
    hint = level.m.proto.solution_hint
    known = dict(zip(hint.vars, hint.values, strict=True))

    def value(e: cp_model.LinearExprT) -> int | None:
        if not isinstance(e, cp_model.LinearExpr):
            return int(e)
        flat = cp_model_helper.FlatIntExpr(e)
        if any(v.index not in known for v in flat.vars):
            return None
        return int(sum(known[v.index] * c for v, c in zip(flat.vars, flat.coeffs, strict=True)) + flat.offset)

    for uses, group in level.pieces:
        times: list[tuple[int, int, int]] = []  # (start, order, end) of the uses the hint runs
        for j, it in enumerate(uses):
            on = 1 if it.lit is None else known.get(it.lit.index)
            b, e = value(it.begin), value(it.finish)
            if on and b is not None and e is not None:
                times.append((b, j, e))
        cut: dict[int, tuple[int, int | None]] = {}  # use -> (its piece's start, the earlier use covering the gap)
        latest, by = -1, None
        for b, j, e in sorted(times):
            cut[j] = (min(max(b, latest), e), by if latest > b else None)
            if e > latest:
                latest, by = e, j
        for pc in group:
            if pc.use not in cut:
                continue
            t, i = cut[pc.use]
            if i is not None and i not in pc.by:
                continue  # a use the model says cannot cover this one: leave the piece to the solver
            level.m.add_hint(pc.t, t)
            level.m.add_hint(pc.size, value(uses[pc.use].finish) - t)  # type: ignore[operator]
            level.m.add_hint(pc.gap, i is not None)
            for k, a in pc.by.items():
                level.m.add_hint(a, k == i)
