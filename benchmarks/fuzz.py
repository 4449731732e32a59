"""Fuzz campaign: random scenarios over the whole format, every strategy, each plan judged independently.

Usage::

    python benchmarks/fuzz.py run --instances 10000 --workers 2 --out benchmarks/out/fuzz.jsonl
    python benchmarks/fuzz.py summary benchmarks/out/fuzz.jsonl [--markdown]
    python benchmarks/fuzz.py show SEED          # the scenario YAML of one instance (to reproduce a finding)

A seeded generator (:func:`generate`) draws a scenario covering the scenario format: nodes of several GPU
models (MIG, AMD partitions, plain, CPU-only), preset GPU modes and preset MIG layouts (random valid layouts,
whole or partial), domains of mixed models or of one or two models, one to three topology levels, power
budgets; workloads with whole GPUs (gangs, required / preferred topology), named and ``auto`` MIG slices,
fractions, CPU-only pods, tenants and isolation (likelier at the top priority), one to eight priorities, SLA,
over-subscription (a third of the instances multiply every workload's replicas by 2 or 3); and for half of the
instances a running state (part of an earlier plan) with ``--allow-preemption`` / ``--allow-migration`` drawn
at random: the features of ``benchmarks/shapes.py`` at a small size. Every strategy (and ``auto``) plans it with
a 1-3 s limit (1 s for half of them); each plan is checked by the independent validator
(:func:`capplan.model.validate.check_plan`); the strategies' results are compared (a plan claiming ``optimal``
must not be beaten lexicographically by another strategy's plan; no plan may exceed another strategy's bound
at a priority whose higher priorities it matches; no plan may say ``infeasible`` while another strategy's
valid plan places every guaranteed replica); wall time is recorded against the limit.

One JSON line per solve goes to ``--out`` as the campaign runs, so a long run can be summarised at any time.
Instance ``k`` uses seed ``k``: a finding is reproduced with ``show k``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import random
import signal
import subprocess
import time
import traceback
from collections import defaultdict
from pathlib import Path
from typing import Any

STRATEGIES = ("greedy", "cpsat", "heuristic", "lns", "decompose", "patterns", "auto")
LIMITS = (1.0, 1.0, 2.0, 3.0)
SLACK = (1.1, 1.0)  # a run must end within 1.1 x limit + 1 s
#: ``run --breaking``: every instance gets a running state that breaks rules (set before the workers fork)
BREAKING = False
#: ``run --limit S``: every solve gets S seconds instead of a drawn limit
LIMIT: float | None = None

# GPU models and the MIG profiles / partitions drawn for them (catalog names)
MODELS: dict[str, list[str]] = {
    "H100-SXM5-80GB": ["1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"],
    "A100-SXM4-80GB": ["1g.10gb", "2g.20gb", "3g.40gb"],
    "A30-24GB": ["1g.6gb", "2g.12gb", "4g.24gb"],
    "MI300X-192GB": ["CPX", "QPX", "DPX"],
    "T4-16GB": [],
    "L40S-48GB": [],
}


def _layout(rnd: random.Random, model: str) -> list[dict[str, Any]]:
    """A random valid MIG layout of ``model`` (NVIDIA): instances at allowed starts, memory slices disjoint,
    compute slices and each profile's count within the GPU's, drawn here from the catalog's profile table."""
    from capplan.model.catalog import load_catalog

    m = load_catalog().get(model)
    places = [(pr, s) for pr in m.profiles for s in pr.starts]
    rnd.shuffle(places)
    used, compute, counts, out = 0, 0, dict[str, int](), []
    for pr, s in places:
        mask = ((1 << pr.memory_slices) - 1) << s
        if used & mask or compute + pr.compute_slices > m.compute_slices or counts.get(pr.name, 0) >= pr.max_count:
            continue
        used, compute = used | mask, compute + pr.compute_slices
        counts[pr.name] = counts.get(pr.name, 0) + 1
        out.append({"profile": pr.name, "start": s})
        if rnd.random() < 0.3:
            break  # a partial layout: the GPU offers only these instances
    return sorted(out, key=lambda x: x["start"])


