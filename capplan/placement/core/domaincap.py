"""What the fleet's domains can hold at most: power budgets and the domain a gang must fit in.

Two cheap relaxations that the bound (:mod:`capplan.placement.core.bound`, the plans' default bound in
:mod:`capplan.placement.core.summary`) applies before its GPU-level LP, which sees neither:

* **Power.** A busy GPU (any GPU that holds work) draws its model's TDP in every domain above it
  (the validator's power rule), so a domain with budget ``W`` holds at most ``floor(W / tdp)`` busy GPUs
  of a model, and never more than the busy GPUs its sub-domains can hold. Summed over the top-level
  domains, per key of node (a bin type, a GPU model), that caps how many GPUs of the key any plan keeps
  busy: :func:`busy_caps`. A GPU of unknown TDP under a budget can never be busy (the validator rejects
  it), so it counts 0.
* **Domains.** A workload with ``topology.required`` places all its replicas in one domain of that level,
  and a gang (``kind: training``) on one GPU model unless ``mixed_models``; a gang is placed whole or not
  at all. The most replicas any one domain can hold (node by node: GPUs, CPU and memory; and the busy GPUs
  its power budgets allow, the budgets above it included) caps what the workload places; a gang that fits
  in no domain places nothing: :func:`replica_caps`.

* **Preset MIG layouts.** A GPU preset to a MIG layout (``gpu_modes`` with a ``layout``, fixed unless
  ``reconfigure: allowed``; always on ``mig_strategy: single`` nodes) hosts only replicas whose profile on
  that model is one of the layout's instances, one replica per instance. So the priorities of a set hold on
  those GPUs at most, per (model, profile), the values of their best replicas that ask that profile there, one
  per preset instance, and a GPU without a fixed layout holds at most one GPU of value:
  :func:`joint_cap`, the most value a set of priorities places together.
* **Waste.** Work every better plan must place wastes GPUs: isolated work (:func:`_isolation_waste`), and MIG
  instances whose memory slices outweigh their compute slices (:func:`_mig_waste`).

All ignore everything else (isolation, taints, other work), so they stay upper bounds.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Collection, Hashable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from capplan.model.problem import Demand, Node, Problem, Workload
from capplan.model.units import UNITS_PER_GPU
from capplan.placement.core.miglayouts import most_alone

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")
Dom = tuple[int, str]  # (level index, domain name)
_NONE = 1 << 60  # no cap


_MEMO: list[tuple[Problem, str, object]] = []  # the last few results per problem: every plan asks for them
_MEMO_SIZE = 10


def _memo(p: Problem, what: str, fn: Callable[[], T]) -> T:
    """``fn()`` once per problem object (problems are immutable)."""
    for q, w, v in _MEMO:
        if q is p and w == what:
            return v  # type: ignore[return-value]
    v = fn()
    _MEMO.append((p, what, v))
    del _MEMO[:-_MEMO_SIZE]
    return v


@dataclass(frozen=True)
class _Tree:
    """The domains above the nodes: each node's chain (outermost first) and the budgets."""

    chain: list[tuple[Dom, ...]]
    budget: dict[Dom, int]
    parent: dict[Dom, Dom | None]

    @classmethod
    def of(cls, p: Problem) -> _Tree:
        """The tree of ``p``, once per problem."""
        return _memo(p, "tree", lambda: cls._build(p))

    @classmethod
    def _build(cls, p: Problem) -> _Tree:
        levels = p.cluster.levels[:-1]
        index = {lvl: k for k, lvl in enumerate(levels)}
        budget = {(index[d.level], d.name): d.power_w for d in p.cluster.domains
                  if d.power_w is not None and d.level in index}
        chains: dict[tuple[str, ...], tuple[Dom, ...]] = {}  # nodes of one rack share a path
        parent: dict[Dom, Dom | None] = {}
        for path in {n.path for n in p.cluster.nodes}:
            c = chains[path] = tuple(enumerate(path[:len(levels)]))
            for k, d in enumerate(c):
                parent.setdefault(d, c[k - 1] if k else None)
        chain = [chains[n.path] for n in p.cluster.nodes]
        return cls(chain=chain, budget={k: int(v) for k, v in budget.items() if v is not None}, parent=parent)


