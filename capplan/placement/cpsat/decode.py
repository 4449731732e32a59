"""Aggregated solution -> concrete assignments (GPU indices, MIG starts, shares).

Counts are turned into replicas node by node: whole GPUs take preset-whole GPUs first, then
unfixed ones; each MIG class count takes GPUs of its class and realises its multiset as concrete
starts (:func:`capplan.placement.cpsat.layouts.realize`); shared slots map to GPUs. Replica ids go to
moved running replicas first, then to the lowest ids not running. The result is checked by the
independent validator afterwards (see :mod:`capplan.placement.cpsat.solve`).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from capplan.model.plan import Assignment, Eviction, Migration, MigSlot
from capplan.model.units import MILLI
from capplan.placement.cpsat.index import NodeInfo
from capplan.placement.cpsat.layouts import realize
from capplan.placement.cpsat.model import PlacementModel

Value = Callable[[Any], int]


@dataclass
class Decoded:
    """Concrete result: kept and new assignments, evictions and migrations."""

    assignments: list[Assignment] = field(default_factory=list)
    evictions: list[Eviction] = field(default_factory=list)
    migrations: list[Migration] = field(default_factory=list)


@dataclass(frozen=True)
class _Spot:
    node: str
    gpus: tuple[int, ...] = ()
    mig: MigSlot | None = None
    fraction: float | None = None


class DecodeError(RuntimeError):
    """The aggregated solution could not be realised (a modelling bug; the caller falls back)."""


def decode(pm: PlacementModel, val: Value) -> Decoded:
    """Turn variable values into a :class:`Decoded` result."""
    spots: dict[str, list[_Spot]] = defaultdict(list)
    for ni in pm.ix.nodes:
        _decode_node(pm, ni, val, spots)
    out = Decoded()
    for w in pm.p.workloads:
        runs = pm.ix.running_of.get(w.name, [])
        moved = [r for r in runs if val(pm.mv.get(r.a.key, 0))]
        ids = [r.a.replica for r in moved] + pm.ix.new_ids(w)
        mine = spots.get(w.name, [])
        if len(mine) > len(ids):
            raise DecodeError(f"{w.name}: {len(mine)} placements for {len(ids)} replicas")
        for rid, s in zip(ids, mine, strict=False):
            out.assignments.append(
                Assignment(workload=w.name, replica=rid, node=s.node, gpus=s.gpus, mig=s.mig, fraction=s.fraction)
            )
        by_id = {a.replica: a for a in out.assignments if a.workload == w.name}
        for r in runs:
            if r.a.key in pm.keep and not val(pm.keep[r.a.key]) and r.a.replica in by_id:
                to = by_id[r.a.replica].node
                out.migrations.append(
                    Migration(
                        workload=w.name,
                        replica=r.a.replica,
                        from_node=r.a.node,
                        to_node=to,
                        reason=f"moved to make room for higher-priority work (migration cost {w.migration_cost})",
                    )
                )
            elif r.a.key in pm.keep and not val(pm.keep[r.a.key]):
                out.evictions.append(
                    Eviction(
                        workload=w.name,
                        replica=r.a.replica,
                        node=r.a.node,
                        reason=_eviction_reason(pm, val, r.node, w.priority),
                    )
                )
            else:
                out.assignments.append(r.a)
    return out


def _eviction_reason(pm: PlacementModel, val: Value, i: int, prio: int) -> str:
    names = sorted({wn for (wn, n), v in pm.c.items() if n == i and val(v) and pm.p.workload(wn).priority > prio})
    return f"preempted for higher-priority {', '.join(names)} on {pm.p.cluster.nodes[i].name}"


def _decode_node(pm: PlacementModel, ni: NodeInfo, val: Value, spots: dict[str, list[_Spot]]) -> None:
    i, name = ni.index, ni.node.name
    unfixed = list(ni.unfixed)
    whole_fixed = list(ni.whole_fixed)
    for r in ni.runs:
        if r.demand.kind == "whole" and r.optional and not val(pm.keep[r.a.key]):
            for g in r.a.gpus:
                (unfixed if ni.node.mode_of(g) is None else whole_fixed).append(g)
    unfixed.extend(g for (n, g), v in pm.freed.items() if n == i and val(v))
    unfixed.sort()
    whole_fixed.sort()
    mig_any = list(ni.mig_any)
    order = [w for w in pm.p.workloads if (w.name, i) in pm.c and val(pm.c[(w.name, i)])]
    for w in order:
        d = pm.demand(w, i)
        n = val(pm.c[(w.name, i)])
        if d.kind == "none":
            spots[w.name].extend(_Spot(name) for _ in range(n))
        elif d.kind == "whole":
            for _ in range(n):
                pool = whole_fixed + unfixed
                if len(pool) < d.gpus:
                    raise DecodeError(f"{name}: not enough whole GPUs")
                take = pool[: d.gpus]
                whole_fixed = [g for g in whole_fixed if g not in take]
                unfixed = [g for g in unfixed if g not in take]
                spots[w.name].append(_Spot(name, tuple(sorted(take))))
    _decode_mig(pm, ni, val, spots, mig_any, unfixed)
    _decode_slots(pm, ni, val, spots, unfixed)


def _take(pool: list[int], what: str) -> int:
    if not pool:
        raise DecodeError(f"no free GPU left for {what}")
    return pool.pop(0)


def _decode_mig(
    pm: PlacementModel,
    ni: NodeInfo,
    val: Value,
    spots: dict[str, list[_Spot]],
    mig_any: list[int],
    unfixed: list[int],
) -> None:
    i = ni.index
    if i not in pm.mig or ni.model is None:
        return
    model = ni.model
    profiles = pm.ix.mig_profiles[model.name]
    layouts = {lay: list(gs) for lay, gs in ni.mig_layout.items()}
    # per GPU: (allowed slots, base slots, capacity per profile, pool or None for occupied)
    gpus: list[tuple[int, frozenset[MigSlot] | None, tuple[MigSlot, ...], list[int], str | None]] = []
    for k in pm.mig[i]:
        for _ in range(val(k.var)):
            g = (
                (mig_any.pop(0) if mig_any else _take(unfixed, "MIG"))
                if k.src is None
                else _take(layouts[k.src], "MIG")
            )
            gpus.append((g, k.src, (), list(k.layout), k.pool))
    for o in ni.occ:
        for opt in pm.occ_opts.get((i, o.gpu), []):
            if val(opt.var) and not opt.freed:
                kept = o.pinned if opt.drop else o.pinned + o.optional
                base = tuple(r.a.mig for r in kept if r.a.mig is not None)
                gpus.append((o.gpu, o.fixed_layout, base, list(opt.layout), None))
    placed: dict[int, list[tuple[str, str]]] = defaultdict(list)  # gpu -> (workload, profile)
    for (wn, n, pool), v in pm.cm.items():
        if n != i or not val(v):
            continue
        prof = pm.demand(pm.p.workload(wn), i).profile
        assert prof is not None
        j = profiles.index(prof)
        left = val(v)
        for g, _, _, cap, gp in gpus:
            while left and gp == pool and cap[j] > 0:
                cap[j] -= 1
                left -= 1
                placed[g].append((wn, prof.name))
        if left:
            raise DecodeError(f"{ni.node.name}: MIG capacity short for {wn}")
    for (wn, n, g), v in pm.co.items():
        if n == i and val(v):
            prof = pm.demand(pm.p.workload(wn), i).profile
            assert prof is not None
            placed[g].extend((wn, prof.name) for _ in range(val(v)))
    for g, allowed, base, _, _ in gpus:
        items = placed.get(g, [])
        if not items:
            continue
        slots = realize(model, dict(Counter(p for _, p in items)), base, allowed)
        if slots is None:
            raise DecodeError(f"{ni.node.name} GPU {g}: MIG instances cannot be laid out")
        free = list(slots)
        for wn, pname in items:
            slot = next(s for s in free if s.profile == pname)
            free.remove(slot)
            spots[wn].append(_Spot(ni.node.name, (g,), slot))


def _decode_slots(
    pm: PlacementModel, ni: NodeInfo, val: Value, spots: dict[str, list[_Spot]], unfixed: list[int]
) -> None:
    for s in pm.slots.get(ni.index, []):
        if not any(val(v) for v in s.f.values()):
            continue
        g = s.gpu if s.gpu is not None else _take(unfixed, "time-sharing")
        for wn, v in s.f.items():
            milli = pm.demand(pm.p.workload(wn), ni.index).fraction_milli
            spots[wn].extend(_Spot(ni.node.name, (g,), None, milli / MILLI) for _ in range(val(v)))