def _node(rnd: random.Random, name: str, models: list[str | None] | None = None) -> dict[str, Any]:
    model = rnd.choice(models or [*MODELS, None, "H100-SXM5-80GB"])  # None: a CPU-only node
    e: dict[str, Any] = {"name": name, "cpu": rnd.choice([4, 8, 32, 64]), "memory_gib": rnd.choice([32, 128, 512])}
    if model:
        gpus = rnd.choice([1, 2, 4, 8])
        e.update(gpu=model, gpus=gpus)
        if rnd.random() < 0.35:
            modes = ["whole", "shared"] + (["mig", "mig"] if MODELS[model] else [])
            g = rnd.sample(range(gpus), k=rnd.randint(1, min(2, gpus)))
            mode: dict[str, Any] = {"gpus": g, "mode": rnd.choice(modes)}
            if mode["mode"] == "mig" and not model.startswith("MI") and rnd.random() < 0.7:
                mode["layout"] = _layout(rnd, model)  # a preset MIG layout (the shapes' mix of presets)
            e["gpu_modes"] = [mode]
    return e


def _workload(rnd: random.Random, name: str, levels: list[str], prios: list[int] | None = None,
              pressure: int = 1) -> dict[str, Any]:
    kind = rnd.choice(["gpus", "gpus", "mig", "mig-auto", "fraction", "cpu"])
    prio = rnd.choice(prios or [0, 0, 10, 100])
    top = prios is not None and prio == max(prios)
    w: dict[str, Any] = {"name": name, "replicas": rnd.choice([1, 1, 2, 3, 4, 6]) * pressure,
                         "cpu": rnd.choice([0, 1, 2, 8]), "memory_gib": rnd.choice([0, 4, 32]),
                         "priority": prio, "tenant": rnd.choice(["a", "b", "c"]),
                         # isolation is likelier at the top priority (the shapes' isolated inference)
                         "isolation": rnd.choice(["none", "tenant", "node"] if top else
                                                 ["none", "none", "none", "tenant", "node"])}
    if kind == "gpus":
        w["gpus"] = rnd.choice([1, 1, 2, 4, 8])
        if rnd.random() < 0.4:
            w["kind"] = "training"
        if rnd.random() < 0.3:
            w["gpu_models"] = rnd.sample(sorted(MODELS), k=rnd.randint(1, 2))
    elif kind == "mig":
        model = rnd.choice([m for m in MODELS if MODELS[m]])
        w["mig"] = rnd.choice(MODELS[model])
        w["gpu_models"] = [model]
    elif kind == "mig-auto":
        w["mig"] = "auto"
        w["gpu_memory_gib"] = rnd.choice([5, 10, 20, 40])
    elif kind == "fraction":
        w.update(kind="shared", gpu_fraction=rnd.choice([0.1, 0.25, 0.5, 0.7]))
        if rnd.random() < 0.4:
            w["gpu_memory_gib"] = rnd.choice([4, 12, 30])
    if w["cpu"] == 0 and w["memory_gib"] == 0:
        w["cpu"] = 1
    if rnd.random() < 0.3:
        w["topology"] = {rnd.choice(["required", "preferred"]): rnd.choice(levels)}
    if rnd.random() < 0.15:
        w["sla"] = "guaranteed"
    if rnd.random() < 0.4:
        w["preemptible"] = True
    if rnd.random() < 0.4:
        w["migratable"] = True
        w["migration_cost"] = rnd.choice([0, 1, 5])
    return w


def _cluster(rnd: random.Random) -> tuple[dict[str, Any], list[str]]:
    depth = rnd.choice([1, 2, 2, 3])
    levels = ["block", "rack", "node"][3 - depth:]
    counter = [0]

    mixed_racks = rnd.random() < 0.5  # else a domain of mostly one model (two models at most)

    def build(d: int, prefix: str) -> dict[str, Any]:
        key = levels[d] + "s"
        if d == depth - 1:
            nodes = []
            pair: list[str | None] = [rnd.choice([*MODELS, None]), rnd.choice(list(MODELS))]
            for _ in range(rnd.randint(1, 3 if depth > 1 else 6)):
                counter[0] += 1
                nodes.append(_node(rnd, f"n{counter[0]}", None if mixed_racks else pair))
            return {"nodes": nodes}
        items = []
        for i in range(rnd.randint(1, 2 if d == 0 and depth == 3 else 3)):
            item: dict[str, Any] = {"name": f"{prefix}{levels[d][0]}{i}"}
            if rnd.random() < 0.25:
                item["power_kw"] = rnd.choice([0.5, 1, 2, 4, 10])
            item.update(build(d + 1, item["name"]))
            items.append(item)
        return {key: items}

    return {"name": "fuzz", "levels": levels, **build(0, "")}, levels


