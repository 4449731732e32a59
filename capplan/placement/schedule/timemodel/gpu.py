"""The GPU-by-GPU part of the CP-SAT time model: MIG geometry over time, GPU shares, and whole GPUs
on the nodes that may host either.

A node that some MIG slice or share could use (``NodeCap.per_gpu``) is modelled one GPU at a time.
A replica of a MIG or share job picks one GPU of one node (a literal per node and GPU) and, for
MIG, a start on the memory-slice axis among its profile's allowed starts; a whole-GPU job picks
``gpus`` GPUs per replica there. On each GPU, over time:

* whole GPUs and MIG instances do not overlap in (time x memory slice): a no-overlap-2D box per
  use, a whole GPU spanning every slice;
* shares add up to at most one GPU and its memory (a cumulative per GPU), a whole GPU counting as
  the full GPU so that it excludes shares;
* a MIG instance and a share never run at once (a no-overlap per pair whose windows meet), nor, on
  a ``homogeneous`` model, two partitions of different profiles, nor a tenant-isolated slice or
  share with another tenant's;
* at most ``max_count`` instances of a profile and ``compute`` compute slices (cumulatives, where
  they could bind).

Preset GPU modes (:class:`~capplan.placement.schedule.timemodel.data.NodeCap` ``takes``/``mig_starts``): a
job uses only the GPUs that take its kind, and a MIG slice on a GPU with a preset layout only that
layout's starts.

Symmetry: the GPUs of one preset class on a node without fixed use are interchangeable, so the
``i``-th job (in model order) that may use a node takes GPUs of a class below the GPUs its
predecessors could take there plus its own; a hint is relabelled the same way.

Power (:mod:`~capplan.placement.schedule.timemodel.power`): :meth:`GpuLevel.power_uses` gives the intervals that draw a TDP for the slices and shares,
exact (each GPU's busy time cut into pieces) on the nodes under a budget that could bind.
"""

from __future__ import annotations

from collections import defaultdict

from ortools.sat.python import cp_model

from capplan.placement.schedule.timemodel.data import Busy, Job, NodeCap, Place
from capplan.placement.schedule.timemodel.power import GpuUse, Piece, hint_power, meet, partial_uses, power_uses

#: A share's demand on a GPU's cumulative is in milli-GPU; a whole GPU takes all of it.
FULL = 1000


