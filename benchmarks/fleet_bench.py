"""Fleet-scale benchmarks (issue 4): trace batch vs bound, online FGD protocol, synthetic scaling.

Usage::

    python benchmarks/fleet_bench.py trace            # (a) Alibaba default trace, all pods known
    python benchmarks/fleet_bench.py online --seeds 3 # (b) FGD online protocol (own minimal harness)
    python benchmarks/fleet_bench.py scale --gpus 1000 10000 100000   # (c) synthetic fleets

Results are printed as Markdown rows for docs/benchmarks-fleet.md.
"""

from __future__ import annotations

import argparse
import csv
import random
import resource
import time
from pathlib import Path
from typing import Any

from capplan.io.scenario import problem_from_data
from capplan.model.catalog import load_catalog
from capplan.placement import PlanOptions, solve

DATA = Path(__file__).parents[2] / "shared" / "data" / "alibaba-gpu-v2023"


def peak_gib() -> float:
    """Peak resident memory of this process in GiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 / 1024


def bench_trace(strategy: str, time_limit: float) -> None:
    """(a) All pods of the default file known up front: plan, bound and gap."""
    from capplan.io.alibaba import load_alibaba

    p = load_alibaba(DATA / "openb_node_list_gpu_node.csv", DATA / "openb_pod_list_default.csv")
    t = time.perf_counter()
    plan = solve(p, strategy, PlanOptions(time_limit=time_limit))
    secs = time.perf_counter() - t
    alloc = 100 * plan.objective[0] / p.cluster.gpus_total
    bnd = 100 * plan.bound[0] / p.cluster.gpus_total
    print(f"| trace default | {strategy} | {alloc:.3f}% | {bnd:.3f}% | {bnd - alloc:.3f} pp | {secs:.1f} s |")


def bench_online(seeds: int, pods_file: str) -> None:
    """(b) FGD protocol: shuffle by seed, append sampled pods to 130% of capacity, place on arrival."""
    from capplan.io.alibaba import read_nodes, read_pods, trace_data
    from capplan.placement.online import OnlineScheduler

    nodes, pods = read_nodes(DATA / "openb_node_list_gpu_node.csv"), read_pods(DATA / pods_file)
    cap = sum(n.gpus for n in nodes) * 1000
    published = _published(pods_file.removesuffix(".csv"))
    for seed in range(42, 42 + seeds):
        rng = random.Random(seed)
        order = list(pods)
        rng.shuffle(order)
        total = sum(x.gpu_demand_milli for x in order)
        extra = []
        while total < 1.3 * cap:
            x = rng.choice(pods)
            extra.append(x)
            total += x.gpu_demand_milli
        arrivals = order + extra
        named = [x.__class__(**{**x.__dict__, "name": f"a{i}"}) for i, x in enumerate(arrivals)]
        p = problem_from_data(trace_data(nodes, named), load_catalog())
        sched = OnlineScheduler(p.replace(workloads=p.workloads[:len(pods)]), score="fgd")
        t = time.perf_counter()
        arrived = 0
        at100 = None
        for w, x in zip(p.workloads, named, strict=True):
            sched.schedule(w)
            arrived += x.gpu_demand_milli
            if at100 is None and arrived >= cap:
                at100 = 100 * sched.allocated_gpus() * 1000 / cap
        end = 100 * sched.allocated_gpus() * 1000 / cap
        pub = published.get(seed, ("?", "?"))
        print(f"| online {pods_file} | seed {seed} | capplan-fgd {at100:.2f}% / {end:.2f}% | "
              f"FGD published {pub[0]}% / {pub[1]}% | {time.perf_counter() - t:.0f} s |")


def _published(workload: str) -> dict[int, tuple[str, str]]:
    out: dict[int, tuple[str, str]] = {}
    path = DATA / "fgd-expected-results" / "analysis_allo_discrete.csv"
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            if row["workload"] == workload and "FGD" in row["sc_policy"]:
                out[int(row["seed"])] = (row["100"], row["130"])
    return out


def fleet_blocks(gpus: int) -> list[dict[str, Any]]:
    """``gpus`` GPUs as scenario blocks: 8 GPUs per node, 16 nodes per rack, 8 racks per block; every third rack
    A100-SXM4-80GB, the others H100-SXM5-80GB."""
    blocks: list[dict[str, Any]] = []
    for i in range(gpus // 8):
        b, r = i // 128, (i // 16) % 8
        if len(blocks) <= b:
            blocks.append({"name": f"b{b}", "racks": []})
        racks = blocks[b]["racks"]
        if len(racks) <= r:
            racks.append({"name": f"b{b}r{r}", "nodes": []})
        model = "H100-SXM5-80GB" if (i // 16) % 3 else "A100-SXM4-80GB"
        racks[r]["nodes"].append({"name": f"n{i}", "gpu": model, "gpus": 8, "cpu": 192, "memory_gib": 1536})
    return blocks


def synthetic(gpus: int, seed: int = 0) -> dict[str, Any]:
    """A fleet of ``gpus`` H100/A100 GPUs (8 per node, 16 nodes per rack, 8 racks per block) and
    two replicas per GPU of mixed shapes: gangs of 8-512 GPUs, MIG inference, shared, whole GPUs."""
    rng = random.Random(seed)
    blocks = fleet_blocks(gpus)
    work: list[dict[str, Any]] = []
    replicas, budget = 0, 2 * gpus
    k = 0
    while replicas < budget:
        kind = rng.random()
        k += 1
        w: dict[str, Any]
        if kind < 0.04:
            size = rng.choice([1, 2, 4, 8, 16, 32, 64])  # nodes of 8 GPUs: gangs of 8..512 GPUs
            w = {"name": f"train{k}", "kind": "training", "replicas": size, "gpus": 8, "cpu": 96,
                 "memory_gib": 512, "topology": {"required": "block" if size > 16 else "rack"}, "priority": 100}
        elif kind < 0.45:
            w = {"name": f"mig{k}", "replicas": rng.choice([8, 16, 32, 64]),
                 "mig": rng.choice(["1g.10gb", "2g.20gb", "3g.40gb"]), "cpu": 4, "memory_gib": 32, "priority": 50}
        elif kind < 0.75:
            w = {"name": f"share{k}", "kind": "shared", "replicas": rng.choice([8, 16, 32]),
                 "gpu_fraction": rng.choice([0.25, 0.5, 0.3]), "cpu": 4, "memory_gib": 16, "priority": 10}
        else:
            w = {"name": f"svc{k}", "replicas": rng.choice([4, 8, 16, 32]), "gpus": rng.choice([1, 2, 4]),
                 "cpu": 16, "memory_gib": 128, "priority": 10}
        replicas += int(w["replicas"])
        work.append(w)
    return {"cluster": {"name": f"synthetic-{gpus}", "levels": ["block", "rack", "node"], "blocks": blocks},
            "workloads": work}


def bench_scale(sizes: list[int], strategy: str, time_limit: float) -> None:
    """(c) Synthetic fleets: seconds, gap and peak memory by size."""
    for g in sizes:
        t = time.perf_counter()
        p = problem_from_data(synthetic(g), load_catalog())
        build = time.perf_counter() - t
        t = time.perf_counter()
        plan = solve(p, strategy, PlanOptions(time_limit=time_limit))
        secs = time.perf_counter() - t
        reps = sum(w.replicas for w in p.workloads)
        print(f"| {g} | {len(p.cluster.nodes)} | {reps} | {strategy} | {plan.status} | {plan.gap:.4f} | "
              f"{plan.solve_seconds:.1f} | {secs:.1f} | {build:.1f} | {peak_gib():.2f} |", flush=True)


def main() -> None:
    """Command line entry."""
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["trace", "online", "scale"])
    ap.add_argument("--strategy", default="heuristic")
    ap.add_argument("--time-limit", type=float, default=30.0)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--pods", default="openb_pod_list_default.csv")
    ap.add_argument("--gpus", type=int, nargs="+", default=[1000, 10000, 100000])
    a = ap.parse_args()
    if a.what == "trace":
        bench_trace(a.strategy, a.time_limit)
    elif a.what == "online":
        bench_online(a.seeds, a.pods)
    else:
        bench_scale(a.gpus, a.strategy, a.time_limit)


if __name__ == "__main__":
    main()
