"""Data -> CP-SAT variables: the aggregated placement model.

Variables (all integer or Boolean):

* ``c[w, n]``: new replicas of workload ``w`` on node ``n`` (identical replicas are a count);
* ``keep/ev/mv[r]``: a running replica stays, is evicted or is moved (only optional ones);
* ``gang[w]``: a gang is placed (all replicas) or not at all;
* ``xw[n]``, ``ym[n]``: unfixed free GPUs of ``n`` turned whole / MIG;
* ``k[n, src, L, pool]``: GPUs of a class (``src``: any MIG-capable, or one preset layout) given
  the maximal MIG multiset ``L`` and reserved for a tenant pool; ``cm[w, n, pool]`` instances;
* occupied MIG GPUs: one Boolean per (keep-or-drop option, extension multiset), ``co[w, g]``;
* shared slots (one per GPU that may be time-sliced): ``u`` used, ``f[w, slot]`` replicas.

Constraints are added by :mod:`capplan.placement.cpsat.constraints`, the objective by
:mod:`capplan.placement.cpsat.objective`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ortools.sat.python import cp_model

from capplan.model.plan import MigSlot
from capplan.model.problem import Demand, Workload
from capplan.model.units import MILLI
from capplan.placement.cpsat.index import Index, NodeInfo, OccGpu, Run
from capplan.placement.cpsat.layouts import Multiset, enumerate_multisets

ANY = "*"  # the pool open to every tenant without isolation


@dataclass
class MigClass:
    """A count variable: GPUs of a class on one node given multiset ``layout`` for ``pool``."""

    node: int
    src: frozenset[MigSlot] | None  # None: MIG-capable GPUs without a preset layout
    layout: Multiset
    pool: str
    var: cp_model.IntVar


@dataclass
class OccOption:
    """One choice for an occupied MIG GPU: keep or drop its optional replicas, and the extension."""

    drop: bool
    layout: Multiset
    var: cp_model.IntVar
    freed: bool = False  # every replica leaves and the GPU rejoins the free pool


@dataclass
class Slot:
    """A GPU that may be time-shared: preset shared, occupied shared, or an unfixed free GPU."""

    node: int
    kind: str  # "fixed" | "occ" | "fresh"
    gpu: int | None
    occ: OccGpu | None
    used: Any  # Boolean variable, or 1 / (1 - freed) for an occupied GPU
    f: dict[str, cp_model.IntVar] = field(default_factory=dict)


class PlacementModel:
    """The CP-SAT model of one problem; holds the model and every variable by name."""

    def __init__(self, ix: Index) -> None:
        self.ix = ix
        self.p = ix.p
        self.m = cp_model.CpModel()
        self.c: dict[tuple[str, int], cp_model.IntVar] = {}
        self.ub: dict[tuple[str, int], int] = {}
        self.keep: dict[tuple[str, int], Any] = {}
        self.ev: dict[tuple[str, int], Any] = {}
        self.mv: dict[tuple[str, int], Any] = {}
        self.gang: dict[str, cp_model.IntVar] = {}
        self.xw: dict[int, cp_model.IntVar] = {}
        self.ym: dict[int, cp_model.IntVar] = {}
        self.mig: dict[int, list[MigClass]] = {}
        self.cm: dict[tuple[str, int, str], Any] = {}
        self.occ_opts: dict[tuple[int, int], list[OccOption]] = {}
        self.co: dict[tuple[str, int, int], cp_model.IntVar] = {}
        self.slots: dict[int, list[Slot]] = {}
        self.busy: dict[int, Any] = {}
        self.freed: dict[tuple[int, int], cp_model.IntVar] = {}
        self.tot: dict[str, cp_model.IntVar] = {}  # new replicas per workload (see constraints.placed_new)
        self._make_running()
        for ni in ix.nodes:
            self._make_node(ni)
        for w in self.p.workloads:
            if w.is_gang:
                self.gang[w.name] = self.m.new_bool_var(f"gang[{w.name}]")

    # ------------------------------------------------------------------ helpers
    def on_node(self, i: int) -> list[tuple[Workload, cp_model.IntVar]]:
        """``(workload, c[w, i])`` for every new-replica variable on node ``i``."""
        if not hasattr(self, "_on_node"):
            idx: dict[int, list[tuple[Workload, cp_model.IntVar]]] = {}
            for (wn, n), v in self.c.items():
                idx.setdefault(n, []).append((self.p.workload(wn), v))
            self._on_node = idx
        return self._on_node.get(i, [])

    def mig_on_node(self, i: int) -> list[tuple[Workload, str, Any]]:
        """``(workload, pool, cm[w, i, pool])`` on node ``i``."""
        if not hasattr(self, "_mig_on_node"):
            idx: dict[int, list[tuple[Workload, str, Any]]] = {}
            for (wn, n, pool), v in self.cm.items():
                idx.setdefault(n, []).append((self.p.workload(wn), pool, v))
            self._mig_on_node = idx
        return self._mig_on_node.get(i, [])

    def occ_on_gpu(self, i: int, g: int) -> list[tuple[Workload, cp_model.IntVar]]:
        """``(workload, co[w, i, g])`` for new MIG instances on occupied GPU ``g`` of node ``i``."""
        if not hasattr(self, "_occ_on_gpu"):
            idx: dict[tuple[int, int], list[tuple[Workload, cp_model.IntVar]]] = {}
            for (wn, n, gg), v in self.co.items():
                idx.setdefault((n, gg), []).append((self.p.workload(wn), v))
            self._occ_on_gpu = idx
        return self._occ_on_gpu.get((i, g), [])

    def demand(self, w: Workload, n: int) -> Demand:
        """Demand of ``w`` on node ``n`` (a candidate)."""
        return self.ix.cands[w.name][n]

    def pools(self, n: int) -> list[str]:
        """Tenant pools on node ``n``: ANY plus each tenant with an isolated slice/share workload."""
        iso = sorted(
            {
                w.tenant
                for w in self.p.workloads
                if w.isolation == "tenant"
                and n in self.ix.cands[w.name]
                and self.demand(w, n).kind in ("mig", "fraction")
            }
        )
        return [ANY, *iso]

    def pools_of(self, w: Workload, n: int) -> list[str]:
        """Pools ``w``'s replicas may use on node ``n``."""
        pools = self.pools(n)
        if w.isolation == "tenant":
            return [w.tenant]
        return [ANY, w.tenant] if w.tenant in pools else [ANY]

    def run_keep(self, r: Run) -> Any:
        """1 (pinned) or the keep literal of a running replica."""
        return self.keep.get(r.a.key, 1)

    # -------------------------------------------------------------- variables
    def _make_running(self) -> None:
        for r in self.ix.runs:
            if not r.optional:
                continue
            key = r.a.key
            self.keep[key] = self.m.new_bool_var(f"keep[{key}]")
            self.ev[key] = self.m.new_bool_var(f"evict[{key}]") if r.can_evict else 0
            self.mv[key] = self.m.new_bool_var(f"move[{key}]") if r.can_move else 0
            self.m.add(self.keep[key] + self.ev[key] + self.mv[key] == 1)

    def _ub(self, w: Workload, ni: NodeInfo, d: Demand) -> int:
        n = ni.node
        ub = self.ix.max_new(w)
        if w.cpu_milli:
            ub = min(ub, n.cpu_milli // w.cpu_milli)
        if w.memory_mib:
            ub = min(ub, n.memory_mib // w.memory_mib)
        if d.kind == "whole":
            ub = min(ub, n.gpus // d.gpus)
        elif d.kind == "mig" and d.profile is not None:
            ub = min(ub, n.gpus * d.profile.max_count)
        elif d.kind == "fraction":
            ub = min(ub, n.gpus * (MILLI // d.fraction_milli))
        return ub

    def _make_node(self, ni: NodeInfo) -> None:
        i = ni.index
        ws = [w for w in self.p.workloads if i in self.ix.cands[w.name]]
        for w in ws:
            ub = self._ub(w, ni, self.demand(w, i))
            if ub > 0:
                self.c[(w.name, i)] = self.m.new_int_var(0, ub, f"c[{w.name},{ni.node.name}]")
                self.ub[(w.name, i)] = ub
        if ni.model is None:
            return
        g = ni.node.gpus
        self.xw[i] = self.m.new_int_var(0, g, f"xw[{ni.node.name}]")
        self.ym[i] = self.m.new_int_var(0, g, f"ym[{ni.node.name}]")
        mig_ws = [w for w in ws if (w.name, i) in self.c and self.demand(w, i).kind == "mig"]
        if any(o.kind == "mig" for o in ni.occ):
            self._make_occ_mig(ni)
        if mig_ws:
            self._make_mig(ni, mig_ws)
        frac_ws = [w for w in ws if (w.name, i) in self.c and self.demand(w, i).kind == "fraction"]
        occ_shared = [o for o in ni.occ if o.kind == "shared"]
        if frac_ws or occ_shared:
            self._make_slots(ni, frac_ws, occ_shared)

    def _make_mig(self, ni: NodeInfo, ws: list[Workload]) -> None:
        i = ni.index
        assert ni.model is not None
        profiles = self.ix.mig_profiles[ni.model.name]
        classes: list[MigClass] = []
        sources: list[tuple[frozenset[MigSlot] | None, int]] = []
        if ni.mig_any or ni.unfixed or any(r.optional for r in ni.runs):
            sources.append((None, len(ni.mig_any) + len(ni.unfixed) + len(ni.runs)))
        sources.extend((lay, len(gs)) for lay, gs in sorted(ni.mig_layout.items(), key=lambda x: min(x[1])))
        for src, count in sources:
            for lay in enumerate_multisets(ni.model, profiles, (), src):
                for pool in self.pools(i):
                    v = self.m.new_int_var(0, min(count, ni.node.gpus), f"k[{ni.node.name},{lay},{pool}]")
                    classes.append(MigClass(i, src, lay, pool, v))
        self.mig[i] = classes
        for o in ni.occ:
            if o.kind == "mig":
                for w in ws:
                    self.co[(w.name, i, o.gpu)] = self.m.new_int_var(
                        0, self.ub[(w.name, i)], f"co[{w.name},{ni.node.name},{o.gpu}]"
                    )
        for w in ws:
            pools = self.pools_of(w, i)
            occ_parts = [self.co[(w.name, i, o.gpu)] for o in ni.occ if (w.name, i, o.gpu) in self.co]
            if len(pools) == 1 and not occ_parts:
                self.cm[(w.name, i, pools[0])] = self.c[(w.name, i)]
                continue
            parts = []
            ub = self.ub[(w.name, i)]
            for pool in pools:
                v = self.m.new_int_var(0, ub, f"cm[{w.name},{ni.node.name},{pool}]")
                self.cm[(w.name, i, pool)] = v
                parts.append(v)
            self.m.add(self.c[(w.name, i)] == sum(parts) + sum(occ_parts))

    def _make_occ_mig(self, ni: NodeInfo) -> None:
        """Options of each occupied MIG GPU: keep or drop the optional replicas, and the extension."""
        assert ni.model is not None
        profiles = self.ix.mig_profiles[ni.model.name]
        for o in ni.occ:
            if o.kind != "mig":
                continue
            opts: list[OccOption] = []
            name = f"{ni.node.name},{o.gpu}"
            for drop in (False, True) if o.optional else (False,):
                base = tuple(r.a.mig for r in (o.pinned if drop else o.pinned + o.optional) if r.a.mig is not None)
                lays = enumerate_multisets(ni.model, profiles, base, o.fixed_layout) or [(0,) * len(profiles)]
                for lay in lays:
                    opts.append(OccOption(drop, lay, self.m.new_bool_var(f"occ[{name},{drop},{lay}]")))
            if o.releasable:
                v = self.m.new_bool_var(f"freed[{name}]")
                opts.append(OccOption(True, (0,) * len(profiles), v, freed=True))
                self.freed[(ni.index, o.gpu)] = v
            self.m.add_exactly_one(x.var for x in opts)
            self.occ_opts[(ni.index, o.gpu)] = opts

    def _make_slots(self, ni: NodeInfo, ws: list[Workload], occ_shared: list[OccGpu]) -> None:
        i = ni.index
        name = ni.node.name
        slots: list[Slot] = []
        for o in occ_shared:
            used: Any = 1
            if o.releasable:
                self.freed[(i, o.gpu)] = self.m.new_bool_var(f"freed[{name},{o.gpu}]")
                used = 1 - self.freed[(i, o.gpu)]
            slots.append(Slot(i, "occ", o.gpu, o, used))
        for g in ni.shared_fixed:
            slots.append(Slot(i, "fixed", g, None, self.m.new_bool_var(f"u[{name},{g}]")))
        need = sum(self.ub[(w.name, i)] for w in ws)
        fresh = min(len(ni.unfixed) + sum(len(r.a.gpus) for r in ni.runs if r.optional), need)
        for j in range(fresh):
            slots.append(Slot(i, "fresh", None, None, self.m.new_bool_var(f"u[{name},fresh{j}]")))
        for s in slots:
            for w in ws:
                d = self.demand(w, i)
                ub = min(self.ub[(w.name, i)], MILLI // d.fraction_milli)
                s.f[w.name] = self.m.new_int_var(0, ub, f"f[{w.name},{name},{s.kind}{s.gpu}]")
        for w in ws:
            self.m.add(self.c[(w.name, i)] == sum(s.f[w.name] for s in slots))
        self.slots[i] = slots