class GpuLevel:
    """The per-GPU variables and constraints of a time model (see the module docstring)."""

    def __init__(self, m: cp_model.CpModel, nodes: list[NodeCap], busy: list[Busy], horizon: int) -> None:
        self.m, self.nodes, self.horizon = m, nodes, horizon
        self.items: dict[tuple[int, int], list[GpuUse]] = defaultdict(list)
        self.whole: dict[int, dict[tuple[int, int], cp_model.IntVar]] = {}  # job -> (node, gpu) -> literal
        self.part: dict[int, list[dict[tuple[int, int], cp_model.IntVar]]] = {}  # job -> per replica slot
        self.starts: dict[int, list[dict[int, cp_model.LinearExprT]]] = {}  # job -> per slot: node -> slice start
        self.power: list[tuple[int, cp_model.IntervalVar, bool]] = []  # (node, interval, free) drawing one TDP
        fixed_nodes = {b.node for b in busy if nodes[b.node].per_gpu}
        self.symmetric = {n for n, c in enumerate(nodes) if c.per_gpu and n not in fixed_nodes}
        self.classes = {n: c.classes() for n, c in enumerate(nodes) if c.per_gpu}
        self.class_of = {n: {g: k for k, cls in enumerate(classes) for g in cls} for n, classes in self.classes.items()}
        self.class_id = {(n, k): i for i, (n, k) in enumerate((n, k) for n, cl in self.classes.items()
                                                               for k in range(len(cl)))}
        self.prefix: dict[tuple[int, int], int] = defaultdict(int)  # (node, GPU class) -> GPUs earlier jobs may take
        self.intervals = 0
        self._full: dict[int, cp_model.IntervalVar] = {}
        self.pieces: list[tuple[list[GpuUse], list[Piece]]] = []  # per GPU with power pieces: its uses, pieces

    def _full_y(self, slices: int) -> cp_model.IntervalVar:
        if slices not in self._full:
            self._full[slices] = self.m.new_fixed_size_interval_var(0, slices, f"all{slices}")
        return self._full[slices]

    def _usable(self, n: int, kind: str, most: int, base: dict[tuple[int, int], int] | None = None) -> list[int]:
        """GPUs of node ``n`` a job of ``kind`` that takes at most ``most`` GPUs of a class may use: in each
        class of GPUs that take ``kind``, on a symmetric node only the first ``most`` past what earlier jobs
        could take (``base``: the prefix before this job; without it, the prefix grows by ``most``)."""
        cap = self.nodes[n]
        out: list[int] = []
        for c, cls in enumerate(self.classes[n]):
            if not cap.takes_kind(cls[0], kind):
                continue
            if n in self.symmetric:
                before = (base if base is not None else self.prefix).get((n, c), 0)
                out += cls[:before + most]
                if base is None:
                    self.prefix[(n, c)] += most
            else:
                out += cls
        return out

    def add_job(self, j: int, jb: Job, start: cp_model.LinearExprT, lo: int, hi: int,
                counts: dict[int, cp_model.IntVar], present: cp_model.IntVar) -> None:
        """Per-GPU choices of job ``j`` on its per-GPU candidate nodes (``counts``: replicas per node)."""
        m = self.m
        nodes = {n: c for n, c in counts.items() if self.nodes[n].per_gpu}
        if not nodes or not (jb.partial or jb.gpus):
            return
        where = {n: i for i, n in enumerate(jb.nodes)}

        def interval(lit: cp_model.IntVar, name: str) -> cp_model.IntervalVar:
            self.intervals += 1
            if jb.duration is not None:
                return m.new_optional_fixed_size_interval_var(start, jb.duration, lit, name)
            return m.new_optional_interval_var(start, self.horizon - start, self.horizon, lit, name)

        if not jb.partial:
            lits: dict[tuple[int, int], cp_model.IntVar] = {}
            for n, cnt in nodes.items():
                cap = self.nodes[n]
                most = min(jb.replicas, cap.gpus // jb.gpus) * jb.gpus
                mine = []
                whole_y = self._full_y(cap.slices) if cap.slices else None
                for g in self._usable(n, "whole", most):
                    b = lits[(n, g)] = m.new_bool_var(f"b{j}_{n}_{g}")
                    mine.append(b)
                    self.items[(n, g)].append(GpuUse(interval(b, f"g{j}_{n}_{g}"), whole_y, "whole", lo, hi, False))
                m.add(sum(mine) == jb.gpus * cnt)
            self.whole[j] = lits
            return
        slots: list[dict[tuple[int, int], cp_model.IntVar]] = []
        starts: list[dict[int, cp_model.LinearExprT]] = []
        base = dict(self.prefix)
        for r in range(jb.replicas):
            slot: dict[tuple[int, int], cp_model.IntVar] = {}
            begin: dict[int, cp_model.LinearExprT] = {}
            for n in nodes:
                cap = self.nodes[n]
                spec = jb.mig[where[n]] if jb.kind == "mig" else None
                gpus = self._usable(n, jb.kind, r + 1, base)
                allowed = {g: cap.starts_on(g, spec) for g in gpus} if spec is not None else {}
                if spec is not None:
                    gpus = [g for g in gpus if allowed[g]]
                if not gpus:
                    continue
                y: cp_model.IntervalVar | None = None
                if spec is not None:
                    values = sorted({s for g in gpus for s in allowed[g]})
                    if len(values) == 1:
                        begin[n] = values[0]
                    else:
                        begin[n] = m.new_int_var_from_domain(cp_model.Domain.from_values(values), f"s{j}_{r}_{n}")
                    y = m.new_fixed_size_interval_var(begin[n], spec.size, f"y{j}_{r}_{n}")
                for g in gpus:
                    b = slot[(n, g)] = m.new_bool_var(f"b{j}_{r}_{n}_{g}")
                    if spec is not None and len(allowed[g]) < len(values):  # a preset layout: its starts only
                        m.add_linear_expression_in_domain(begin[n], cp_model.Domain.from_values(allowed[g])
                                                          ).only_enforce_if(b)
                    iv = interval(b, f"g{j}_{r}_{n}_{g}")
                    self.items[(n, g)].append(GpuUse(
                        iv, y, jb.kind, lo, hi, False, fraction=jb.fraction, gpu_mem=jb.gpu_mem,
                        profile=spec.profile if spec else "", compute=spec.compute if spec else 0,
                        max_count=spec.max_count if spec else 0, tenant=jb.tenant,
                        tenant_isolated=jb.tenant_isolated, lit=b, begin=start,
                        finish=start + jb.duration if jb.duration is not None else self.horizon))
                    self.power.append((n, iv, True))
            m.add(sum(slot.values()) == present)
            slots.append(slot)
            starts.append(begin)
        for n in nodes:
            for c in range(len(self.classes[n])):
                self.prefix[(n, c)] += jb.replicas
            m.add(nodes[n] == sum(b for slot in slots for (k, _), b in slot.items() if k == n))
        self.part[j] = slots
        self.starts[j] = starts

    def add_busy(self, b: Busy, iv: cp_model.IntervalVar) -> None:
        """A fixed use of GPUs ``b.gpu_ids`` of a per-GPU node."""
        cap = self.nodes[b.node]
        if not cap.per_gpu or not b.gpu_ids:
            return
        for g in b.gpu_ids:
            if b.kind == "whole":
                y = self._full_y(cap.slices) if cap.slices else None
                self.items[(b.node, g)].append(GpuUse(iv, y, "whole", b.start, b.end, True))
                continue
            y = None
            if b.mig is not None:
                y = self.m.new_fixed_size_interval_var(b.slice_start, b.mig.size, f"by{b.node}_{g}_{b.start}")
            self.items[(b.node, g)].append(GpuUse(
                iv, y, b.kind, b.start, b.end, True, fraction=b.fraction, gpu_mem=b.gpu_mem,
                profile=b.mig.profile if b.mig else "", compute=b.mig.compute if b.mig else 0,
                max_count=b.mig.max_count if b.mig else 0, tenant=b.tenant, tenant_isolated=b.tenant_isolated))

    def partial_uses(self) -> dict[int, int]:
        """Per node with free MIG slices or shares: how many intervals :meth:`power_uses` gives it at most."""
        return partial_uses(self)

    def power_uses(self, exact: set[int]) -> list[tuple[int, cp_model.IntervalVar, bool]]:
        """Intervals that each draw one TDP (:func:`~capplan.placement.schedule.timemodel.power.power_uses`)."""
        return power_uses(self, exact)

    def hint_power(self) -> None:
        """Hint the power pieces (:func:`~capplan.placement.schedule.timemodel.power.hint_power`)."""
        hint_power(self)

    def constrain(self) -> None:
        """The rules of each GPU over time (see the module docstring)."""
        m = self.m
        for (n, _), items in sorted(self.items.items()):
            if all(it.fixed for it in items):
                continue
            cap = self.nodes[n]
            wholes = [it for it in items if it.kind == "whole"]
            migs = [it for it in items if it.kind == "mig"]
            shares = [it for it in items if it.kind == "share"]
            if migs and len(wholes) + len(migs) > 1:
                boxes = wholes + migs
                m.add_no_overlap_2d([it.iv for it in boxes], [it.y for it in boxes])  # type: ignore[misc]
            full = wholes + shares if (shares or not migs) else []
            if sum(FULL if it.kind == "whole" else it.fraction for it in full) > FULL:
                m.add_cumulative([it.iv for it in full], [FULL if it.kind == "whole" else it.fraction for it in full],
                                 FULL)
            withmem = [it for it in shares if it.gpu_mem]
            if sum(it.gpu_mem for it in withmem) > cap.gpu_mem:
                m.add_cumulative([it.iv for it in withmem], [it.gpu_mem for it in withmem], cap.gpu_mem)
            for a in migs:
                for b in shares:
                    if meet(a, b):
                        m.add_no_overlap([a.iv, b.iv])
            parts = migs + shares
            for i, a in enumerate(parts):
                for b in parts[i + 1:]:
                    if not meet(a, b):
                        continue
                    tenants = a.tenant != b.tenant and (a.tenant_isolated or b.tenant_isolated)
                    modes = cap.homogeneous and a.kind == b.kind == "mig" and a.profile != b.profile
                    if tenants or modes:
                        m.add_no_overlap([a.iv, b.iv])
            by_profile: dict[str, list[GpuUse]] = defaultdict(list)
            for it in migs:
                by_profile[it.profile].append(it)
            for uses in by_profile.values():
                if len(uses) > uses[0].max_count:
                    m.add_cumulative([it.iv for it in uses], [1] * len(uses), uses[0].max_count)
            if sum(it.compute for it in migs) > cap.compute:
                m.add_cumulative([it.iv for it in migs], [it.compute for it in migs], cap.compute)

    # ------------------------------------------------------------------ hints and solutions
    def hint(self, j: int, jb: Job, places: dict[int, list[Place]], relabel: dict[int, dict[int, int]]) -> None:
        """Hint job ``j``'s GPUs and slice starts (``places``: node -> per replica), relabelling GPUs of
        symmetric nodes in first-seen order within each class (``relabel`` carries the labels across jobs)."""
        m = self.m

        def label(n: int, g: int) -> int:
            if n not in self.symmetric:
                return g
            c = self.class_of[n][g]
            lab = relabel.setdefault(self.class_id[(n, c)], {})
            if g not in lab:
                lab[g] = self.classes[n][c][len(lab)]
            return lab[g]

        if j in self.whole:
            used = {(n, label(n, g)) for n, reps in sorted(places.items()) for gs, _ in reps for g in gs}
            for key, b in self.whole[j].items():
                m.add_hint(b, key in used)
            return
        if j not in self.part:
            return
        flat = [(n, gs, s) for n, reps in sorted(places.items()) for gs, s in reps]
        for r, slot in enumerate(self.part[j]):
            got = flat[r] if r < len(flat) else None
            mine = (got[0], label(got[0], got[1][0])) if got is not None and got[1] else None
            for k, b in slot.items():
                m.add_hint(b, k == mine)
            if got is not None:
                s = self.starts[j][r].get(got[0])
                if isinstance(s, cp_model.IntVar):
                    m.add_hint(s, got[2])

    def read(self, j: int, jb: Job, full: list[int]) -> dict[int, list[Place]]:
        """Job ``j``'s GPUs and slice starts in a solution, per node and replica."""
        out: dict[int, list[Place]] = defaultdict(list)
        if j in self.whole:
            per: dict[int, list[int]] = defaultdict(list)
            for (n, g), b in sorted(self.whole[j].items()):
                if full[b.index]:
                    per[n].append(g)
            for n, gs in per.items():
                out[n] = [(tuple(gs[i:i + jb.gpus]), 0) for i in range(0, len(gs), jb.gpus)]
        for r, slot in enumerate(self.part.get(j, [])):
            for (n, g), b in sorted(slot.items()):
                if full[b.index]:
                    s = self.starts[j][r].get(n, 0)
                    out[n].append(((g,), full[s.index] if isinstance(s, cp_model.IntVar) else int(s)))  # type: ignore[arg-type]
        return dict(out)