def generate(seed: int) -> dict[str, Any]:
    """One random instance: ``{"scenario": ..., "limit": s, "allow_preemption": b, "allow_migration": b}``."""
    from capplan.io.scenario import problem_from_data
    from capplan.model.errors import InputError
    from capplan.placement.core.options import PlanOptions
    from capplan.placement.greedy import plan_greedy

    rnd = random.Random(seed)
    data: dict[str, Any] = {}
    while True:
        cluster, levels = _cluster(rnd)
        # one to eight priority levels; a third of the instances over-subscribed (replicas x 2 or x 3)
        prios = sorted(rnd.sample(range(0, 1000, 10), rnd.randint(1, 8)))
        pressure = rnd.choice([1, 1, 2, 3])
        works = [_workload(rnd, f"w{i}", levels, prios, pressure) for i in range(rnd.randint(1, 7))]
        data = {"cluster": cluster, "workloads": works}
        try:
            p = problem_from_data(data)
        except InputError:
            continue  # e.g. a MIG profile on a preset layout the model lacks: draw again
        break
    inst: dict[str, Any] = {"seed": seed, "limit": rnd.choice(LIMITS), "allow_preemption": False,
                            "allow_migration": False}
    if rnd.random() < 0.5:
        # Running state: part of the greedy plan of a shuffled variant (whole gangs only), then new work arrives.
        order = list(p.workloads)
        rnd.shuffle(order)
        first = plan_greedy(p.replace(workloads=tuple(order)), PlanOptions())
        keep = {w.name for w in p.workloads if rnd.random() < 0.7}
        running = []
        for a in first.assignments:
            w = p.workload(a.workload)
            if a.workload in keep and (w.is_gang or rnd.random() < 0.8):
                running.append(a.model_dump(mode="json", exclude_none=True))
        data["running"] = running
        for i in range(rnd.randint(0, 2)):
            new = _workload(rnd, f"new{i}", levels)
            new["priority"] = rnd.choice([10, 100, 1000])
            data["workloads"].append(new)
        inst["allow_preemption"] = rnd.random() < 0.6
        inst["allow_migration"] = rnd.random() < 0.6
    if BREAKING:
        data = _break_rules(rnd, data, levels)
        inst["allow_preemption"] = rnd.random() < 0.6
        inst["allow_migration"] = rnd.random() < 0.6
    if LIMIT is not None:
        inst["limit"] = LIMIT
    inst["scenario"] = data
    return inst


def _free_room(data: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, list[float]], dict[str, set[int]]]:
    """The GPU nodes of a scenario dict, (CPU cores, GiB) left per node and the GPUs its running state uses."""
    nodes: list[dict[str, Any]] = []

    def walk(d: dict[str, Any]) -> None:
        nodes.extend(d.get("nodes", []))
        for k, v in d.items():
            if k.endswith("s") and k != "nodes" and isinstance(v, list):
                for x in v:
                    if isinstance(x, dict):
                        walk(x)

    walk(data["cluster"])
    works = {w["name"]: w for w in data["workloads"]}
    room = {n["name"]: [float(n["cpu"]), float(n["memory_gib"])] for n in nodes}
    used: dict[str, set[int]] = {n["name"]: set() for n in nodes}
    for a in data.get("running", []):
        w = works[a["workload"]]
        room[a["node"]][0] -= w.get("cpu", 0)
        room[a["node"]][1] -= w.get("memory_gib", 0)
        used[a["node"]].update(a.get("gpus", []))
    return nodes, room, used


def _domains_of(data: dict[str, Any], levels: list[str]) -> dict[str, str]:
    """Node name -> its domain at the outermost level (the node itself with one level)."""
    out: dict[str, str] = {}

    def walk(d: dict[str, Any], top: str | None) -> None:
        for n in d.get("nodes", []):
            out[n["name"]] = top or n["name"]
        for k, v in d.items():
            if k.endswith("s") and k != "nodes" and isinstance(v, list):
                for x in v:
                    if isinstance(x, dict):
                        walk(x, top or x.get("name"))

    walk(data["cluster"], None)
    return out


