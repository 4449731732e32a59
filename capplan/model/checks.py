"""Cross-reference checks of a :class:`~capplan.model.problem.Problem` (run once, when it is built).

Field-level rules live on the pydantic models; the rules here need the catalog or several
entities at once: unique names, known GPU models and MIG profiles, existing topology levels,
valid pre-set MIG layouts and a running state that fits the cluster.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from capplan.model.catalog import GpuModel
from capplan.model.errors import ErrorList, InputError, suggest

if TYPE_CHECKING:
    from capplan.model.plan import MigSlot
    from capplan.model.problem import Node, Problem, Workload


def check_layout(model: GpuModel, layout: tuple[MigSlot, ...], path: str) -> None:
    """Check that a MIG layout is valid on ``model``: known profiles, allowed starts, no overlap."""
    used = 0
    counts: dict[str, int] = {}
    for j, slot in enumerate(layout):
        prof = model.profile(slot.profile, f"{path}[{j}].profile")
        if slot.start not in prof.starts:
            raise InputError(f"{path}[{j}].start", f"{prof.name} on {model.name} may start only at "
                                                   f"{list(prof.starts)}, not {slot.start}")
        mask = ((1 << prof.memory_slices) - 1) << slot.start
        if used & mask:
            raise InputError(f"{path}[{j}]", f"{prof.name} at start {slot.start} overlaps another instance")
        used |= mask
        counts[prof.name] = counts.get(prof.name, 0) + 1
        if counts[prof.name] > prof.max_count:
            raise InputError(f"{path}[{j}]", f"at most {prof.max_count} x {prof.name} fit on one GPU")
    if model.homogeneous and len(counts) > 1:
        raise InputError(path, f"{model.name} runs one partition mode per GPU; do not mix {sorted(counts)}")


def check_problem(p: Problem) -> None:
    """Raise :class:`InputError` with the cross-reference errors of ``p`` (all of them, up to a cap)."""
    cl = p.cluster
    levels = cl.levels
    if not levels or levels[-1] != "node":
        raise InputError("cluster.levels", "the innermost topology level must be `node`, e.g. [rack, node]")
    if len(set(levels)) != len(levels):
        raise InputError("cluster.levels", "topology levels must be distinct")
    domains: dict[str, set[str]] = {lvl: set() for lvl in levels[:-1]}
    for d in cl.domains:
        if d.level not in domains:
            raise InputError("cluster.levels", f"domain {d.name!r} has level {d.level!r}, not in {list(levels)}")
        if d.name in domains[d.level]:
            raise InputError(f"cluster.{d.level}s", f"duplicate {d.level} name {d.name!r}")
        domains[d.level].add(d.name)
    seen_nodes: set[str] = set()
    errors = ErrorList()
    for n in cl.nodes:
        with errors.catch():
            _check_node(p, n, levels, domains, seen_nodes)
    with errors.catch():
        _check_interruptions(p)
    with errors.catch():
        _check_workloads(p, set(levels))
    with errors.catch():
        _check_queues(p)
    if not errors:  # the running state is checked against a sound cluster and workloads
        with errors.catch():
            _check_running(p)
    errors.raise_any()


def _check_node(p: Problem, n: Node, levels: tuple[str, ...], domains: dict[str, set[str]],
                seen_nodes: set[str]) -> None:
    where = f"cluster node {n.name!r}"
    if n.name in seen_nodes:
        raise InputError(where, f"duplicate node name {n.name!r}; node names must be unique")
    seen_nodes.add(n.name)
    if len(n.path) != len(levels) - 1:
        raise InputError(where, f"node must sit inside one domain of each level {list(levels[:-1])}")
    for lvl, dom in zip(levels[:-1], n.path, strict=True):
        if dom not in domains[lvl]:
            raise InputError(where, f"unknown {lvl} {dom!r}")
    if (n.gpu_model is None) != (n.gpus == 0):
        raise InputError(f"{where}.gpu", "give both `gpu` (the model) and `gpus` (count > 0), "
                                         "or neither for a CPU-only node")
    model = p.catalog.get(n.gpu_model, f"{where}.gpu") if n.gpu_model else None
    if model is not None and model.name != n.gpu_model:
        raise InputError(f"{where}.gpu", f"use the canonical model name {model.name!r}")
    seen_gpu: set[int] = set()
    for m in n.gpu_modes:
        if m.gpu >= n.gpus or m.gpu in seen_gpu:
            raise InputError(f"{where}.gpu_modes", f"GPU index {m.gpu} is out of range or repeated "
                                                   f"(the node has GPUs 0..{n.gpus - 1})")
        seen_gpu.add(m.gpu)
        assert model is not None
        if m.mode == "mig" and not model.supports_mig:
            raise InputError(f"{where}.gpu_modes", f"{model.name} does not support MIG")
        if m.layout is not None:
            if m.mode != "mig":
                raise InputError(f"{where}.gpu_modes", "a MIG layout needs mode: mig")
            check_layout(model, m.layout, f"{where}.gpu_modes.layout")
    if n.mig_strategy == "single" and any(m.mode == "mig" for m in n.gpu_modes) and n.single_profile is None:
        raise InputError(f"{where}.gpu_modes", "a node with mig_strategy: single runs MIG on every GPU with "
                                               "instances of one profile (a layout per GPU), or no MIG at all")


def _check_workloads(p: Problem, levels: set[str]) -> None:
    names: set[str] = set()
    all_profiles = {pr.name for m in p.catalog.models for pr in m.profiles}
    errors = ErrorList()
    for i, w in enumerate(p.workloads):
        with errors.catch():
            _check_workload(p, i, w, names, all_profiles, levels)
    errors.raise_any()


def _check_workload(p: Problem, i: int, w: Workload, names: set[str], all_profiles: set[str],
                    levels: set[str]) -> None:
    from capplan.model.problem import unknown_profile_error

    path = f"workloads[{i}]"
    if w.name in names:
        raise InputError(f"{path}.name", f"duplicate workload name {w.name!r}; names must be unique")
    names.add(w.name)
    models = [p.catalog.get(m, f"{path}.gpu_models[{j}]") for j, m in enumerate(w.gpu_models or ())]
    if w.gpu_models is not None and not w.gpu_models:
        raise InputError(f"{path}.gpu_models", "an empty list allows no GPU; omit the field to allow any")
    if w.mig is not None and w.mig != "auto":
        if w.mig not in all_profiles:
            present = w.gpu_models or [n.gpu_model for n in p.cluster.nodes if n.gpu_model]
            raise unknown_profile_error(f"{path}.mig", w.mig, p.catalog, present)
        for j, m in enumerate(models):
            if w.mig not in {pr.name for pr in m.profiles}:
                raise InputError(f"{path}.gpu_models[{j}]", f"{m.name} does not support profile {w.mig!r}")
    _check_goodput(p, w, path)
    for field in ("required", "preferred"):
        lvl = getattr(w.topology, field)
        if lvl is not None and lvl not in levels:
            raise InputError(f"{path}.topology.{field}",
                             f"unknown topology level {lvl!r}{suggest(lvl, levels)}; levels: {sorted(levels)}")


def _check_goodput(p: Problem, w: Workload, path: str) -> None:
    """``checkpoint``, ``checkpoint_interval`` and ``spares``: a training gang of whole GPUs with interruptions."""
    if w.checkpoint is None:
        for key, unset in (("checkpoint_interval", None), ("spares", 0)):
            if getattr(w, key) != unset:
                raise InputError(f"{path}.{key}", "needs checkpoint (the time to write one checkpoint, e.g. 6m), "
                                                  f"which enables the goodput model; give checkpoint or drop {key}")
        return
    if w.kind != "training" or w.gpus is None:
        raise InputError(f"{path}.checkpoint", "applies to training gangs of whole GPUs; set kind: training and "
                                               "gpus, or drop checkpoint")
    if p.interruptions is None:
        raise InputError(f"{path}.checkpoint", "needs the scenario's top-level `interruptions:` (at least "
                                               "gpu_failure_rate, interruptions per GPU-hour); see docs/formats.md")


def _check_interruptions(p: Problem) -> None:
    it = p.interruptions
    if it is None:
        return
    for name in it.models:
        model = p.catalog.get(name, f"interruptions.models.{name}")
        if model.name != name:
            raise InputError(f"interruptions.models.{name}", f"use the canonical model name {model.name!r}")
def _check_queues(p: Problem) -> None:
    """Flavors and ClusterQueues: unique names, known flavors and nodes, one entry per flavor and resource."""
    flavors: set[str] = set()
    for i, f in enumerate(p.flavors):
        if f.name in flavors:
            raise InputError(f"quotas.flavors[{i}].name", f"duplicate flavor name {f.name!r}")
        flavors.add(f.name)
        for n in f.nodes or ():
            if n not in p.cluster.node_index:
                raise InputError(f"quotas.flavors[{i}].nodes", f"unknown node {n!r}{suggest(n, p.cluster.node_index)}")
    queues: set[str] = set()
    for i, q in enumerate(p.queues):
        path = f"quotas.queues[{i}]"
        if q.name in queues:
            raise InputError(f"{path}.name", f"duplicate ClusterQueue name {q.name!r}")
        queues.add(q.name)
        seen: set[tuple[str, str]] = set()
        for j, e in enumerate(q.quotas):
            if e.flavor not in flavors:
                raise InputError(f"{path}.quotas[{j}].flavor",
                                 f"unknown flavor {e.flavor!r}{suggest(e.flavor, flavors)}; "
                                 "list it under quotas.flavors")
            if (e.flavor, e.resource) in seen:
                raise InputError(f"{path}.quotas[{j}]", f"{e.resource} of flavor {e.flavor} is given twice")
            seen.add((e.flavor, e.resource))
            if q.cohort is None and (e.borrowing_limit is not None or e.lending_limit is not None):
                raise InputError(f"{path}.quotas[{j}]", "borrowing_limit and lending_limit need a cohort; "
                                                        f"give {q.name} a cohort or drop them")
    for i, w in enumerate(p.workloads):
        if w.queue is not None and w.queue not in queues:
            raise InputError(f"workloads[{i}].queue", f"unknown ClusterQueue {w.queue!r}{suggest(w.queue, queues)}"
                                                      "; list it under quotas.queues")


def _check_running(p: Problem) -> None:
    from capplan.model.validate import check_assignments

    seen: set[tuple[str, int]] = set()
    for i, a in enumerate(p.running):
        path = f"running[{i}]"
        if a.workload not in p.workload_index:
            hint = suggest(a.workload, p.workload_index)
            raise InputError(f"{path}.workload", f"unknown workload {a.workload!r}{hint}")
        w = p.workload(a.workload)
        if a.replica >= w.replicas:
            raise InputError(f"{path}.replica", f"{w.name} has replicas 0..{w.replicas - 1}")
        if a.key in seen:
            raise InputError(path, f"replica {a.replica} of {w.name} is listed twice")
        seen.add(a.key)
        if a.node not in p.cluster.node_index:
            raise InputError(f"{path}.node", f"unknown node {a.node!r}{suggest(a.node, p.cluster.node_index)}")
    running = {a.key for a in p.running}
    for i, e in enumerate(p.ends_in):
        if (e.workload, e.replica) not in running:
            raise InputError(f"ends_in[{i}]", f"{e.workload}[{e.replica}] is not running; "
                                              "give ends_in only on entries of `running:`")
    problems = check_assignments(p, p.running)
    if problems:
        raise InputError("running", f"the running state contradicts the cluster: {problems[0]}")
