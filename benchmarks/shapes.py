"""Issue 25, item 5: six structurally different fleets at 10k, 30k and 100k GPUs, every strategy judged the same way.

The generators here are written on their own (not derived from ``fleet_bench.synthetic``) so that the planner is
measured on shapes its own benchmark does not produce. Each takes a GPU count and a seed and returns scenario data
(the dict a scenario file holds, docs/formats.md), deterministic for the pair:

=====  ==================================================================================================
shape  what it stresses
=====  ==================================================================================================
a      tenant isolation (``tenant`` and ``node``) over 40 tenants at the top priority: MIG and whole-GPU
       inference, shares below
b      over-subscribed gangs (130% of the GPUs) with ``topology.required`` rack or block on racks that mix
       three GPU models (one model per gang)
c      time-sliced shares with ``gpu_memory_gib`` over 300 tenants and eight priorities, a few isolated
d      binding rack and block power budgets, CPU-only nodes in every rack and CPU-only pods beside GPU work
e      ``mig: auto`` by memory over seven GPU models, a third of the GPUs with preset MIG layouts, guaranteed
       work at the top
f      a running state (a loaded fleet of preemptible batch and migratable shares) and new high-priority
       gangs: preemption and migration (planned with ``--allow-preemption --allow-migration``)
=====  ==================================================================================================

Usage::

    python benchmarks/shapes.py run --shapes a,b --sizes 10k --limits 10 --strategies greedy,auto \\
        --repeat 1 --out benchmarks/out/shapes.json
    python benchmarks/shapes.py table benchmarks/out/shapes.json
    python benchmarks/shapes.py write a 10k -o a-10k.json      # one scenario file, to reproduce by hand

``run`` plans each (shape, size, limit, strategy, repeat) with the ``capplan plan`` command in a child process,
one at a time, and records its wall time (the whole command: loading, planning, validation, writing), the peak
RSS of the child (``os.wait4``), the plan's status, objective, bound and per-priority gaps (the plan's ``gaps``
when it carries them, else ``(bound - objective) / bound`` per priority) and its lexicographic key (guaranteed
replicas placed, then per priority, highest first, value and replicas placed). A child still running at
``3 x limit + 30`` seconds is killed and recorded as such. Results are appended to ``--out`` as they come
(JSON lines), so a long run can be tabulated at any time.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from capplan.model.catalog import load_catalog

SIZES = {"10k": 10_000, "30k": 30_000, "100k": 100_000}
HERE = Path(__file__).resolve().parent
CACHE = HERE / "out" / "shapes"

Data = dict[str, Any]


def _size(text: str) -> int:
    """``10k`` -> 10000; a plain integer is a GPU count."""
    return SIZES[text] if text in SIZES else int(text)


def _racks(n_nodes: int, per_rack: int, racks_per_block: int) -> list[list[list[int]]]:
    """Node indices 0..n-1 cut into racks (the last may be short), racks grouped into blocks."""
    racks = [list(range(i, min(n_nodes, i + per_rack))) for i in range(0, n_nodes, per_rack)]
    return [racks[i:i + racks_per_block] for i in range(0, len(racks), racks_per_block)]


def _group(prefix: str, count: int, **fields: Any) -> dict[str, Any]:
    """A node group (``name_prefix`` + ``count``): identical nodes named prefix1..prefixN."""
    return {"name_prefix": prefix, "count": count, **fields}


def _profile(model: str, size: str) -> str:
    """The plain (not ``+me``) MIG profile of ``model`` with ``size`` compute slices and the least memory."""
    m = load_catalog().get(model)
    cands = [p for p in m.profiles if p.name.startswith(f"{size}.") and not p.name.endswith("+me")]
    return min(cands, key=lambda p: p.memory_slices).name


# --- (a) tenant isolation at the top priority ------------------------------------------------------------------


def shape_a(gpus: int, seed: int = 0) -> Data:
    """40 tenants on H100 and A100 nodes; the top priority is isolated MIG and whole-GPU inference.

    A third of the top-priority workloads ask ``isolation: tenant`` (no other tenant on their physical GPUs) and
    a few tenants ask ``isolation: node``; below them whole-GPU batch and shares of every tenant. Demand is about
    115% of the GPUs in value.
    """
    rnd = random.Random(f"a{seed}")
    n = gpus // 8
    blocks = []
    for b, racks in enumerate(_racks(n, 16, 8)):
        items = []
        for r, rack in enumerate(racks):
            model = "A100-SXM4-80GB" if (b + r) % 4 == 3 else "H100-SXM5-80GB"
            items.append({"name": f"b{b}r{r}", "nodes": [_group(f"b{b}r{r}n", len(rack), gpu=model, gpus=8,
                                                                  cpu=128, memory_gib=1024)]})
        blocks.append({"name": f"b{b}", "racks": items})
    tenants = [f"t{i}" for i in range(40)]
    node_isolated = set(rnd.sample(tenants, 4))
    work: list[Data] = []
    value, k = 0.0, 0
    while value < 1.15 * gpus:
        k += 1
        t = rnd.choice(tenants)
        x = rnd.random()
        if x < 0.45:  # top priority: MIG inference, isolated for a third of the workloads
            prof = rnd.choice(["1g.10gb", "2g.20gb", "3g.40gb"])
            reps = rnd.choice([4, 8, 16, 32])
            w: Data = {"name": f"inf{k}", "mig": prof, "replicas": reps, "cpu": 2, "memory_gib": 16,
                       "priority": 1000, "tenant": t}
            value += reps * int(prof[0]) / 7
        elif x < 0.65:  # top priority: whole-GPU inference
            g = rnd.choice([1, 1, 2, 4])
            reps = rnd.choice([2, 4, 8])
            w = {"name": f"llm{k}", "gpus": g, "replicas": reps, "cpu": 8, "memory_gib": 64, "priority": 1000,
                 "tenant": t}
            value += reps * g
        elif x < 0.85:  # batch
            g = rnd.choice([1, 2, 4, 8])
            reps = rnd.choice([1, 2, 4, 8])
            w = {"name": f"batch{k}", "gpus": g, "replicas": reps, "cpu": 4 * g, "memory_gib": 32 * g,
                 "priority": 100, "tenant": t}
            value += reps * g
        else:  # shares
            f = rnd.choice([0.25, 0.5])
            reps = rnd.choice([4, 8, 16])
            w = {"name": f"nb{k}", "kind": "shared", "gpu_fraction": f, "replicas": reps, "cpu": 1,
                 "memory_gib": 8, "priority": 10, "tenant": t}
            value += reps * f
        if w["priority"] == 1000 and t in node_isolated:
            w["isolation"] = "node"
        elif w["priority"] == 1000 and rnd.random() < 1 / 3:
            w["isolation"] = "tenant"
        work.append(w)
    return {"name": f"shape-a-{gpus}", "cluster": {"name": "iso", "levels": ["block", "rack", "node"],
                                                   "blocks": blocks}, "workloads": work}


# --- (b) over-subscribed gangs on mixed-model racks ------------------------------------------------------------


def shape_b(gpus: int, seed: int = 0) -> Data:
    """Racks of 16 nodes mixing H100, H200 and A100 nodes; gangs of whole nodes, required rack or block, 130%.

    A gang sits on one GPU model (no ``mixed_models``), so on a mixed rack a 16-node gang never fits in one rack
    and a rack-bound gang fits only up to the rack's nodes of one model: the shape that makes a per-domain
    capacity bound weak. Three priorities; one-GPU fill work at the lowest.
    """
    rnd = random.Random(f"b{seed}")
    n = gpus // 8
    mix = ["H100-SXM5-80GB"] * 8 + ["H200-SXM-141GB"] * 5 + ["A100-SXM4-80GB"] * 3
    blocks = []
    for b, racks in enumerate(_racks(n, 16, 8)):
        items = []
        for r, rack in enumerate(racks):
            models = mix[:len(rack)]
            rnd.shuffle(models)
            counts: dict[str, int] = defaultdict(int)
            for m in models:
                counts[m] += 1
            nodes = [_group(f"b{b}r{r}{m.split('-')[0].lower()}-", c, gpu=m, gpus=8, cpu=192, memory_gib=2048)
                     for m, c in sorted(counts.items())]
            items.append({"name": f"b{b}r{r}", "nodes": nodes})
        blocks.append({"name": f"b{b}", "racks": items})
    work: list[Data] = []
    placed_gpus, k = 0, 0
    while placed_gpus < 1.3 * gpus:
        k += 1
        x = rnd.random()
        if x < 0.85:
            size = rnd.choice([2, 3, 4, 6, 8, 12, 16, 24, 32, 48])
            size = min(size, max(2, n // 2))  # small fleets: a block-bound gang still fits one block
            w: Data = {"name": f"gang{k}", "kind": "training", "replicas": size, "gpus": 8, "cpu": 96,
                       "memory_gib": 1024, "priority": rnd.choice([100, 50, 50, 10]),
                       "topology": {"required": "rack" if size <= 8 else "block"}}
            if rnd.random() < 0.3:
                w["gpu_models"] = rnd.sample(["H100-SXM5-80GB", "H200-SXM-141GB", "A100-SXM4-80GB"], 2)
            placed_gpus += 8 * size
        else:
            reps = rnd.choice([8, 16, 32])
            w = {"name": f"fill{k}", "gpus": 1, "replicas": reps, "cpu": 4, "memory_gib": 64, "priority": 1}
            placed_gpus += reps
        work.append(w)
    return {"name": f"shape-b-{gpus}", "cluster": {"name": "gangs", "levels": ["block", "rack", "node"],
                                                   "blocks": blocks}, "workloads": work}


# --- (c) shares with GPU memory, many tenants, eight priorities ------------------------------------------------


def shape_c(gpus: int, seed: int = 0) -> Data:
    """L40S and H100 nodes; time-sliced shares with GPU memory of 300 tenants at eight priorities, about 3 a GPU.

    Shares sum their ``gpu_memory_gib`` on a GPU (48 GiB on an L40S, 80 on an H100), so memory binds before the
    fractions on the L40S; one workload in ten asks tenant isolation (its GPUs hold no other tenant).
    """
    rnd = random.Random(f"c{seed}")
    n = gpus // 8
    racks = []
    for r, rack in enumerate(blk for b in _racks(n, 20, 1) for blk in b):
        model = "L40S-48GB" if r % 2 == 0 else "H100-SXM5-80GB"
        racks.append({"name": f"r{r}", "nodes": [_group(f"r{r}n", len(rack), gpu=model, gpus=8, cpu=256,
                                                          memory_gib=2048)]})
    tenants = [f"team{i}" for i in range(300)]
    prios = [70, 60, 50, 40, 30, 20, 10, 0]
    work: list[Data] = []
    value, k = 0.0, 0
    while value < 1.1 * gpus:
        k += 1
        f = rnd.choice([0.1, 0.2, 0.25, 0.3, 0.5])
        mem = rnd.choice([4, 8, 12, 20, 24])
        reps = rnd.choice([2, 4, 8, 16, 24])
        w: Data = {"name": f"s{k}", "kind": "shared", "gpu_fraction": f, "gpu_memory_gib": mem, "replicas": reps,
                   "cpu": 1, "memory_gib": 4, "tenant": rnd.choice(tenants), "priority": rnd.choice(prios)}
        if rnd.random() < 0.1:
            w["isolation"] = "tenant"
        if rnd.random() < 0.2:
            w["gpu_models"] = [rnd.choice(["L40S-48GB", "H100-SXM5-80GB"])]
        value += reps * f
        work.append(w)
    return {"name": f"shape-c-{gpus}", "cluster": {"name": "shares", "levels": ["rack", "node"], "racks": racks},
            "workloads": work}


# --- (d) rack power budgets, CPU-only pods and nodes -----------------------------------------------------------


def shape_d(gpus: int, seed: int = 0) -> Data:
    """H100 racks of 12 GPU nodes and 4 CPU-only nodes; a rack may power 60% of its GPUs, a block 55%.

    Work: rack-bound gangs and whole-GPU inference (value about 90% of the GPUs, so power, not GPUs, binds)
    and CPU-only pods (cores and memory only) that belong on the CPU-only nodes. Four priorities.
    """
    rnd = random.Random(f"d{seed}")
    n = gpus // 8
    tdp_kw = 0.7  # H100-SXM5 TDP
    blocks = []
    for b, racks in enumerate(_racks(n, 12, 6)):
        items = []
        for r, rack in enumerate(racks):
            items.append({"name": f"b{b}r{r}", "power_kw": round(0.6 * len(rack) * 8 * tdp_kw, 1),
                          "nodes": [_group(f"b{b}r{r}g", len(rack), gpu="H100-SXM5-80GB", gpus=8, cpu=112,
                                           memory_gib=1024),
                                    _group(f"b{b}r{r}c", 4, cpu=128, memory_gib=512)]})
        block_gpus = sum(len(rack) for rack in racks) * 8
        blocks.append({"name": f"b{b}", "power_kw": round(0.55 * block_gpus * tdp_kw, 1), "racks": items})
    work: list[Data] = []
    value, cpu, k = 0.0, 0.0, 0
    cpu_nodes_cores = 4 * 128 * len([r for b in _racks(n, 12, 6) for r in b])
    while value < 0.9 * gpus or cpu < 1.0 * cpu_nodes_cores:
        k += 1
        x = rnd.random()
        if x < 0.3 and value < 0.9 * gpus:
            size = rnd.choice([2, 4, 6, 8])
            w: Data = {"name": f"train{k}", "kind": "training", "replicas": size, "gpus": 8, "cpu": 64,
                       "memory_gib": 512, "topology": {"required": "rack"}, "priority": rnd.choice([100, 40])}
            value += 8 * size
        elif x < 0.6 and value < 0.9 * gpus:
            g = rnd.choice([1, 2, 4])
            reps = rnd.choice([4, 8, 16])
            w = {"name": f"inf{k}", "gpus": g, "replicas": reps, "cpu": 6 * g, "memory_gib": 48 * g,
                 "priority": rnd.choice([100, 40, 10])}
            value += reps * g
        else:
            reps = rnd.choice([8, 16, 32, 64])
            c = rnd.choice([2, 4, 8, 16])
            w = {"name": f"cpu{k}", "replicas": reps, "cpu": c, "memory_gib": 4 * c, "priority": rnd.choice([40, 0])}
            cpu += reps * c
        work.append(w)
    return {"name": f"shape-d-{gpus}", "cluster": {"name": "power", "levels": ["block", "rack", "node"],
                                                   "blocks": blocks}, "workloads": work}


# --- (e) mig: auto over a mixed fleet with preset layouts ------------------------------------------------------

E_MODELS = ["H100-SXM5-80GB", "A100-SXM4-80GB", "A100-SXM4-40GB", "A30-24GB", "H200-SXM-141GB", "B200-180GB",
            "H100-NVL-94GB"]


def _preset(model: str, kind: str) -> list[dict[str, Any]]:
    """A valid preset MIG layout of ``model`` (``kind``: ``halves``, ``sevenths`` or ``mixed``)."""
    if model.startswith("A30"):
        one, two, four = (_profile(model, s) for s in ("1g", "2g", "4g"))
        return {"halves": [{"profile": two, "start": 0}, {"profile": two, "start": 2}],
                "sevenths": [{"profile": one, "start": s} for s in range(4)],
                "mixed": [{"profile": two, "start": 0}, {"profile": one, "start": 2},
                          {"profile": one, "start": 3}]}[kind]
    one, two, three, four = (_profile(model, s) for s in ("1g", "2g", "3g", "4g"))
    return {"halves": [{"profile": three, "start": 0}, {"profile": three, "start": 4}],
            "sevenths": [{"profile": one, "start": s} for s in range(7)],
            "mixed": [{"profile": four, "start": 0}, {"profile": two, "start": 4},
                      {"profile": one, "start": 6}]}[kind]


def shape_e(gpus: int, seed: int = 0) -> Data:
    """Seven GPU models (MIG-capable) in racks of one model; a third of the nodes carry preset MIG layouts.

    Work: guaranteed ``mig: auto`` inference by memory at the top priority (about 15% of the GPUs), ``mig:
    auto`` and named profiles of several models below, whole GPUs and shares at the bottom; demand about 110%.
    """
    rnd = random.Random(f"e{seed}")
    n = gpus // 8
    racks = []
    per_rack = max(1, min(16, n // len(E_MODELS)))  # 16, or fewer on a small fleet so that every model shows
    for r, rack in enumerate(blk for b in _racks(n, per_rack, 1) for blk in b):
        model = E_MODELS[r % len(E_MODELS)]
        preset = len(rack) // 3 if r % 3 != 2 else 0
        nodes = [_group(f"r{r}p", preset, gpu=model, gpus=8, cpu=128, memory_gib=1024,
                        gpu_modes=[{"gpus": [0, 1, 2], "mode": "mig", "layout": _preset(model, "sevenths")},
                                   {"gpus": [3, 4, 5], "mode": "mig", "layout": _preset(model, "halves")},
                                   {"gpus": [6, 7], "mode": "mig", "layout": _preset(model, "mixed")}])] \
            if preset else []
        nodes.append(_group(f"r{r}n", len(rack) - preset, gpu=model, gpus=8, cpu=128, memory_gib=1024))
        racks.append({"name": f"r{r}", "nodes": nodes})
    work: list[Data] = []
    value, k = 0.0, 0
    guaranteed = 0.0
    while guaranteed < 0.15 * gpus:
        k += 1
        mem = rnd.choice([5, 10, 20])
        reps = rnd.choice([16, 32, 64])
        work.append({"name": f"g{k}", "mig": "auto", "gpu_memory_gib": mem, "replicas": reps, "cpu": 1,
                     "memory_gib": 8, "priority": 1000, "sla": "guaranteed"})
        guaranteed += reps * (1 if mem <= 10 else 2) / 8  # rough: at most 1/7 or 2/7 a replica
        value += reps / 7
    prios = [500, 100, 50, 10]
    while value < 1.1 * gpus:
        k += 1
        x = rnd.random()
        if x < 0.45:
            mem = rnd.choice([6, 10, 20, 40, 70])
            reps = rnd.choice([8, 16, 32, 64])
            w: Data = {"name": f"auto{k}", "mig": "auto", "gpu_memory_gib": mem, "replicas": reps, "cpu": 1,
                       "memory_gib": 8, "priority": rnd.choice(prios)}
            if rnd.random() < 0.3:
                w["gpu_models"] = rnd.sample(E_MODELS, 3)
            value += reps * min(1.0, mem / 80)
        elif x < 0.7:
            model = rnd.choice(E_MODELS)
            size = rnd.choice(["1g", "2g", "3g"] if not model.startswith("A30") else ["1g", "2g"])
            reps = rnd.choice([8, 16, 32])
            w = {"name": f"mig{k}", "mig": _profile(model, size), "gpu_models": [model], "replicas": reps,
                 "cpu": 1, "memory_gib": 8, "priority": rnd.choice(prios)}
            value += reps * int(size[0]) / (4 if model.startswith("A30") else 7)
        elif x < 0.9:
            g = rnd.choice([1, 2, 4, 8])
            reps = rnd.choice([2, 4, 8])
            w = {"name": f"whole{k}", "gpus": g, "replicas": reps, "cpu": 4 * g, "memory_gib": 32 * g,
                 "priority": rnd.choice(prios[1:])}
            value += reps * g
        else:
            f = rnd.choice([0.25, 0.5])
            reps = rnd.choice([8, 16])
            w = {"name": f"sh{k}", "kind": "shared", "gpu_fraction": f, "replicas": reps, "cpu": 1,
                 "memory_gib": 4, "priority": 10}
            value += reps * f
        work.append(w)
    return {"name": f"shape-e-{gpus}", "cluster": {"name": "migmix", "levels": ["rack", "node"], "racks": racks},
            "workloads": work}


# --- (f) running state, preemption and migration ---------------------------------------------------------------


def shape_f(gpus: int, seed: int = 0) -> Data:
    """H100 racks of 16; 60% of the nodes run preemptible batch (two 4-GPU replicas each), a fifth run a
    migratable half-GPU share on GPU 0; new high-priority rack-bound gangs (35% of the GPUs) and whole-GPU
    inference (15%) need evictions or moves (plan with ``--allow-preemption --allow-migration``)."""
    rnd = random.Random(f"f{seed}")
    n = gpus // 8
    racks = []
    names: list[str] = []
    for r, rack in enumerate(blk for b in _racks(n, 16, 1) for blk in b):
        racks.append({"name": f"r{r}", "nodes": [_group(f"r{r}n", len(rack), gpu="H100-SXM5-80GB", gpus=8,
                                                          cpu=128, memory_gib=1024)]})
        names += [f"r{r}n{i}" for i in range(1, len(rack) + 1)]
    order = list(range(n))
    rnd.shuffle(order)
    batch_nodes = sorted(order[:int(0.6 * n)])
    share_nodes = sorted(order[int(0.6 * n):int(0.6 * n) + max(1, n // 5)])
    per = 50  # replicas per running workload
    work: list[Data] = []
    running: list[Data] = []
    for j in range(0, 2 * len(batch_nodes), per):
        reps = min(per, 2 * len(batch_nodes) - j)
        w = f"batch{j // per}"
        work.append({"name": w, "gpus": 4, "replicas": reps + rnd.choice([0, 2]), "cpu": 16, "memory_gib": 128,
                     "priority": rnd.choice([1, 5]), "preemptible": True})
        for i in range(reps):
            node = names[batch_nodes[(j + i) // 2]]
            half = (j + i) % 2
            running.append({"workload": w, "replica": i, "node": node, "gpus": [4 * half + g for g in range(4)]})
    for j in range(0, len(share_nodes), per):
        reps = min(per, len(share_nodes) - j)
        w = f"share{j // per}"
        work.append({"name": w, "kind": "shared", "gpu_fraction": 0.5, "gpu_memory_gib": 20, "replicas": reps,
                     "cpu": 2, "memory_gib": 16, "priority": 20, "migratable": True,
                     "migration_cost": rnd.choice([1, 3])})
        for i in range(reps):
            running.append({"workload": w, "replica": i, "node": names[share_nodes[j + i]], "gpus": [0],
                            "fraction": 0.5})
    value, k = 0.0, 0
    while value < 0.35 * gpus:
        k += 1
        size = min(rnd.choice([2, 4, 8, 16]), max(2, n // 4))
        work.append({"name": f"gang{k}", "kind": "training", "replicas": size, "gpus": 8, "cpu": 96,
                     "memory_gib": 768, "topology": {"required": "rack"}, "priority": 100})
        value += 8 * size
    value = 0.0
    while value < 0.15 * gpus:
        k += 1
        g = rnd.choice([1, 2])
        reps = rnd.choice([8, 16, 32])
        work.append({"name": f"inf{k}", "gpus": g, "replicas": reps, "cpu": 8, "memory_gib": 64, "priority": 50})
        value += reps * g
    return {"name": f"shape-f-{gpus}", "cluster": {"name": "running", "levels": ["rack", "node"], "racks": racks},
            "workloads": work, "running": running}


SHAPES: dict[str, Callable[[int, int], Data]] = {"a": shape_a, "b": shape_b, "c": shape_c, "d": shape_d,
                                                 "e": shape_e, "f": shape_f}
FLAGS = {"f": ["--allow-preemption", "--allow-migration"]}


# --- measuring -------------------------------------------------------------------------------------------------


def lex_key(data: Data, plan: Data) -> list[float]:
    """The plan order from the plan file and the scenario: guaranteed replicas placed, then per priority (highest
    first) the value placed (the plan's ``objective``) and the replicas placed."""
    by_name = {w["name"]: w for w in data["workloads"]}
    guaranteed = sum(1 for a in plan["assignments"] if by_name[a["workload"]].get("sla") == "guaranteed")
    reps: dict[int, int] = defaultdict(int)
    for a in plan["assignments"]:
        reps[by_name[a["workload"]].get("priority", 0)] += 1
    key: list[float] = [float(guaranteed)]
    for q, v in zip(plan["priorities"], plan["objective"], strict=True):
        key += [float(v), float(reps[q])]
    return key


def compare(a: list[float] | None, b: list[float] | None) -> str:
    """``better``, ``equal`` or ``worse``: plan key ``a`` against ``b`` (no plan is worse than any plan;
    ``no plans`` when neither has one)."""
    if a is None or b is None:
        return "no plans" if a is b else ("worse" if a is None else "better")
    for x, y in zip(a, b, strict=True):
        if x > y + 1e-6:
            return "better"
        if x < y - 1e-6:
            return "worse"
    return "equal"


def gaps_of(plan: Data) -> list[float]:
    """Per-priority gaps, highest priority first: the plan's own ``gaps`` when present, else computed."""
    if isinstance(plan.get("gaps"), list):
        return [float(g) for g in plan["gaps"]]
    return [(b - o) / b if b > 1e-9 else 0.0 for o, b in zip(plan["objective"], plan["bound"], strict=True)]


def scenario_file(shape: str, gpus: int, seed: int) -> Path:
    """The scenario of (shape, gpus, seed) as a JSON file under benchmarks/out/shapes (written once)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"{shape}-{gpus}-s{seed}.json"
    if not path.exists():
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(SHAPES[shape](gpus, seed)))
        tmp.replace(path)
    return path


def run_one(shape: str, gpus: int, seed: int, limit: float, strategy: str) -> Data:
    """Plan one scenario with ``capplan plan`` in a child process: wall, peak RSS, plan figures."""
    scen = scenario_file(shape, gpus, seed)
    data = json.loads(scen.read_text())
    out = CACHE / f"plan-{shape}-{gpus}-{strategy}-{limit:g}.json"
    out.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "capplan", "plan", str(scen), "-o", str(out), "--strategy", strategy,
           "--time-limit", f"{limit:g}", "--seed", str(seed), "-q", *FLAGS.get(shape, [])]
    rec: Data = {"shape": shape, "gpus": gpus, "seed": seed, "limit": limit, "strategy": strategy,
                 "replicas": sum(w.get("replicas", 1) for w in data["workloads"]),
                 "running": len(data.get("running", [])), "load1": round(os.getloadavg()[0], 2)}
    t0 = time.perf_counter()
    child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    cap = 3 * limit + 30
    killed = False
    while True:
        pid, status, usage = os.wait4(child.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() - t0 > cap:
            os.killpg(child.pid, signal.SIGKILL)
            killed = True
            pid, status, usage = os.wait4(child.pid, 0)
            break
        time.sleep(0.05)
    rec["wall"] = round(time.perf_counter() - t0, 2)
    rec["peak_rss_gib"] = round(usage.ru_maxrss / 2**20, 3)  # ru_maxrss is in KiB on Linux
    rec["exit"] = os.waitstatus_to_exitcode(status)
    assert child.stderr is not None
    err = child.stderr.read().decode(errors="replace")
    child.stderr.close()
    rec["killed"] = killed
    if killed or not out.exists():
        rec["error"] = "killed at 3 x limit + 30 s" if killed else err.strip()[-400:]
        rec["key"] = None
        return rec
    plan = json.loads(out.read_text())
    rec.update(status=plan["status"], used=plan["strategy"], priorities=plan["priorities"],
               objective=plan["objective"], bound=plan["bound"], gap=plan["gap"], gaps=gaps_of(plan),
               key=lex_key(data, plan), placed=len(plan["assignments"]),
               cut_by_time_limit=plan.get("metrics", {}).get("cut_by_time_limit"),
               fallback_from=plan.get("metrics", {}).get("fallback_from"), summary=err.strip()[-300:])
    out.unlink()
    return rec


def _commit() -> str:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          cwd=HERE).stdout.strip() or "unknown"


def run(shapes: list[str], sizes: list[int], limits: list[float], strategies: list[str], repeat: int, seed: int,
        out: Path) -> None:
    """Every (shape, size, limit, strategy, repeat), one child at a time, appended to ``out`` as JSON lines."""
    out.parent.mkdir(parents=True, exist_ok=True)
    commit = _commit()
    for gpus in sizes:
        for shape in shapes:
            scenario_file(shape, gpus, seed)
            for limit in limits:
                for strategy in strategies:
                    for k in range(repeat):
                        rec = run_one(shape, gpus, seed, limit, strategy)
                        rec.update(repeat=k, commit=commit)
                        with out.open("a") as f:
                            f.write(json.dumps(rec) + "\n")
                        print(f"{shape} {gpus} limit {limit:g} {strategy}: wall {rec['wall']} s, "
                              f"{rec.get('status', rec.get('error', '?'))}, rss {rec['peak_rss_gib']} GiB, "
                              f"load {rec['load1']}", flush=True)


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    return s[len(s) // 2] if len(s) % 2 else (s[len(s) // 2 - 1] + s[len(s) // 2]) / 2


def table(path: Path) -> str:
    """The Markdown table of a results file: one row per (shape, size, limit, strategy), medians over repeats;
    ``vs greedy`` compares each strategy's first repeat with greedy's at the same limit."""
    recs = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    groups: dict[tuple[str, int, float, str], list[Data]] = defaultdict(list)
    for r in recs:
        groups[(r["shape"], r["gpus"], r["limit"], r["strategy"])].append(r)
    head = ["shape", "GPUs", "replicas", "limit s", "strategy", "wall s", "wall/limit", "peak RSS GiB", "status",
            "value placed / bound", "gap per priority, highest first (%)", "worst (priority)", "vs greedy", "load"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (shape, gpus, limit, strategy), rs in sorted(groups.items(), key=lambda kv: (kv[0][1], kv[0][0],
                                                                                        kv[0][2], kv[0][3] != "greedy",
                                                                                        kv[0][3])):
        first = min(rs, key=lambda r: r.get("repeat", 0))
        wall = _median([r["wall"] for r in rs])
        rss = max(r["peak_rss_gib"] for r in rs)
        if first.get("key") is None:
            status, value, gaps, worst = f"no plan ({first.get('error', '?')[:40]})", "-", "-", "-"
        else:
            status = first["status"] + (f" ({first['used']})" if first["used"] != strategy else "")
            value = f"{sum(first['objective']):.0f} / {sum(first['bound']):.0f}"
            gaps = " / ".join(f"{100 * g:.1f}" for g in first["gaps"])
            w = max(range(len(first["gaps"])), key=lambda i: first["gaps"][i])
            worst = f"{100 * first['gaps'][w]:.1f} ({first['priorities'][w]})"
        g = groups.get((shape, gpus, limit, "greedy"))
        vs = "-" if strategy == "greedy" or not g else compare(first.get("key"), min(
            g, key=lambda r: r.get("repeat", 0)).get("key"))
        n = f" ({len(rs)} runs)" if len(rs) > 1 else ""
        lines.append("| " + " | ".join(str(x) for x in (
            shape, f"{gpus:,}", f"{first['replicas']:,}", f"{limit:g}", strategy, f"{wall:.1f}{n}",
            f"{wall / limit:.2f}", f"{rss:.2f}", status, value, gaps, worst, vs, first["load1"])) + " |")
    commits = sorted({r.get("commit", "?") for r in recs})
    return "\n".join(lines) + f"\n\ncommits: {', '.join(commits)}"


def main(argv: list[str] | None = None) -> None:
    """Command line: ``run``, ``table`` or ``write``."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--shapes", default=",".join(SHAPES))
    r.add_argument("--sizes", default="10k")
    r.add_argument("--limits", default="10,30,60")
    r.add_argument("--strategies", default="greedy,auto")
    r.add_argument("--repeat", type=int, default=1)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--out", type=Path, default=HERE / "out" / "shapes.jsonl")
    t = sub.add_parser("table")
    t.add_argument("path", type=Path)
    w = sub.add_parser("write")
    w.add_argument("shape", choices=sorted(SHAPES))
    w.add_argument("size")
    w.add_argument("--seed", type=int, default=0)
    w.add_argument("-o", "--output", type=Path, required=True)
    a = ap.parse_args(argv)
    if a.cmd == "run":
        bad = [s for s in a.shapes.split(",") if s not in SHAPES]
        if bad:
            ap.error(f"--shapes: unknown {bad}; choose from {','.join(SHAPES)}")
        run(a.shapes.split(","), [_size(s) for s in a.sizes.split(",")], [float(x) for x in a.limits.split(",")],
            a.strategies.split(","), a.repeat, a.seed, a.out)
    elif a.cmd == "table":
        print(table(a.path))
    else:
        a.output.write_text(json.dumps(SHAPES[a.shape](_size(a.size), a.seed)))


if __name__ == "__main__":
    main()