def _break_rules(rnd: random.Random, data: dict[str, Any], levels: list[str]) -> dict[str, Any]:
    """Add running replicas that break rules the planner keeps for new placements, where the cluster has room.

    A gang (sometimes with one replica not running) across two GPU models, two tenants on one GPU despite tenant
    isolation, a node-isolated pod beside another tenant, replicas outside the one domain they require.
    """
    from capplan.io.scenario import problem_from_data
    from capplan.model.errors import InputError

    data = json.loads(json.dumps(data))
    data.setdefault("running", [])
    nodes, room, used = _free_room(data)

    def fits(n: dict[str, Any], cpu: float, mem: float) -> bool:
        return room[n["name"]][0] >= cpu and room[n["name"]][1] >= mem

    def free_gpu(n: dict[str, Any]) -> int | None:
        preset = {g for m in n.get("gpu_modes", []) for g in m["gpus"]}
        free = [g for g in range(n.get("gpus", 0)) if g not in used[n["name"]] and g not in preset]
        return free[0] if free else None

    def take(n: dict[str, Any], cpu: float, mem: float, g: int | None) -> None:
        room[n["name"]][0] -= cpu
        room[n["name"]][1] -= mem
        if g is not None:
            used[n["name"]].add(g)

    def attempt(works: list[dict[str, Any]], running: list[dict[str, Any]]) -> None:
        trial = {**data, "workloads": data["workloads"] + works, "running": data["running"] + running}
        try:
            problem_from_data(trial)
        except InputError:
            return  # the draw does not fit this cluster: leave this break out
        data["workloads"].extend(works)
        data["running"].extend(running)

    gpu_nodes = [n for n in nodes if n.get("gpus") and fits(n, 1, 1) and free_gpu(n) is not None]
    by_model: dict[str, dict[str, Any]] = {}
    for n in gpu_nodes:
        by_model.setdefault(n["gpu"], n)
    if len(by_model) >= 2 and rnd.random() < 0.8:  # a gang across two GPU models
        a, b = rnd.sample(sorted(by_model), 2)
        na, nb = by_model[a], by_model[b]
        ga, gb = free_gpu(na), free_gpu(nb)
        extra = 1 if rnd.random() < 0.3 else 0
        run = [{"workload": "brk-gang", "replica": 0, "node": na["name"], "gpus": [ga]},
               {"workload": "brk-gang", "replica": 1, "node": nb["name"], "gpus": [gb]}]
        attempt([{"name": "brk-gang", "kind": "training", "replicas": 2 + extra, "gpus": 1, "cpu": 1,
                  "memory_gib": 1, "priority": rnd.choice([0, 10]), "preemptible": rnd.random() < 0.5,
                  "migratable": rnd.random() < 0.5}], run)
        take(na, 1, 1, ga)
        take(nb, 1, 1, gb)
    gpu_nodes = [n for n in nodes if n.get("gpus") and fits(n, 2, 2) and free_gpu(n) is not None]
    if gpu_nodes and rnd.random() < 0.8:  # two tenants share a GPU, one of them isolated
        n = rnd.choice(gpu_nodes)
        g = free_gpu(n)
        ws = [{"name": "brk-iso-a", "replicas": 2, "gpu_fraction": 0.25, "tenant": "x", "isolation": "tenant",
               "cpu": 1, "memory_gib": 1, "preemptible": rnd.random() < 0.5, "migratable": rnd.random() < 0.5},
              {"name": "brk-iso-b", "replicas": 1, "gpu_fraction": 0.25, "tenant": "y", "cpu": 1, "memory_gib": 1}]
        attempt(ws, [{"workload": "brk-iso-a", "replica": 0, "node": n["name"], "gpus": [g], "fraction": 0.25},
                     {"workload": "brk-iso-b", "replica": 0, "node": n["name"], "gpus": [g], "fraction": 0.25}])
        take(n, 2, 2, g)
    busy = [n for n in nodes if fits(n, 0.5, 1) and any(a["node"] == n["name"] for a in data["running"])]
    if busy and rnd.random() < 0.6:  # a node-isolated pod beside other tenants
        n = rnd.choice(busy)
        attempt([{"name": "brk-node", "replicas": 2, "cpu": 0.5, "memory_gib": 1, "tenant": "z", "isolation": "node"}],
                [{"workload": "brk-node", "replica": 0, "node": n["name"]}])
        take(n, 0.5, 1, None)
    doms = _domains_of(data, levels)
    spread: dict[str, dict[str, Any]] = {}
    for n in nodes:
        if fits(n, 0.5, 1):
            spread.setdefault(doms[n["name"]], n)
    if len(spread) >= 2 and rnd.random() < 0.8:  # replicas outside the one domain they require
        x, y = rnd.sample(sorted(spread), 2)
        attempt([{"name": "brk-topo", "replicas": rnd.choice([2, 3]), "cpu": 0.5, "memory_gib": 1,
                  "topology": {"required": levels[0]}, "migratable": rnd.random() < 0.5,
                  "preemptible": rnd.random() < 0.5}],
                [{"workload": "brk-topo", "replica": 0, "node": spread[x]["name"]},
                 {"workload": "brk-topo", "replica": 1, "node": spread[y]["name"]}])
    return data