def _tdp(p: Problem, n: Node) -> int | None:
    return p.catalog.get(n.gpu_model).tdp_w if n.gpu_model and n.gpus else None


def _limit(budget: int, tdp: int | None) -> int:
    """Busy GPUs of TDP ``tdp`` a budget allows (unknown TDP: none)."""
    if tdp is None:
        return 0
    return budget // tdp if tdp > 0 else _NONE


def _domain_caps(p: Problem, tree: _Tree, key_of: Sequence[K | None]) -> tuple[dict[Dom, dict[K, int]], dict[K, int]]:
    """Busy-GPU caps per domain and key (the domain's own and its sub-domains' budgets) and per key over
    the fleet."""
    tdp_of: dict[K, int | None] = {}
    tdp_model: dict[str | None, int | None] = {}
    leaf: dict[Dom, dict[K, int]] = defaultdict(lambda: defaultdict(int))
    free: dict[K, int] = defaultdict(int)  # GPUs under no domain
    for i, n in enumerate(p.cluster.nodes):
        k = key_of[i]
        if k is None or not n.gpus:
            continue
        if k not in tdp_of:
            if n.gpu_model not in tdp_model:
                tdp_model[n.gpu_model] = _tdp(p, n)
            tdp_of[k] = tdp_model[n.gpu_model]
        c = tree.chain[i]
        if c:
            leaf[c[-1]][k] += n.gpus
        else:
            free[k] += n.gpus
    depth = max((len(c) for c in tree.chain), default=0)
    caps: dict[Dom, dict[K, int]] = {}
    level: dict[Dom, dict[K, int]] = dict(leaf)
    for _ in range(depth):
        up: dict[Dom, dict[K, int]] = defaultdict(lambda: defaultdict(int))
        for d, per in level.items():
            b = tree.budget.get(d)
            capped = {key: (v if b is None else min(v, _limit(b, tdp_of[key]))) for key, v in per.items()}
            caps[d] = capped
            par = tree.parent.get(d)
            for key, v in capped.items():
                if par is None:
                    free[key] += v
                else:
                    up[par][key] += v
        level = up
    return caps, dict(free)


def busy_caps(p: Problem, key_of: Sequence[K | None]) -> dict[K, int]:
    """Most GPUs of each key (``key_of``: node index -> key, None for nodes left out) that any plan keeps
    busy under the power budgets: the key's GPUs where no budget binds."""
    tree = _Tree.of(p)
    if not tree.budget:
        out: dict[K, int] = defaultdict(int)
        for i, n in enumerate(p.cluster.nodes):
            k = key_of[i]
            if k is not None and n.gpus:
                out[k] += n.gpus
        return dict(out)
    return _domain_caps(p, tree, key_of)[1]


def busy_gpus(p: Problem) -> int:
    """Most GPUs of the fleet any plan keeps busy (power budgets); placed value never exceeds it."""
    return _memo(p, "busy", lambda: sum(busy_caps(p, [n.gpu_model if n.gpus else None
                                                       for n in p.cluster.nodes]).values()))


