"""Scenario files (YAML) to and from :class:`~capplan.model.problem.Problem`.

The cluster nests by its topology levels, outermost first: with ``levels: [block, rack, node]``
the cluster holds ``blocks:``, each block ``racks:``, each rack ``nodes:``. A node entry with
``name_prefix`` and ``count`` stands for ``count`` identical nodes named prefix1..prefixN.
Every error names the field path, e.g. ``cluster.blocks[0].racks[1].nodes[0].gpu``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from capplan.io.overlay import load_scenario_data
from capplan.model.catalog import Catalog, load_catalog
from capplan.model.decode import LIMITS
from capplan.model.errors import ErrorList, InputError, describe, suggest
from capplan.model.plan import MigSlot, input_error_from
from capplan.model.problem import Cluster, Domain, GpuMode, Node, Problem, Taint, Workload
from capplan.model.quota import ClusterQueue, Flavor
from capplan.model.timing import RunningEnd, format_seconds
from capplan.model.units import MIB_PER_GIB, MILLI, cores_to_milli, gib_to_mib

_NODE_KEYS = {"name", "name_prefix", "count", "gpu", "gpus", "cpu", "memory_gib", "gpu_modes", "mig_strategy",
              "taints"}
_TOP_KEYS = {"cluster", "workloads", "running", "name", "description", "schedule", "interruptions", "quotas", "now",
             "reconfigure"}
_QUOTA_KEYS = {"flavors", "queues"}


def plural(level: str) -> str:
    """The key under which a level's items are listed (``rack`` -> ``racks``, ``switch`` -> ``switches``)."""
    return level + ("es" if level.endswith(("s", "x", "ch", "sh")) else "s")


def _require_mapping(obj: Any, path: str, what: str = "a mapping") -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise InputError(path, f"expected {what}, got {describe(obj)}")
    return obj


def _number(obj: dict[str, Any], key: str, path: str, default: float | None = None,
            integer: bool = False, positive: bool = False, most: float | None = None) -> float:
    val = obj.get(key, default)
    if val is None:
        raise InputError(f"{path}.{key}", "is required")
    if isinstance(val, bool) or not isinstance(val, int | float) or (integer and not isinstance(val, int)):
        raise InputError(f"{path}.{key}", f"expected {'an integer' if integer else 'a number'}, got {val!r}")
    if not math.isfinite(val):
        raise InputError(f"{path}.{key}", f"expected a finite number, got {val!r}")
    if val < 0 or (positive and val == 0):
        raise InputError(f"{path}.{key}", f"must be {'positive' if positive else 'zero or more'}, got {val}")
    if most is not None and val > most:
        raise InputError(f"{path}.{key}", f"{val} is over the limit of {most:g} (see docs/formats.md, Limits)")
    return float(val)


def _name(obj: dict[str, Any], key: str, path: str, what: str) -> str:
    val = obj.get(key)
    if not isinstance(val, str) or not val.strip():
        raise InputError(f"{path}.{key}", f"{what} must be a non-empty string, got {val!r}")
    return val