def lex(p: Any, plan: Any) -> tuple[float, ...]:
    """The plan order, computed here: guaranteed replicas placed, then per priority GPU demand and replicas placed.

    ``objective`` holds the placed GPU demand per priority (the validator recomputes it); ``optimal`` and
    ``bound`` speak of this order (docs/formats.md).
    """
    g = sum(1 for a in plan.assignments if p.workload(a.workload).sla == "guaranteed")
    reps = [sum(1 for a in plan.assignments if p.workload(a.workload).priority == q) for q in p.priorities]
    return (g, *[x for u, r in zip(plan.objective, reps, strict=True) for x in (u, r)])


class _Hang(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _Hang()


def run_instance(seed: int, strategies: tuple[str, ...] = STRATEGIES) -> list[dict[str, Any]]:
    """Plan instance ``seed`` with every strategy; one record per solve plus the cross-strategy findings."""
    from capplan.io.scenario import problem_from_data
    from capplan.model.validate import check_plan
    from capplan.placement import PlanOptions, solve

    inst = generate(seed)
    p = problem_from_data(inst["scenario"])
    limit = float(inst["limit"])
    opts = PlanOptions(time_limit=limit, seed=seed % 1000, workers=1, allow_preemption=inst["allow_preemption"],
                       allow_migration=inst["allow_migration"])
    recs: list[dict[str, Any]] = []
    signal.signal(signal.SIGALRM, _alarm)
    for name in strategies:
        rec: dict[str, Any] = {"seed": seed, "strategy": name, "limit": limit,
                               "running": bool(p.running), "preempt": opts.allow_preemption,
                               "migrate": opts.allow_migration, "replicas": sum(w.replicas for w in p.workloads),
                               "guaranteed": sum(w.replicas for w in p.workloads if w.sla == "guaranteed"),
                               "totals": [sum(w.replicas for w in p.workloads if w.priority == q)
                                          for q in p.priorities],
                               "nodes": len(p.cluster.nodes)}
        t0 = time.perf_counter()
        signal.alarm(int(3 * limit + 20))
        try:
            plan = solve(p, name, opts)
            rec["wall"] = round(time.perf_counter() - t0, 3)
            v = check_plan(p, plan)
            rec.update(status=plan.status, used=plan.strategy, objective=list(plan.objective),
                       bound=list(plan.bound), key=list(lex(p, plan)),
                       replicas_placed=len(plan.assignments), invalid=v[:3],
                       fallback=plan.metrics.get("fallback_from"))
        except _Hang:
            rec.update(wall=round(time.perf_counter() - t0, 3), error="hang: no answer within 3 x limit + 20 s")
        except Exception as exc:  # an internal error is a finding, recorded with its message
            rec.update(wall=round(time.perf_counter() - t0, 3), error=f"{type(exc).__name__}: {exc}"[:400],
                       trace=traceback.format_exc(limit=4)[-800:])
        finally:
            signal.alarm(0)
        rec["over"] = rec["wall"] > SLACK[0] * limit + SLACK[1]
        recs.append(rec)
    guaranteed = sum(w.replicas for w in p.workloads if w.sla == "guaranteed")
    for rec in recs:
        rec["false_proof"], rec["false_bound"], rec["false_infeasible"] = cross_check(rec, recs, guaranteed)
    return recs


def cross_check(rec: dict[str, Any], recs: list[dict[str, Any]],
                guaranteed: int) -> tuple[list[str], list[str], list[str]]:
    """Findings against one solve's claims: valid plans of the instance beating its proof, exceeding its bound
    or refuting its ``infeasible``.

    A plan claiming ``optimal`` must not be beaten in the order of :func:`lex`. A bound is checked by walking
    the priorities while another plan (placing every guaranteed replica) sits exactly at it with every replica
    of the priority placed: that plan then shares the optimum's prefix, so at the next priority it may not
    exceed the bound. A plan marked ``infeasible`` (a guaranteed workload cannot be met: exit 3, a nightly
    job's alarm) is false when another strategy's valid plan places every guaranteed replica.
    """
    if "key" not in rec or rec.get("invalid"):
        return [], [], []
    proofs: list[str] = []
    bounds: list[str] = []
    infeasible: list[str] = []
    for other in recs:
        if "key" not in other or other.get("invalid"):
            continue
        if rec["status"] == "optimal" and _beats(other["key"], rec["key"]):
            proofs.append(other["strategy"])
        if other["key"][0] < guaranteed:
            continue
        if rec["status"] == "infeasible" and guaranteed:
            infeasible.append(other["strategy"])
        for k, (b, o) in enumerate(zip(rec["bound"], other["objective"], strict=True)):
            if o > b + 1e-6:
                bounds.append(other["strategy"])
                break
            if o < b - 1e-6 or other["key"][2 + 2 * k] < other["totals"][k]:
                break  # below the bound, or replicas left out here: the optimum may differ from here on
    return proofs, bounds, infeasible


def _beats(a: list[float], b: list[float]) -> bool:
    """Whether ``a`` is lexicographically greater than ``b`` (GPU figures compared with a tolerance)."""
    for x, y in zip(a, b, strict=True):
        if x > y + 1e-6:
            return True
        if x < y - 1e-6:
            return False
    return False


def _warm() -> None:
    """Import every strategy's modules (OR-Tools, scipy) once per worker: not charged to its first solve."""
    from capplan.placement.strategies import STRATEGIES, loaded

    for fn in STRATEGIES.values():
        loaded(fn)


def _worker(seed: int) -> list[dict[str, Any]]:
    try:
        return run_instance(seed)
    except Exception as exc:  # the generator itself failed: record it rather than stop the campaign
        return [{"seed": seed, "strategy": "-", "error": f"generator: {type(exc).__name__}: {exc}"[:400],
                 "wall": 0.0, "limit": 0.0, "over": False, "false_proof": [], "false_bound": [],
                 "false_infeasible": []}]


def run(first: int, count: int, workers: int, out: Path, commit: str | None = None) -> None:
    """Run instances ``first .. first+count-1`` on ``workers`` processes, appending records to ``out``."""
    out.parent.mkdir(parents=True, exist_ok=True)
    done: set[int] = set()
    if out.exists():
        done = {json.loads(line)["seed"] for line in out.read_text().splitlines() if line.strip()}
    todo = [s for s in range(first, first + count) if s not in done]
    commit = commit or subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                      cwd=Path(__file__).parent).stdout.strip() or "unknown"
    print(f"fuzz: {len(todo)} instances to run ({len(done)} already in {out}), commit {commit}", flush=True)
    t0 = time.time()
    ctx = mp.get_context("fork")
    with ctx.Pool(workers, initializer=_warm, maxtasksperchild=200) as pool, out.open("a") as f:
        for i, recs in enumerate(pool.imap_unordered(_worker, todo, chunksize=1), 1):
            for r in recs:
                r["commit"] = commit
                f.write(json.dumps(r) + "\n")
            f.flush()
            bad = [r for r in recs if r.get("error") or r.get("invalid") or r.get("false_proof")
                   or r.get("false_bound") or r.get("false_infeasible") or r.get("over")]
            if bad:
                print(f"  seed {recs[0]['seed']}: " + "; ".join(_finding(r) for r in bad), flush=True)
            if i % 100 == 0:
                print(f"  {i}/{len(todo)} instances, {time.time() - t0:.0f} s", flush=True)