def _per_gpu(d: Demand, model_name: str, p: Problem) -> tuple[int, int]:
    """(replicas per GPU, GPUs per replica) of a demand: whole GPUs take ``gpus`` GPUs each."""
    if d.kind == "whole":
        return 1, d.gpus
    if d.kind == "mig" and d.profile is not None:
        model = p.catalog.get(model_name)
        pi = next((k for k, pr in enumerate(model.profiles) if pr.name == d.profile.name), None)
        return (most_alone(model, pi) if pi is not None else 0), 1
    return (UNITS_PER_GPU // d.units if d.units else 0), 1


def _node_fit(p: Problem, w: Workload, n: Node) -> int:
    """Most replicas of ``w`` one node holds by its GPUs, CPU and memory alone (0: it cannot host one)."""
    d = p.demand_on(w, n)
    if d is None or d.kind == "none" or not n.gpus or n.gpu_model is None:
        return 0
    per, size = _per_gpu(d, n.gpu_model, p)
    most = n.gpus // size * per
    if w.cpu_milli:
        most = min(most, n.cpu_milli // w.cpu_milli)
    if w.memory_mib:
        most = min(most, n.memory_mib // w.memory_mib)
    return most


def replica_caps(p: Problem) -> dict[str, int]:
    """Workload name -> most replicas any plan places (:func:`_domain_fits`), once per problem."""
    return dict(_memo(p, "domains", lambda: _domain_fits(p))[0])


def gang_models(p: Problem) -> dict[str, frozenset[str]]:
    """Gang name -> the GPU models it can be placed on whole (one model, in one domain of its required level),
    for the gangs (``one_model``) that some model able to host a replica cannot host whole (:func:`_domain_fits`)."""
    return dict(_memo(p, "domains", lambda: _domain_fits(p))[1])


def _domain_fits(p: Problem) -> tuple[dict[str, int], dict[str, frozenset[str]]]:
    """Workload name -> most replicas any plan places, for the workloads a domain limits below ``replicas``.

    A workload with ``topology.required`` and every gang counts what the best single domain of that level
    (the whole fleet for a gang without one) holds, on one GPU model for a gang (``one_model``): node by
    node (:func:`_node_fit`) and at most ``busy GPUs the domain's power budgets allow / GPUs per replica``.
    A gang that fits nowhere gets 0. Second: for a gang that fits, the models it fits on whole, when that
    leaves out a model that hosts one of its replicas.
    """
    wanted = [w for w in p.workloads if w.has_gpu_demand and p.replica_value(w) > 0
              and (w.is_gang or (w.topology.required and w.topology.required != p.cluster.levels[-1]))]
    if not wanted:
        return {}, {}
    tree = _Tree.of(p)
    nodes = p.cluster.nodes
    levels = p.cluster.levels[:-1]
    kinds: dict[tuple[object, ...], int] = {}
    kind_of = [kinds.setdefault((n.gpu_model, n.gpus, n.cpu_milli, n.memory_mib, n.mig_strategy,
                                 n.single_profile if n.mig_strategy == "single" else None), len(kinds))
               if n.gpus and n.gpu_model else None for n in nodes]
    model_of = [p.catalog.get(n.gpu_model).name if n.gpus and n.gpu_model else None for n in nodes]
    caps, fleet = _domain_caps(p, tree, model_of) if tree.budget else ({}, {})
    # per required level (None: the whole fleet): domain -> (node kind -> count), model -> GPUs, power caps
    members: dict[int | None, dict[Dom | None, dict[int, int]]] = {}
    sample = {k: next(i for i, x in enumerate(kind_of) if x == k) for k in kinds.values()}

    def count(lvl: int | None) -> dict[Dom | None, dict[int, int]]:
        if lvl not in members:
            per: dict[Dom | None, dict[int, int]] = defaultdict(lambda: defaultdict(int))
            for i, k in enumerate(kind_of):
                if k is not None:
                    per[tree.chain[i][lvl] if lvl is not None else None][k] += 1
            members[lvl] = per
        return members[lvl]

    def power_cap(dom: Dom | None, model: str) -> int:
        """Busy GPUs of ``model`` in ``dom`` its own, its sub-domains' and its ancestors' budgets allow."""
        if not tree.budget:
            return _NONE
        if dom is None:
            return fleet.get(model, _NONE)
        out = caps.get(dom, {}).get(model, _NONE)
        tdp = p.catalog.get(model).tdp_w
        a = tree.parent.get(dom)
        while a is not None:
            if a in tree.budget:
                out = min(out, _limit(tree.budget[a], tdp))
            a = tree.parent.get(a)
        return out

    memo: dict[tuple[object, ...], tuple[int, dict[str, int]]] = {}
    out: dict[str, int] = {}
    models: dict[str, frozenset[str]] = {}
    for w in wanted:
        req = w.topology.required
        lvl = levels.index(req) if req in levels else None
        shape = (w.gpus, w.mig, w.gpu_fraction, w.gpu_memory_gib, w.gpu_models, w.cpu_milli, w.memory_mib,
                 w.mig_strategy, w.one_model, lvl)
        if shape not in memo:
            fit = {k: _node_fit(p, w, nodes[i]) for k, i in sample.items()}
            per_model: dict[str, tuple[int, int]] = {}  # model -> (replicas per GPU, GPUs per replica)
            for k, i in sample.items():
                d = p.demand_on(w, nodes[i])
                if fit[k] and d is not None and model_of[i] is not None:
                    per_model.setdefault(str(model_of[i]), _per_gpu(d, str(model_of[i]), p))
            most = 0
            held: dict[str, int] = defaultdict(int)  # per model, the most one domain holds
            for dom, kc in count(lvl).items():
                by_model: dict[str, int] = defaultdict(int)
                for k, c in kc.items():
                    if fit[k]:
                        by_model[str(model_of[sample[k]])] += c * fit[k]
                total = 0
                for m, reps in by_model.items():
                    pc = power_cap(dom, m)
                    per, size = per_model[m]
                    if pc < _NONE:
                        reps = min(reps, pc // size * per)
                    held[m] = max(held[m], reps)
                    total += reps
                most = max(most, max(held.values(), default=0) if w.one_model else total)
            memo[shape] = most, dict(held)
        most, best = memo[shape]
        if w.is_gang and most < w.replicas:
            out[w.name] = 0
        elif most < w.replicas:
            out[w.name] = most
        elif w.one_model and any(v < w.replicas for v in best.values()):
            models[w.name] = frozenset(m for m, v in best.items() if v >= w.replicas)
    return out, models


@dataclass(frozen=True)
class _Presets:
    """The GPUs preset to a fixed MIG layout, once per problem.

    ``free``: per GPU model, its GPUs without a fixed layout; ``slots``: per (model, representative node index,
    profile name) the preset instances of that profile on the model's fixed-layout GPUs of nodes like the
    representative (same model, MIG strategy and single profile: what a replica's demand there depends on).
    """

    free: dict[str, int]
    slots: dict[tuple[str, int, str], int]

    @classmethod
    def of(cls, p: Problem) -> _Presets:
        return _memo(p, "presets", lambda: cls._build(p))

    @classmethod
    def _build(cls, p: Problem) -> _Presets:
        free: dict[str, int] = defaultdict(int)
        slots: dict[tuple[str, int, str], int] = defaultdict(int)
        if not any(m.layout is not None for n in p.cluster.nodes for m in n.gpu_modes):
            return cls(free={}, slots={})  # no fixed layout: joint_cap is the busy GPUs
        rep: dict[tuple[str, str, str | None], int] = {}
        busy = {(a.node, g) for a in p.running for g in a.gpus}  # running work: counted as a free GPU
        # nodes alike in model, GPUs, strategy and presets count once (unless running work is on them)
        kinds: dict[tuple[object, ...], list[int]] = defaultdict(list)
        for i, n in enumerate(p.cluster.nodes):
            if n.gpus and n.gpu_model:
                alone = n.name if busy and n.gpu_modes else None
                kinds[(n.gpu_model, n.gpus, n.mig_strategy, n.gpu_modes, alone)].append(i)
        for members in kinds.values():
            i = members[0]
            n = p.cluster.nodes[i]
            model = p.catalog.get(str(n.gpu_model)).name
            fixed = p.reconfigure != "allowed" or n.mig_strategy == "single"
            layouts = {m.gpu: m.layout for m in n.gpu_modes if m.mode == "mig" and m.layout is not None} \
                if fixed else {}
            for g in range(n.gpus):
                lay = layouts.get(g)
                if lay is None or (n.name, g) in busy:
                    free[model] += len(members)
                    continue
                r = rep.setdefault((model, n.mig_strategy, n.single_profile if n.mig_strategy == "single" else None), i)
                for s in lay:
                    slots[(model, r, s.profile)] += len(members)
        return cls(free=dict(free), slots=dict(slots))


def joint_cap(p: Problem, prios: Collection[int], forced: Collection[int] = (), guaranteed: bool = False) -> int:
    """Most value (demand units) the priorities ``prios`` place together in any plan that places every replica of
    the priorities ``forced`` (and, with ``guaranteed``, of every guaranteed workload).

    Per GPU model, at most the busy GPUs its power budgets allow (:func:`busy_caps`), and at most one GPU of
    value per GPU without a fixed MIG layout plus, on the GPUs preset to one (:class:`_Presets`), per
    (model, profile) the values of the best replicas of ``prios`` that ask that profile there, one per preset
    instance; less what isolation wastes (:func:`_isolation_waste`) and what the MIG instances of the forced
    work waste beside it (:func:`_mig_waste`). Without fixed layouts and forced work: :func:`busy_gpus`.
    """
    pre = _Presets.of(p)
    key = (frozenset(prios), frozenset(forced), guaranteed)
    done: dict[tuple[frozenset[int], frozenset[int], bool], int] = _memo(p, "joint", dict)
    if key not in done:
        busy = busy_gpus(p) * UNITS_PER_GPU
        cap = _joint(p, pre, set(key[0])) if pre.slots else busy
        isolated = _memo(p, "isolated", lambda: any(w.isolation in ("tenant", "node") for w in p.workloads))
        if key[1] or guaranteed:
            on_busy = on_all = mig = 0
            if isolated:
                on_busy, on_all, mig = _isolation_waste(p, key[0], key[1], guaranteed)
            # the tenants' isolated MIG GPUs are some of the GPUs holding MIG instances: the larger of the two
            on_busy += max(0, _mig_waste(p, key[0], key[1], guaranteed) - mig)
            cap = min(cap, busy - on_busy, p.cluster.gpus_total * UNITS_PER_GPU - on_all)
        done[key] = cap
    return done[key]


@dataclass
class _Tenant:
    """One tenant's work per priority (:func:`_isolation_waste`): value in all, value in shares, and its MIG
    replicas' least excess (:func:`_mig_excess`) and its shares' (their GPU memory over the largest GPU memory
    they may use, less their time) where negative (they may fill the GPUs of its isolated ones);
    and of its isolated work, per priority and guaranteed or not: shares' GPU time and GPU memory in GPUs (each
    replica's memory over the largest GPU memory it may use), node-isolated work's GPUs, CPU and memory, and the
    tenant-isolated MIG replicas' least excess, and that of those among them where negative."""

    value: dict[int, int]
    share_value: dict[int, int]
    mig_fill: dict[int, float]
    share_fill: dict[int, float]
    iso: dict[tuple[int, bool], list[float]]  # (priority, guaranteed) -> [share time, share memory, node GPUs,
    #                                           node CPU, node memory, MIG excess, its negative part, share
    #                                           excess, its negative part]


def _mig_excess(p: Problem, w: Workload, models: list[str]) -> float | None:
    """Least, over the models that host a replica of ``w`` as a MIG instance, of its memory slices' share of the
    GPU's less its compute slices' share (None: no such model). A GPU's instances hold at most all its memory
    slices and their value is at most their compute share, so GPUs holding MIG instances number at least their
    value plus the sum of their excesses."""
    out = None
    for m in models:
        d = p.model_demand(w, m)
        if d is None or d.kind != "mig" or d.profile is None:
            continue
        g = p.catalog.get(m)
        x = d.profile.memory_slices / g.memory_slices - d.profile.compute_slices / g.compute_slices
        out = x if out is None else min(out, x)
    return out


def full_value(p: Problem) -> dict[int, int]:
    """Value (demand units) of every replica per priority: a plan placing that much places every replica that
    has a value."""
    def build() -> dict[int, int]:
        out: dict[int, int] = defaultdict(int)
        for w in p.workloads:
            out[w.priority] += p.replica_value(w) * w.replicas
        return dict(out)
    return _memo(p, "full", build)


def _tenants(p: Problem) -> dict[str | None, _Tenant]:
    """Per tenant, its work (:class:`_Tenant`), once per problem."""
    def build() -> dict[str | None, _Tenant]:
        gpu_nodes = [n for n in p.cluster.nodes if n.gpus and n.gpu_model]
        mem_of = {m: p.catalog.get(m).memory_gib or 0.0 for m in {str(n.gpu_model) for n in gpu_nodes}}
        mig_models = sorted(m for m in mem_of if p.catalog.get(m).partitioning != "none")
        excess_of: dict[tuple[object, ...], float | None] = {}
        out: dict[str | None, _Tenant] = {}
        most_of: dict[tuple[object, ...], float] = {}  # per allowed models and GPU memory: the most a share may use
        for w in p.workloads:
            v = p.replica_value(w)
            if not v:
                continue
            t = out.get(w.tenant)
            if t is None:
                t = out[w.tenant] = _Tenant(defaultdict(int), defaultdict(int), defaultdict(float), defaultdict(float),
                                            {})
            t.value[w.priority] += v * w.replicas
            if w.gpu_fraction is not None:
                t.share_value[w.priority] += v * w.replicas
            excess = None
            if w.mig is not None:
                shape = (w.mig, w.gpu_memory_gib, w.gpu_models, w.mig_strategy)
                if shape not in excess_of:
                    excess_of[shape] = _mig_excess(p, w, mig_models)
                excess = excess_of[shape]
                if excess is not None and excess < 0 and w.isolation != "tenant":
                    t.mig_fill[w.priority] += excess * w.replicas
            most = 0.0
            if w.gpu_fraction is not None:
                key = (w.gpu_models, w.gpu_memory_gib)
                if key not in most_of:
                    most_of[key] = max((mem_of[m] for m in mem_of if p.model_demand(w, m) is not None), default=0.0)
                most = most_of[key]
                share_excess = ((w.gpu_memory_gib or 0.0) / most if most else 0.0) - v / UNITS_PER_GPU
                if share_excess < 0 and w.isolation != "tenant":
                    t.share_fill[w.priority] += share_excess * w.replicas
            if w.isolation not in ("tenant", "node"):
                continue
            row = t.iso.setdefault((w.priority, w.sla == "guaranteed"), [0.0] * 9)
            if w.isolation == "tenant" and excess is not None:
                row[5] += excess * w.replicas
                row[6] += min(0.0, excess) * w.replicas
            time_gpus = v / UNITS_PER_GPU if w.gpus is None else float(w.gpus)  # a GPU holds at most one of value
            if w.isolation == "tenant" and w.gpu_fraction is not None:
                row[0] += w.replicas * time_gpus
                row[1] += w.replicas * (w.gpu_memory_gib or 0.0) / most if most else 0.0
                row[7] += w.replicas * share_excess
                row[8] += w.replicas * min(0.0, share_excess)
            elif w.isolation == "node":
                row[2] += w.replicas * time_gpus
                row[3] += w.replicas * w.cpu_milli
                row[4] += w.replicas * w.memory_mib
        return out
    return _memo(p, "tenants", build)


def _isolation_waste(p: Problem, prios: frozenset[int], forced: frozenset[int], guaranteed: bool
                     ) -> tuple[int, int, int]:
    """Value (demand units) isolation keeps off the GPUs in every plan that places all of ``forced``'s isolated
    replicas (and the guaranteed ones): (waste on busy GPUs, waste on all GPUs, the part of the first on GPUs
    holding MIG instances).

    The GPUs that hold a tenant's ``isolation: tenant`` shares hold no other tenant's replicas, and only shares (a
    GPU runs one mode): at least ``ceil(max(their GPU time, their GPU memory / the GPU's memory))`` GPUs holding at
    most the tenant's shares of ``prios`` in value, and at least their value plus the shares' excess (GPU memory
    over the largest GPU memory they may use, less their time; the tenant's other shares of ``prios`` counted where
    it is negative). Those that hold its tenant-isolated MIG instances hold only its
    MIG instances: they number at least the value on them plus the excess (:func:`_mig_excess`) of the isolated
    ones and of the tenant's other MIG replicas of ``prios`` whose excess is negative (all of them, at worst).
    The nodes that hold its ``isolation: node`` replicas hold no other tenant's replicas: at least as many nodes
    as their GPUs, CPU and memory need (each node at most the largest), each with at least the fewest GPUs of a
    GPU node, holding at most the tenant's value of ``prios``. Tenants' regions are disjoint, so their wastes add
    up (per tenant the larger of the GPU-level ones together and the node-level one).
    """
    def extremes() -> tuple[int, int, int, int] | None:
        nodes = [n for n in p.cluster.nodes if n.gpus and n.gpu_model]
        if not nodes:
            return None
        return (min(n.gpus for n in nodes), max(n.gpus for n in nodes), max(n.cpu_milli for n in nodes),
                max(n.memory_mib for n in nodes))
    ext = _memo(p, "gpu_nodes", extremes)
    if ext is None or p.running:  # running replicas may break isolation and stay (the validator keeps them)
        return 0, 0, 0
    g_min, g_max, c_max, m_max = ext
    on_busy = on_all = on_mig = 0
    for t in _tenants(p).values():
        need = [0.0] * 9
        fill = sum(t.mig_fill.get(q, 0.0) for q in prios)
        share_fill = sum(t.share_fill.get(q, 0.0) for q in prios)
        for (q, g), row in t.iso.items():
            if q in forced or (guaranteed and g):
                need = [a + b for a, b in zip(need, row, strict=True)]
            elif q in prios:
                fill += row[6]  # isolated replicas not forced may fill those GPUs too
                share_fill += row[8]
        share = node = 0
        mig = max(0, math.floor((need[5] + fill) * UNITS_PER_GPU))
        if need[0] or need[1]:
            k = math.ceil(max(need[0], need[1]) - 1e-9)
            share = max(0, k * UNITS_PER_GPU - sum(t.share_value.get(q, 0) for q in prios),
                        math.floor((need[7] + share_fill) * UNITS_PER_GPU))
        if need[2]:
            k = math.ceil(max(need[2] / g_max, need[3] / c_max if c_max else 0.0, need[4] / m_max if m_max else 0.0)
                          - 1e-9)
            node = max(0, k * g_min * UNITS_PER_GPU - sum(t.value.get(q, 0) for q in prios))
        on_busy += share + mig
        on_all += max(share + mig, node)
        on_mig += mig
    return on_busy, on_all, on_mig


def _mig_waste(p: Problem, prios: frozenset[int], forced: frozenset[int], guaranteed: bool) -> int:
    """Value (demand units) the GPUs holding MIG instances lose in every plan that places every replica of the
    priorities ``forced`` (and, with ``guaranteed``, of every guaranteed workload), counting the value of ``prios``.

    A GPU's instances take at most all its memory slices, and each is worth at most its compute slices' share
    of the GPU (the value of a replica is its smallest compute share over the models it may use), so the GPUs
    holding MIG instances lose at least the sum over their instances of memory share less compute share
    (:func:`_mig_excess`, the least over the models): that of every forced replica, and at worst that of every
    other replica of ``prios`` whose excess is negative (it may fill those GPUs). Two 3g.40gb on an H100 take its
    eight memory slices for 6/7 of its value: 1/7 lost, unless 1g.10gb or 2g.20gb instances (excess -1/56 and
    -1/28) fill beside a 3g.40gb instead. The tenants' isolated MIG instances are among these
    (:func:`_isolation_waste` counts them on their own GPUs).
    """
    rows = _memo(p, "mig_excess", lambda: _mig_rows(p))
    total = 0.0
    for (q, g), (excess, negative) in rows.items():
        if q in forced or (guaranteed and g):
            total += excess
        elif q in prios:
            total += negative
    return max(0, math.floor(total * UNITS_PER_GPU))


def _mig_rows(p: Problem) -> dict[tuple[int, bool], tuple[float, float]]:
    """Per (priority, guaranteed), the MIG replicas' summed least excess (:func:`_mig_excess`) and its negative
    part."""
    models = sorted({str(n.gpu_model) for n in p.cluster.nodes if n.gpus and n.gpu_model
                     and p.catalog.get(str(n.gpu_model)).partitioning != "none"})
    excess_of: dict[tuple[object, ...], float | None] = {}
    out: dict[tuple[int, bool], tuple[float, float]] = {}
    for w in p.workloads:
        if w.mig is None or not p.replica_value(w):
            continue
        shape = (w.mig, w.gpu_memory_gib, w.gpu_models, w.mig_strategy)
        if shape not in excess_of:
            excess_of[shape] = _mig_excess(p, w, models)
        x = excess_of[shape]
        if x is None:
            continue
        key = (w.priority, w.sla == "guaranteed")
        a, b = out.get(key, (0.0, 0.0))
        out[key] = (a + x * w.replicas, b + min(0.0, x) * w.replicas)
    return out


def _offers(p: Problem, pre: _Presets) -> dict[tuple[str, int, str], dict[tuple[int, int], int]]:
    """Per preset pool (:attr:`_Presets.slots`): replicas per (priority, replica value) of the workloads whose
    demand on the pool's nodes is its profile, once per problem."""
    def build() -> dict[tuple[str, int, str], dict[tuple[int, int], int]]:
        nodes = p.cluster.nodes
        reps = sorted({r for _, r, _ in pre.slots})
        out: dict[tuple[str, int, str], dict[tuple[int, int], int]] = {k: defaultdict(int) for k in pre.slots}
        shapes: dict[tuple[object, ...], list[tuple[str, int, str]]] = {}
        for w in p.workloads:
            if w.mig is None or not p.replica_value(w):
                continue
            shape = (w.mig, w.gpu_memory_gib, w.gpu_models, w.mig_strategy)
            pools = shapes.get(shape)
            if pools is None:
                pools = []
                for r in reps:
                    d = p.demand_on(w, nodes[r])
                    if d is not None and d.kind == "mig" and d.profile is not None:
                        key = (p.catalog.get(str(nodes[r].gpu_model)).name, r, d.profile.name)
                        if key in out:
                            pools.append(key)
                shapes[shape] = pools
            for key in pools:
                out[key][(w.priority, p.replica_value(w))] += w.replicas
        return out
    return _memo(p, "offers", build)


def _joint(p: Problem, pre: _Presets, prios: set[int]) -> int:
    busy = _memo(p, "busy_models", lambda: busy_caps(p, [p.catalog.get(n.gpu_model).name if n.gpus and n.gpu_model
                                                          else None for n in p.cluster.nodes]))
    on_preset: dict[str, int] = defaultdict(int)
    for key, offers in _offers(p, pre).items():
        left = pre.slots[key]
        for value, n in sorted(((v, n) for (q, v), n in offers.items() if q in prios), reverse=True):
            take = min(left, n)
            on_preset[key[0]] += take * value
            left -= take
            if not left:
                break
    models = set(busy) | set(pre.free) | set(on_preset)
    return sum(min(busy.get(m, 0) * UNITS_PER_GPU, pre.free.get(m, 0) * UNITS_PER_GPU + on_preset[m])
               for m in models)
