"""One replica on one node: the best placement there, or the constraint family that rules it out.

The per-node question of :class:`~capplan.placement.core.state.ClusterState` (its vectorised
screens answer for many nodes at once). Used by the greedy planner, the schedulers, the reason
engine and the reports. Whole GPUs preset to whole use are taken first; MIG slices start where
the most valid placements stay free; shares go to a GPU they leave usable in its scarcer dimension
(:mod:`~capplan.placement.core.strand`), then to a busy GPU left
tightest in both its time and its memory (:func:`share_key`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from capplan.model.plan import MigSlot
from capplan.model.problem import Demand, Workload
from capplan.model.units import MILLI
from capplan.placement.core.fleet import FREE, KIND_MODE, WHOLE, Placement
from capplan.placement.core.migslots import gpu_fill, mig_choice, mig_starts

if TYPE_CHECKING:
    from capplan.placement.core.state import ClusterState
    from capplan.placement.core.strand import StrandRule


def node_reason(st: ClusterState, w: Workload, i: int) -> str:
    """Why node ``i`` cannot take one more replica of ``w`` before any GPU is looked at (its ClusterQueue's
    quota, CPU, memory, node isolation, in that order), or ``""``."""
    if st.quota is not None and w.queue is not None and not st.quota.room(w, st.eligible(w)[1].get(st.model_of[i]),
                                                                          i):
        return "quota"
    if st.cpu[i] < w.cpu_milli:
        return "cpu"
    if st.mem[i] < w.memory_mib:
        return "memory"
    if not st.tenant_ok_at(w, i):
        return "isolation"
    return ""


def fit_on_node(st: ClusterState, w: Workload, d: Demand, i: int) -> Placement | str:
    """Best placement of one replica of ``w`` (demand ``d``) on node ``i``, or the reason it does not fit."""
    why = node_reason(st, w, i)
    if why:
        return why
    if d.kind == "none":
        return Placement(node=i)
    if d.kind == "whole":
        return _fit_whole(st, d, i)
    if d.kind == "mig":
        got, why = _mig_fill(st, w, d, i, 1)
        return got[0] if got else why
    return _fit_slice(st, w, d, i)


def fit_more(st: ClusterState, w: Workload, d: Demand, last: Placement, most: int) -> list[Placement]:
    """Up to ``most`` more replicas of ``w`` right after ``last`` (its previous replica, just applied) on the
    same GPU, as :func:`fit_on_node` would give them one by one; empty when that GPU takes no more (ask
    :func:`fit_on_node` then).

    A slice or share goes to the best GPU by (idle last, most used, ...); ``last``'s GPU became busier while no
    other GPU changed, so it stays the best as long as it takes one more. The node's checks (quota, CPU,
    memory, tenants, power of a busy GPU) are made once and its CPU and memory counted for all of them; the
    GPU's slices or share are followed replica by replica. With ClusterQueue quotas, one replica at a time.
    Whole GPUs: empty (the caller fills them).
    """
    if d.kind not in ("mig", "fraction") or len(last.gpus) != 1 or most <= 0:
        return []
    i, gi = last.node, last.gpus[0]
    if node_reason(st, w, i) or not st.gpu_tenant_ok_at(w, i, gi):
        return []
    if st.tdp[i] and int(st.power_free[st.node_dom[i]].min()) < 0:
        return []  # the power rule for a busy GPU (see _fit_slice)
    most = node_most(st, w, i, most)
    out: list[Placement] = []
    if d.kind == "fraction":
        frac, gmem, cap = int(st.frac[i, gi]), int(st.gmem[i, gi]), int(st.gmem_cap[i])
        rule, mid, f, m = st.strand, int(st.model_id[i]), d.fraction_milli, d.memory_mib
        # one that strands may not be the best any more (another GPU may take it without): ask fit_on_node
        while (len(out) < most and _share_room(frac, gmem, cap, d)
               and not rule.strands(mid, MILLI - frac - f, cap - gmem - m)):
            out.append(Placement(node=i, gpus=(gi,), fraction_milli=f))
            frac, gmem = frac + f, gmem + m
        return out
    prof = d.profile
    model = st.models[int(st.model_id[i])]
    assert prof is not None and model is not None
    mask, counts = int(st.mig_mask[i, gi]), st.prof_count[i, gi].tolist()
    k, width = st.prof_index[prof.name], (1 << prof.memory_slices) - 1
    while len(out) < most:
        opt = mig_choice(st, model, i, gi, mask, counts, prof)
        if opt is None:
            break
        out.append(Placement(node=i, gpus=(gi,), slot=MigSlot(profile=prof.name, start=opt[0])))
        mask |= width << opt[0]
        counts[k] += 1
    return out


def fill_shares(st: ClusterState, w: Workload, d: Demand, i: int, most: int,
                keep_room: bool = False) -> tuple[list[Placement], str]:
    """Up to ``most`` shares of ``w`` (demand ``d``, kind ``fraction``) on node ``i`` as :func:`fit_on_node`
    would give them one by one (each applied before the next is fitted), not applied; and the reason the next
    one would not fit there (``""`` once ``most`` are placed). ``keep_room``: only while the best GPU for the
    next one does not strand (:meth:`~capplan.placement.core.strand.StrandRule.strands`; reason ``"gpu"``).

    One pass per GPU taken instead of one per replica: the node's checks are made once (more replicas of the
    same workload do not change its tenant rules, on the node or on a GPU it joins) and CPU and memory
    counted; the best GPU by :func:`share_key` stays the best while it takes one more and does not come to
    strand (its other fields only get better as it gets busier, and no other GPU changes), so it is filled
    until then, and the next one is chosen. Not for ClusterQueue quotas (one at a time).
    """
    assert d.kind == "fraction" and (st.quota is None or w.queue is None)
    why = node_reason(st, w, i)
    if why or most <= 0:
        return [], why
    most_node = most
    if w.cpu_milli:
        most_node = min(most_node, int(st.cpu[i]) // w.cpu_milli)
    if w.memory_mib:
        most_node = min(most_node, int(st.mem[i]) // w.memory_mib)
    count = int(st.gpu_count[i])
    users, mode, fixed = st.users[i].tolist(), st.mode[i].tolist(), st.fixed[i].tolist()
    frac, gmem, cap = st.frac[i].tolist(), st.gmem[i].tolist(), int(st.gmem_cap[i])
    want, f, m = KIND_MODE["fraction"], d.fraction_milli, d.memory_mib
    usable = [g for g in range(count) if _mode_fits(fixed[g], mode[g], want)]
    tenant_ok: dict[int, bool] = {}  # per GPU, asked once (more of the same workload do not change it)
    tdp = int(st.tdp[i]) if st.power_budget.size > 1 else 0  # no budget: power never binds
    head = int(st.power_free[st.node_dom[i]].min()) if tdp else 0  # every budget over the node drops alike
    rule, mid = st.strand, int(st.model_id[i])
    out: list[Placement] = []
    while len(out) < most_node:
        best: tuple[bool, bool, int, int, int] | None = None
        blocked = False
        for g in usable:
            if frac[g] + f > MILLI or gmem[g] + m > cap:
                continue
            ok = tenant_ok.get(g)
            if ok is None:
                ok = tenant_ok[g] = not users[g] or st.gpu_tenant_ok_at(w, i, g)
            if not ok:
                blocked = True
                continue
            idle = users[g] == 0
            if tdp and head < (tdp if idle else 0):  # an idle GPU turns on; a busy one needs no overdrawn budget
                continue
            key = share_key(rule, mid, frac[g], gmem[g], cap, f, m, idle, g)
            if best is None or key < best:
                best = key
        if best is None:
            return out, "isolation" if blocked else "gpu"
        if keep_room and best[0]:
            return out, "gpu"
        g = best[-1]
        if users[g] == 0:
            head -= tdp
        while len(out) < most_node and frac[g] + f <= MILLI and gmem[g] + m <= cap:
            if rule.strands(mid, MILLI - frac[g] - f, cap - gmem[g] - m) > best[0]:
                break  # it came to strand: another GPU may be better now (choose again)
            out.append(Placement(node=i, gpus=(g,), fraction_milli=f))
            frac[g], gmem[g], users[g] = frac[g] + f, gmem[g] + m, users[g] + 1
    if len(out) == most:
        return out, ""
    return out, "cpu" if w.cpu_milli and int(st.cpu[i]) - len(out) * w.cpu_milli < w.cpu_milli else "memory"


def _fit_whole(st: ClusterState, d: Demand, i: int) -> Placement | str:
    """Whole GPUs: the free ones preset to whole use first, then by index."""
    count = int(st.gpu_count[i])
    users, mode, fixed = st.users[i].tolist(), st.mode[i].tolist(), st.fixed[i].tolist()
    ok = (FREE, WHOLE)
    free = [g for g in range(count) if users[g] == 0 and fixed[g] <= WHOLE and mode[g] in ok]
    if len(free) < d.gpus:
        return "gpu"
    free.sort(key=lambda g: fixed[g] < 0)
    chosen = tuple(sorted(free[: d.gpus]))
    return Placement(node=i, gpus=chosen) if st.power_ok(i, d.gpus) else "power"


def _fit_slice(st: ClusterState, w: Workload, d: Demand, i: int) -> Placement | str:
    """A share: the best GPU that takes it by :func:`share_key` (one it leaves usable, busy, left tightest in
    both time and memory); MIG slices: :func:`_mig_fill`."""
    count = int(st.gpu_count[i])
    users, mode, fixed = st.users[i].tolist(), st.mode[i].tolist(), st.fixed[i].tolist()
    want = KIND_MODE[d.kind]
    frac, gmem, cap = st.frac[i].tolist(), st.gmem[i].tolist(), int(st.gmem_cap[i])
    blocked = False
    power_one: bool | None = None
    power_held: bool | None = None
    tdp = int(st.tdp[i])
    best: tuple[tuple[object, ...], int, int] | None = None  # (key, GPU, start): built once chosen
    rule, mid = st.strand, int(st.model_id[i])
    # GPUs in the same state give the same choice, and the first of them wins the tie: each state is
    # looked at once (on a fresh node, one GPU instead of eight).
    seen: set[tuple[object, ...]] = set()
    for gi in range(count):
        if not _mode_fits(fixed[gi], mode[gi], want):
            continue
        tenant_ok = not users[gi] or st.gpu_tenant_ok_at(w, i, gi)
        if not _share_room(frac[gi], gmem[gi], cap, d):
            continue
        state: tuple[object, ...] = (frac[gi], gmem[gi], users[gi] == 0, tenant_ok, mode[gi], fixed[gi])
        if state in seen:
            continue
        seen.add(state)
        start = 0
        key = share_key(rule, mid, frac[gi], gmem[gi], cap, d.fraction_milli, d.memory_mib, users[gi] == 0, gi)
        if not tenant_ok:
            blocked = True
            continue
        if users[gi] == 0:
            if power_one is None:
                power_one = st.power_ok(i, 1)
            if not power_one:
                continue
        elif tdp:
            # A GPU already on adds no draw at one instant. In a scheduler's union over a time window
            # (placement/schedule/timeline.py) it may be on for only part of the window, so joining
            # it is safe only while the union's draw is within every budget: then at each instant
            # the draw with this GPU on is at most the union's.
            if power_held is None:
                power_held = int(st.power_free[st.node_dom[i]].min()) >= 0
            if not power_held:
                continue
        if best is None or key < best[0]:
            best = (key, gi, start)
    if best is None:
        return "isolation" if blocked else "gpu"
    _, gi, start = best
    return Placement(node=i, gpus=(gi,), fraction_milli=d.fraction_milli)


def node_most(st: ClusterState, w: Workload, i: int, most: int) -> int:
    """At most ``most`` replicas of ``w`` on node ``i`` by its free CPU and memory (one with ClusterQueue quotas,
    which are checked replica by replica)."""
    if st.quota is not None and w.queue is not None:
        most = 1
    if w.cpu_milli:
        most = min(most, int(st.cpu[i]) // w.cpu_milli)
    if w.memory_mib:
        most = min(most, int(st.mem[i]) // w.memory_mib)
    return most


def fill_slices(st: ClusterState, w: Workload, d: Demand, i: int, most: int) -> list[Placement]:
    """Up to ``most`` MIG slices of ``w`` (demand ``d``) on node ``i``, in one step: the replicas
    :func:`fit_on_node` would give one by one if each were applied before the next (not applied here).

    The node's checks (quota, CPU, memory, node tenants) are made once and its CPU and memory counted for all
    of them (with ClusterQueue quotas, at most one). The GPUs are ranked once (see :func:`_mig_fill`)."""
    if most <= 0 or node_reason(st, w, i):
        return []
    most = node_most(st, w, i, most)
    return _mig_fill(st, w, d, i, most)[0]


def _mig_fill(st: ClusterState, w: Workload, d: Demand, i: int, most: int) -> tuple[list[Placement], str]:
    """Up to ``most`` MIG slices of ``w`` on node ``i`` (node-level checks already made), as one-by-one fitting
    gives them; with none, the reason (``isolation`` or ``gpu``).

    One slice goes to the best GPU by (idle last, most slices used, most valid placements left after it,
    index), at the start keeping the most placements free; a GPU that took one stays the best while it takes
    more (it got busier, no other GPU changed), so the GPUs are ranked once and filled in that order, each
    until it takes no more. A GPU turned on needs its draw in the node's power domains (their headroom is
    followed as GPUs turn on); a busy one is joined only while no budget is overdrawn."""
    prof = d.profile
    model = st.models[int(st.model_id[i])]
    assert prof is not None and model is not None
    fits = st.migfit  # per GPU, the profiles it may take now (mode and a valid free start; tenants and power aside)
    bit = fits.bit(int(st.model_id[i]), prof.name)
    takes = [gi for gi, x in enumerate(fits.gpu[i].tolist()) if x & bit]
    if not takes:
        return [], "gpu"
    users, masks, counts = st.users[i].tolist(), st.mig_mask[i].tolist(), st.prof_count[i].tolist()
    # GPUs in the same state give the same choice (on a fresh node, one answer for eight GPUs).
    known: dict[tuple[object, ...], tuple[tuple[MigSlot, ...], int]] = {}
    ranked: list[tuple[tuple[int, ...], tuple[MigSlot, ...]]] = []
    blocked = False  # a GPU of another tenant had room (the reason when nothing fits)
    for gi in takes:
        if users[gi] and not st.gpu_tenant_ok_at(w, i, gi):
            blocked = True
            continue
        state = (masks[gi], tuple(counts[gi]), st.layout_slots.get((i, gi)))
        if state not in known:
            known[state] = gpu_fill(st, model, i, gi, masks[gi], counts[gi], prof)
        slots, after = known[state]
        if slots:
            ranked.append(((users[gi] == 0, -masks[gi].bit_count(), -after, gi), slots))
    ranked.sort()
    out: list[Placement] = []
    tdp = int(st.tdp[i])
    head = int(st.power_free[st.node_dom[i]].min()) if tdp else 0  # the tightest budget's watts left
    for key, slots in ranked:
        if len(out) >= most:
            break
        if tdp and head < (tdp if key[0] else 0):
            continue  # an idle GPU's draw does not fit; a busy one: see _fit_slice on joining it
        gpus = (key[-1],)
        out += [Placement(node=i, gpus=gpus, slot=slot) for slot in slots[: most - len(out)]]
        if key[0]:
            head -= tdp
    if out:
        return out, ""
    return out, "isolation" if blocked else "gpu"


def _mode_fits(fixed: int, mode: int, want: int) -> bool:
    """A GPU preset to ``fixed`` (-1: none) and in use as ``mode`` can take work of mode ``want``."""
    return fixed in (-1, want) and mode in (FREE, want)


def share_key(rule: StrandRule, model: int, frac: int, gmem: int, cap: int, f: int, m: int, idle: bool,
              g: int) -> tuple[bool, bool, int, int, int]:
    """The order of GPUs for one more share of ``f`` milli and ``m`` MiB (smallest first) on a node of model id
    ``model``: GPU ``g`` with ``frac`` milli and ``gmem`` of ``cap`` MiB shared (``idle``: no user).

    One that does not strand its scarcer dimension after it (``rule``) first, so that time is not left over
    alone on GPUs whose memory went to memory-heavy shares (nor memory on GPUs whose time went, when memory is
    scarcer); then a busy GPU; then the one left tightest in both (:func:`_share_left`), the least time left,
    the lowest index."""
    return (rule.strands(model, MILLI - frac - f, cap - gmem - m), idle, _share_left(frac, gmem, cap, f, m),
            MILLI - frac - f, g)


def share_strands(st: ClusterState, d: Demand, pl: Placement) -> bool:
    """Whether share ``pl`` (demand ``d``, not applied) strands its GPU (:func:`share_key`'s first field)."""
    i, g = pl.node, pl.gpus[0]
    return st.strand.strands(int(st.model_id[i]), MILLI - int(st.frac[i, g]) - d.fraction_milli,
                             int(st.gmem_cap[i]) - int(st.gmem[i, g]) - d.memory_mib)


def _share_left(frac: int, gmem: int, cap: int, f: int, m: int) -> int:
    """How much a GPU would have left after one more share of ``f`` milli and ``m`` MiB, in the dimension with
    more left (shares and GPU memory each as a part of the GPU, scaled by ``MILLI * cap``): the GPU left
    tightest in both goes first, so that neither its time nor its memory is left over alone."""
    return max((MILLI - frac - f) * cap, (cap - gmem - m) * MILLI)


def _share_room(frac: int, gmem: int, cap: int, d: Demand) -> bool:
    """A share ``d`` fits beside ``frac`` milli and ``gmem`` MiB already shared on a GPU of ``cap`` MiB."""
    return frac + d.fraction_milli <= MILLI and gmem + d.memory_mib <= cap


def gpu_mode_fits(st: ClusterState, i: int, g: int, want: int) -> bool:
    """GPU ``g`` of node ``i`` (its preset mode and its use now) can take work of mode ``want`` (a
    :data:`~capplan.placement.core.state.KIND_MODE` value)."""
    return _mode_fits(int(st.fixed[i, g]), int(st.mode[i, g]), want)


def gpu_takes(st: ClusterState, w: Workload, d: Demand, i: int, g: int) -> str:
    """Whether GPU ``g`` of node ``i`` could take one MIG slice or share of ``w`` (demand ``d``) as it
    stands, node-level limits (:func:`node_reason`) and power aside: ``""``, or the family that rules it
    out: ``mode`` (preset or in use otherwise), ``isolation`` (another tenant), ``gpu`` (no room or no
    valid free slice start)."""
    if not gpu_mode_fits(st, i, g, KIND_MODE[d.kind]):
        return "mode"
    if st.users[i, g] and not st.gpu_tenant_ok_at(w, i, g):
        return "isolation"
    if d.kind == "mig":
        assert d.profile is not None
        model = st.models[int(st.model_id[i])]
        assert model is not None
        return "" if mig_starts(st, model, i, g, d.profile) else "gpu"
    return "" if _share_room(int(st.frac[i, g]), int(st.gmem[i, g]), int(st.gmem_cap[i]), d) else "gpu"


#: Where the constructive planners keep each constraint family (:data:`capplan.model.families.FAMILIES`):
#: per node and GPU in this module and the state's screens; across nodes (a gang, a domain, one model) in
#: the greedy placer, named by path because it sits above this module.
FITS: dict[str, str] = {
    "model": "capplan.placement.core.fleet.FleetArrays.eligible",
    "taint": "capplan.placement.core.fleet.kind_demands",
    "quota": "capplan.placement.core.quota.QuotaBook.room",
    "cpu": "capplan.placement.core.fit.node_reason",
    "memory": "capplan.placement.core.fit.node_reason",
    "gpu": "capplan.placement.core.fit.gpu_takes",
    "mig": "capplan.placement.core.migslots.mig_starts",
    "fraction": "capplan.placement.core.fit.gpu_takes",
    "isolation": "capplan.placement.core.state.ClusterState.tenant_ok_at",
    "power": "capplan.placement.core.state.ClusterState.power_ok",
    "topology": "capplan.placement.greedy.GreedyPlacer.place_in_one_domain",
    "one_model": "capplan.placement.greedy.place_workload",
    "gang": "capplan.placement.greedy.GreedyPlacer.place_group",
}