def _finding(r: dict[str, Any]) -> str:
    parts = []
    if r.get("error"):
        parts.append(f"error {r['error'][:160]}")
    if r.get("invalid"):
        parts.append(f"invalid {r['invalid'][0][:160]}")
    if r.get("false_proof"):
        parts.append(f"optimal beaten by {r['false_proof']}")
    if r.get("false_bound"):
        parts.append(f"bound {r.get('bound')} exceeded by {r['false_bound']}")
    if r.get("false_infeasible"):
        parts.append(f"infeasible while {r['false_infeasible']} placed every guaranteed replica")
    if r.get("over"):
        parts.append(f"wall {r['wall']} s for limit {r['limit']} s")
    return f"{r['strategy']}: " + ", ".join(parts)


def _quantile(xs: list[float], f: float) -> float:
    return xs[min(len(xs) - 1, int(f * len(xs)))] if xs else 0.0


def summarize(path: Path, markdown: bool) -> str:
    """The campaign table: per strategy, solves, findings and wall / limit."""
    recs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    per_seed: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for r in recs:
        per_seed[r["seed"]].append(r)
    for group in per_seed.values():  # the findings are recomputed from the records (the criteria may evolve)
        guaranteed = max((r.get("guaranteed", 0) for r in group), default=0)
        for r in group:
            r["false_proof"], r["false_bound"], r["false_infeasible"] = cross_check(r, group, guaranteed)
    by: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in recs:
        by[r["strategy"]].append(r)
    seeds = {r["seed"] for r in recs}
    commits = sorted({r.get("commit", "?") for r in recs})
    head = ["strategy", "solves", "internal errors", "invalid plans", "fallbacks", "false proofs", "false bounds",
            "false infeasible", "optimal", "wall/limit median", "p99", "max", "over 1.1x+1s"]
    rows: list[list[object]] = []
    for name in sorted(by, key=lambda s: STRATEGIES.index(s) if s in STRATEGIES else 99):
        rs = by[name]
        ratios = sorted(r["wall"] / r["limit"] for r in rs if r.get("limit"))
        rows.append([name, len(rs), sum(1 for r in rs if r.get("error")), sum(1 for r in rs if r.get("invalid")),
                     sum(1 for r in rs if r.get("fallback")), sum(1 for r in rs if r.get("false_proof")),
                     sum(1 for r in rs if r.get("false_bound")), sum(1 for r in rs if r.get("false_infeasible")),
                     sum(1 for r in rs if r.get("status") == "optimal"),
                     f"{_quantile(ratios, 0.5):.2f}", f"{_quantile(ratios, 0.99):.2f}",
                     f"{ratios[-1] if ratios else 0:.2f}",
                     sum(1 for r in rs if r.get("over"))])
    n_run = len({r["seed"] for r in recs if r.get("running")})
    lines = [f"{len(seeds)} instances ({n_run} with a running state), {len(recs)} solves, commits {', '.join(commits)}"]
    if markdown:
        lines += ["", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(str(x) for x in row) + " |" for row in rows]
    else:
        table: list[list[object]] = [list(head), *rows]
        widths = [max(len(str(row[i])) for row in table) for i in range(len(head))]
        lines += ["  ".join(str(x).rjust(wd) for x, wd in zip(row, widths, strict=True)) for row in table]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Command line: ``run``, ``summary`` or ``show``."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--first", type=int, default=0)
    r.add_argument("--instances", type=int, default=1000)
    r.add_argument("--workers", type=int, default=2)
    r.add_argument("--out", type=Path, default=Path("benchmarks/out/fuzz.jsonl"))
    r.add_argument("--commit", help="the commit to record (default: git rev-parse HEAD; for a copied tree)")
    r.add_argument("--breaking", action="store_true",
                   help="give every instance a running state that breaks rules (gang across models, isolation, "
                        "replicas outside their required domain)")
    r.add_argument("--limit", type=float, help="every solve gets this many seconds instead of a drawn limit")
    s = sub.add_parser("summary")
    s.add_argument("path", type=Path)
    s.add_argument("--markdown", action="store_true")
    sh = sub.add_parser("show")
    sh.add_argument("seed", type=int)
    sh.add_argument("--breaking", action="store_true")
    a = ap.parse_args(argv)
    global BREAKING, LIMIT
    BREAKING = bool(getattr(a, "breaking", False))
    LIMIT = getattr(a, "limit", None)
    if a.cmd == "run":
        run(a.first, a.instances, a.workers, a.out, a.commit)
    elif a.cmd == "summary":
        print(summarize(a.path, a.markdown))
    else:
        import yaml

        inst = generate(a.seed)
        flags = [f for f, on in (("--allow-preemption", inst["allow_preemption"]),
                                 ("--allow-migration", inst["allow_migration"])) if on]
        print(f"# seed {a.seed}: capplan plan THIS.yaml --time-limit {inst['limit']:g} {' '.join(flags)}")
        print(yaml.safe_dump(inst["scenario"], sort_keys=False, default_flow_style=None, width=120), end="")


if __name__ == "__main__":
    main()