def _gpu_modes(raw: Any, gpus: int, path: str) -> tuple[GpuMode, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise InputError(path, "expected a list of {gpus: [..] or all, mode: whole|mig|shared, layout: [..]}")
    out: list[GpuMode] = []
    for i, entry in enumerate(raw):
        e = _require_mapping(entry, f"{path}[{i}]")
        extra = set(e) - {"gpus", "mode", "layout"}
        if extra:
            key = sorted(map(str, extra))[0]
            raise InputError(f"{path}[{i}].{key}", f"unknown field{suggest(key, ['gpus', 'mode', 'layout'])}; "
                                                   "use gpus, mode and layout")
        sel = e.get("gpus", "all")
        idx = list(range(gpus)) if sel == "all" else sel
        if not isinstance(idx, list) or not all(isinstance(g, int) and not isinstance(g, bool) for g in idx):
            raise InputError(f"{path}[{i}].gpus", "expected `all` or a list of GPU indices")
        if len(idx) > gpus:
            raise InputError(f"{path}[{i}].gpus", f"lists {len(idx)} GPUs, the node has {gpus}")
        if e.get("layout") is not None and not isinstance(e["layout"], list):
            raise InputError(f"{path}[{i}].layout", "expected a list of {profile, start}")
        try:
            layout = None if e.get("layout") is None else tuple(MigSlot.model_validate(s) for s in e["layout"])
            out.extend(GpuMode(gpu=g, mode=e.get("mode"), layout=layout) for g in idx)
        except ValidationError as exc:
            raise input_error_from(exc, f"{path}[{i}]") from None
    return tuple(out)


def _taints(raw: Any, path: str) -> tuple[Taint, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise InputError(path, "expected a list of {key, value, effect: NoSchedule|PreferNoSchedule|NoExecute}")
    out = []
    for i, t in enumerate(raw):
        try:
            out.append(Taint.model_validate(_require_mapping(t, f"{path}[{i}]")))
        except ValidationError as exc:
            raise input_error_from(exc, f"{path}[{i}]") from None
    return tuple(out)


class _Budget:
    """Running totals of the cluster, checked before a node entry is expanded."""

    def __init__(self) -> None:
        self.nodes = 0
        self.gpus = 0

    def take(self, count: int, gpus: int, path: str) -> None:
        if self.nodes + count > LIMITS.nodes:
            raise InputError(path, f"the cluster would have {self.nodes + count} nodes, over the limit of "
                                   f"{LIMITS.nodes} (see docs/formats.md, Limits)")
        if self.gpus + count * gpus > LIMITS.gpus:
            raise InputError(path, f"the cluster would have {self.gpus + count * gpus} GPUs, over the limit of "
                                   f"{LIMITS.gpus} (see docs/formats.md, Limits)")
        self.nodes += count
        self.gpus += count * gpus


def _node(e: dict[str, Any], p: str, parents: tuple[str, ...], catalog: Catalog, budget: _Budget) -> list[Node]:
    extra = set(e) - _NODE_KEYS
    if extra:
        key = sorted(map(str, extra))[0]
        raise InputError(f"{p}.{key}", f"unknown node field{suggest(key, _NODE_KEYS)}")
    if ("name" in e) == ("name_prefix" in e):
        raise InputError(p, "give either `name`, or `name_prefix` with `count`")
    gpus = int(_number(e, "gpus", p, default=0, integer=True, most=LIMITS.gpus_per_node))
    model = e.get("gpu")
    if model is not None:
        if not isinstance(model, str):
            raise InputError(f"{p}.gpu", f"expected a GPU model name, got {model!r}")
        model = catalog.get(model, f"{p}.gpu").name
        if gpus == 0:
            raise InputError(f"{p}.gpus", f"a node with gpu: {model} needs gpus > 0")
    elif gpus:
        raise InputError(f"{p}.gpu", "a node with GPUs needs its GPU model (`gpu:`); see `capplan catalog`")
    if "name" in e:
        names = [_name(e, "name", p, "a node name")]
    else:
        prefix = _name(e, "name_prefix", p, "a node name prefix")
        count = int(_number(e, "count", p, integer=True, positive=True, most=LIMITS.nodes))
        budget.take(count, gpus, f"{p}.count")
        names = [f"{prefix}{k}" for k in range(1, count + 1)]
    if "name" in e:
        budget.take(1, gpus, p)
    common = dict(path=parents, gpu_model=model, gpus=gpus,
                  cpu_milli=cores_to_milli(_number(e, "cpu", p, most=LIMITS.cpu_cores)),
                  memory_mib=gib_to_mib(_number(e, "memory_gib", p, most=LIMITS.memory_gib)),
                  gpu_modes=_gpu_modes(e.get("gpu_modes"), gpus, f"{p}.gpu_modes"),
                  taints=_taints(e.get("taints"), f"{p}.taints"))
    strategy = e.get("mig_strategy", "mixed")
    if strategy not in ("mixed", "single"):
        raise InputError(f"{p}.mig_strategy", f"expected mixed or single, got {strategy!r}")
    common["mig_strategy"] = strategy
    try:
        return [Node(name=n, **common) for n in names]
    except ValidationError as exc:
        raise input_error_from(exc, p) from None


def _nodes(raw: Any, path: str, parents: tuple[str, ...], catalog: Catalog, budget: _Budget,
           errors: ErrorList) -> list[Node]:
    if not isinstance(raw, list):
        raise InputError(path, f"expected a list of nodes, got {describe(raw)}")
    out: list[Node] = []
    for i, entry in enumerate(raw):
        with errors.catch():
            p = f"{path}[{i}]"
            out.extend(_node(_require_mapping(entry, p), p, parents, catalog, budget))
    return out


def _level(container: dict[str, Any], levels: Sequence[str], depth: int, parents: tuple[str, ...],
           path: str, catalog: Catalog, domains: list[Domain], nodes: list[Node], budget: _Budget,
           errors: ErrorList) -> None:
    key = plural(levels[depth])
    allowed = {key} | ({"name", "power_kw"} if depth else {"name", "levels"})
    extra = set(container) - allowed
    if extra:
        bad = str(sorted(map(str, extra))[0])
        hint = suggest(bad, allowed)
        errors.add(InputError(f"{path}.{bad}" if path else bad,
                              f"unexpected field{hint}; with levels {list(levels)} this level holds `{key}:`"))
    items = container.get(key)
    here = f"{path}.{key}" if path else key
    if items is None:
        raise InputError(here, f"is required: list the {key} here")
    if depth == len(levels) - 1:
        nodes.extend(_nodes(items, here, parents, catalog, budget, errors))
        return
    if not isinstance(items, list):
        raise InputError(here, f"expected a list of {key}, got {describe(items)}")
    for i, item in enumerate(items):
        with errors.catch():
            p = f"{here}[{i}]"
            d = _require_mapping(item, p)
            name = _name(d, "name", p, f"each {levels[depth]}'s name")
            power = d.get("power_kw")
            power_w = None if power is None else round(_number(d, "power_kw", p, most=LIMITS.power_kw) * 1000)
            domains.append(Domain(level=levels[depth], name=name, parent=parents[-1] if parents else None,
                                  power_w=power_w))
            _level(d, levels, depth + 1, (*parents, name), p, catalog, domains, nodes, budget, errors)


def parse_cluster(raw: Any, catalog: Catalog, errors: ErrorList | None = None) -> Cluster:
    """Build a :class:`Cluster` from the ``cluster:`` mapping of a scenario.

    Problems are collected in ``errors`` (and raised together at the end when it is not given).
    """
    own = errors is None
    errs = ErrorList() if errors is None else errors
    c = _require_mapping(raw, "cluster", "a mapping with `levels:` and the list of its outermost level")
    levels = c.get("levels", ["node"])
    if not isinstance(levels, list) or not levels or not all(isinstance(x, str) and x for x in levels):
        raise InputError("cluster.levels", "expected a list of level names, outermost first, e.g. [rack, node]")
    if levels[-1] != "node":
        raise InputError("cluster.levels", "the innermost level must be `node`, e.g. [block, rack, node]")
    if len(levels) > 16 or len(set(levels)) != len(levels):
        raise InputError("cluster.levels", "give at most 16 distinct levels")
    name = c.get("name", "cluster")
    if not isinstance(name, str):
        errs.add(InputError("cluster.name", f"expected a string, got {name!r}"))
    domains: list[Domain] = []
    nodes: list[Node] = []
    with errs.catch():
        _level(c, levels, 0, (), "cluster", catalog, domains, nodes, _Budget(), errs)
    if own:
        errs.raise_any()
    return Cluster(name=str(name), levels=tuple(levels), domains=tuple(domains), nodes=tuple(nodes))


def _workloads(raw: list[Any], errors: ErrorList) -> list[Workload]:
    out: list[Workload] = []
    total = 0
    for i, item in enumerate(raw):
        with errors.catch():
            if not isinstance(item, dict):
                raise InputError(f"workloads[{i}]", f"expected a mapping (name, replicas, ...), got {describe(item)}")
            replicas = item.get("replicas", 1)
            if isinstance(replicas, int) and not isinstance(replicas, bool) and 0 < replicas <= LIMITS.replicas:
                total += replicas
                if total - replicas <= LIMITS.total_replicas < total:  # said once, where the total goes over
                    raise InputError(f"workloads[{i}].replicas", f"brings the total to {total} replicas, over the "
                                     f"limit of {LIMITS.total_replicas} (see docs/formats.md, Limits)")
            try:
                out.append(Workload.model_validate(item))
            except ValidationError as exc:
                raise input_error_from(exc, f"workloads[{i}]", Workload) from None
    return out


def problem_from_data(data: Any, catalog: Catalog | None = None) -> Problem:
    """Build a validated :class:`Problem` from parsed scenario data (a dict).

    Raises
    ------
    InputError
        With every problem found (up to :data:`~capplan.model.errors.MAX_ERRORS`), each naming its field path.
    """
    cat = catalog or load_catalog()
    if not isinstance(data, dict):
        raise InputError("", f"a scenario is a mapping with `cluster:` and `workloads:` (see docs/formats.md), "
                             f"got {describe(data)}")
    d = data
    errors = ErrorList()
    extra = set(d) - _TOP_KEYS
    for bad in sorted(map(str, extra)):
        errors.add(InputError(bad, f"unknown top-level field{suggest(bad, _TOP_KEYS)}; "
                                   "expected cluster, workloads, running, schedule, interruptions, quotas, now, "
                                   "reconfigure"))
    for key in ("name", "description", "now"):
        if d.get(key) is not None and not isinstance(d[key], str):
            errors.add(InputError(key, f"expected a string, got {d[key]!r}"))
    cluster: Cluster | None = None
    if "cluster" not in d:
        errors.add(InputError("cluster", "is required"))
    else:
        with errors.catch():
            cluster = parse_cluster(d["cluster"], cat, errors)
    lists: dict[str, list[Any]] = {}
    for key in ("workloads", "running"):
        if d.get(key) is not None and not isinstance(d[key], list):
            errors.add(InputError(key, f"expected a list, got {describe(d[key])}"))
        lists[key] = d.get(key) or [] if isinstance(d.get(key), list | None) else []
        if len(lists[key]) > LIMITS.total_replicas:  # each entry is at least one replica
            raise InputError(key, f"{len(lists[key])} entries, over the limit of {LIMITS.total_replicas} replicas "
                                  "(see docs/formats.md, Limits)")
    workloads = _workloads(lists["workloads"], errors)
    errors.raise_any()
    running, ends_in = _running_ends(lists["running"])
    spec = d.get("schedule")
    if spec is not None:
        _require_mapping(spec, "schedule")
    inter = d.get("interruptions")
    if inter is not None:
        _require_mapping(inter, "interruptions", "a mapping with gpu_failure_rate, models, node_repair, restart, "
                                                 "restart_without_spare")
    flavors, queues = _quotas(d.get("quotas"))
    reconf = d.get("reconfigure", "forbidden")
    if reconf not in ("forbidden", "allowed"):
        raise InputError("reconfigure", f"expected forbidden or allowed, got {reconf!r}; `allowed` lets a plan change "
                                        "a GPU's preset mode or MIG layout at a cost (docs/formats.md)")
    try:
        return Problem.model_validate({"cluster": cluster, "workloads": workloads, "running": running,
                                       "catalog": cat, "schedule": spec, "ends_in": ends_in,
                                       "interruptions": inter, "flavors": flavors, "queues": queues,
                                       "now": d.get("now"), "reconfigure": reconf})
    except ValidationError as exc:
        raise input_error_from(exc, "", Problem) from None


def _quotas(raw: Any) -> tuple[list[Flavor], list[ClusterQueue]]:
    """The ``quotas: {flavors, queues}`` section (Kueue's ResourceFlavors and ClusterQueues)."""
    if raw is None:
        return [], []
    q = _require_mapping(raw, "quotas", "a mapping with flavors and queues")
    extra = set(q) - _QUOTA_KEYS
    if extra:
        key = sorted(map(str, extra))[0]
        raise InputError(f"quotas.{key}", f"unknown field{suggest(key, _QUOTA_KEYS)}; use flavors and queues")
    out: dict[str, list[Any]] = {}
    for key, model in (("flavors", Flavor), ("queues", ClusterQueue)):
        items = q.get(key) or []
        if not isinstance(items, list):
            raise InputError(f"quotas.{key}", f"expected a list, got {describe(items)}")
        out[key] = []
        for i, item in enumerate(items):
            try:
                out[key].append(model.model_validate(item))
            except ValidationError as exc:
                raise input_error_from(exc, f"quotas.{key}[{i}]", model) from None
    return out["flavors"], out["queues"]


def _running_ends(raw: list[Any]) -> tuple[list[Any], list[RunningEnd]]:
    """Split ``ends_in`` (remaining run time) off the ``running:`` entries."""
    running: list[Any] = []
    ends: list[RunningEnd] = []
    for i, entry in enumerate(raw):
        if isinstance(entry, dict) and "elapsed" in entry and "ends_in" not in entry:
            raise InputError(f"running[{i}].elapsed", "comes with ends_in (the remaining run time it conditions)")
        if isinstance(entry, dict) and "ends_in" in entry:
            e = dict(entry)
            try:
                ends.append(RunningEnd(workload=str(e.get("workload")), replica=e.get("replica", 0),
                                       ends_in=e.pop("ends_in"), elapsed=e.pop("elapsed", None)))
            except ValidationError as exc:
                err = input_error_from(exc, f"running[{i}]")
                field = "elapsed" if "elapsed" in err.path else "ends_in"
                raise InputError(f"running[{i}].{field}" if field in err.path else err.path, err.message) from None
            running.append(e)
        else:
            running.append(entry)
    return running, ends


def load_scenario(path: str | Path, catalog_paths: Sequence[str | Path] = ()) -> Problem:
    """Load and validate a scenario file (YAML or JSON); ``catalog_paths`` add user catalog files.

    A what-if overlay (``base: FILE`` plus edits, :mod:`capplan.io.overlay`) is merged into its base first.
    """
    return problem_from_data(load_scenario_data(path)[0], load_catalog(catalog_paths))


def _num(x: float) -> float | int:
    return int(x) if float(x).is_integer() else round(x, 6)


def problem_to_data(p: Problem) -> dict[str, Any]:
    """The scenario mapping of ``p`` (inverse of :func:`problem_from_data`; nodes written one by one)."""
    levels = p.cluster.levels

    def node_entry(n: Node) -> dict[str, Any]:
        e: dict[str, Any] = {"name": n.name}
        if n.gpu_model:
            e.update(gpu=n.gpu_model, gpus=n.gpus)
        e.update(cpu=_num(n.cpu_milli / MILLI), memory_gib=_num(n.memory_mib / MIB_PER_GIB))
        if n.gpu_modes:
            e["gpu_modes"] = [{"gpus": [m.gpu], "mode": m.mode, **({"layout": [s.model_dump() for s in m.layout]}
                                                                   if m.layout is not None else {})}
                              for m in n.gpu_modes]
        if n.mig_strategy != "mixed":
            e["mig_strategy"] = n.mig_strategy
        if n.taints:
            e["taints"] = [t.model_dump(mode="json", exclude_defaults=True) for t in n.taints]
        return e

    def children(depth: int, parents: tuple[str, ...]) -> list[dict[str, Any]]:
        if depth == len(levels) - 1:
            return [node_entry(n) for n in p.cluster.nodes if n.path == parents]
        out = []
        for d in p.cluster.domains:
            if d.level == levels[depth] and d.parent == (parents[-1] if parents else None):
                e: dict[str, Any] = {"name": d.name}
                if d.power_w is not None:
                    e["power_kw"] = _num(d.power_w / 1000)
                e[plural(levels[depth + 1])] = children(depth + 1, (*parents, d.name))
                out.append(e)
        return out

    cluster: dict[str, Any] = {"name": p.cluster.name, "levels": list(levels), plural(levels[0]): children(0, ())}
    workloads = [w.model_dump(mode="json", exclude_defaults=True) | {"name": w.name} for w in p.workloads]
    data: dict[str, Any] = {"cluster": cluster, "workloads": workloads}
    if p.running:
        ends = {(e.workload, e.replica): e for e in p.ends_in}
        data["running"] = [a.model_dump(mode="json", exclude_defaults=True)
                           | ({"ends_in": format_seconds(ends[a.key].ends_in)} if a.key in ends else {})
                           | ({"elapsed": format_seconds(ends[a.key].elapsed or 0)}
                              if a.key in ends and ends[a.key].elapsed is not None else {})
                           for a in p.running]
    if p.flavors or p.queues:
        data["quotas"] = {"flavors": [f.model_dump(mode="json", exclude_defaults=True) for f in p.flavors],
                          "queues": [q.model_dump(mode="json", exclude_defaults=True) for q in p.queues]}
    if p.now is not None:
        data["now"] = p.now
    if p.reconfigure != "forbidden":
        data["reconfigure"] = p.reconfigure
    if p.schedule is not None:
        data["schedule"] = {"horizon": format_seconds(p.schedule.horizon), "step": format_seconds(p.schedule.step)}
    if p.interruptions is not None:
        it = p.interruptions
        data["interruptions"] = {"gpu_failure_rate": it.gpu_failure_rate, **({"models": dict(it.models)}
                                                                              if it.models else {}),
                                 **{k: format_seconds(getattr(it, k))
                                    for k in ("node_repair", "restart", "restart_without_spare")}}
    return data


def dump_scenario(p: Problem) -> str:
    """Serialise ``p`` as scenario YAML."""
    return yaml.safe_dump(problem_to_data(p), sort_keys=False, default_flow_style=None, width=120)
