"""How far the online policy is from the packing floor of the GPU shares it placed (default trace).

At 100% arrived the Alibaba runs have no fully free GPU left: every unallocated milli-GPU sits
on a GPU that holds GPU-sharing pods (whole-GPU pods leave nothing). So the unallocated GPUs are
at least the waste of the *best possible packing* of the shares placed so far: ``L2 x 1000 -
sum of shares``, with L2 the Martello-Toth lower bound on the number of 1000-milli bins those
shares need (a valid bound, no solver). A policy that places the same pods cannot leave fewer
GPUs unallocated than this floor; it can only move closer to it (or place other pods).

For each seed this runs ``--policy`` (default ``capplan``) up to the last pod of the 100% arrived
bin and prints: unallocated GPUs there (the state, not the bin mean), the part on share GPUs,
fully free GPUs, the floor and the best-fit-decreasing waste of the same shares (an upper bound
on the optimal packing's waste), and how many 810-milli shares were placed (each leaves 190
milli only a share of at most 190 can fill).

Usage::

    python benchmarks/online_share_floor.py [--policy capplan] [--seeds 42-51] [--file default] [--data DIR]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "alibaba-gpu-v2023"
C = 1000


def l2_bins(items: Sequence[int]) -> int:
    """Martello-Toth lower bound L2 on the bins of capacity C the items need."""
    w = sorted(items)
    best = math.ceil(sum(w) / C)
    for alpha in {0, *(x for x in w if x <= C // 2)}:
        j1 = [x for x in w if x > C - alpha]
        j2 = [x for x in w if C // 2 < x <= C - alpha]
        j3 = sum(x for x in w if alpha <= x <= C // 2)
        room = len(j2) * C - sum(j2)
        best = max(best, len(j1) + len(j2) + max(0, math.ceil((j3 - room) / C)))
    return best


def bfd_bins(items: Sequence[int]) -> int:
    """Bins used by best fit decreasing (an upper bound on the optimum)."""
    gaps: list[int] = []
    for x in sorted(items, reverse=True):
        fit = [(g - x, k) for k, g in enumerate(gaps) if g >= x]
        if fit:
            _, k = min(fit)
            gaps[k] -= x
        else:
            gaps.append(C - x)
    return len(gaps)


def main() -> int:
    """Print one row per seed and the means."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--policy", default="capplan")
    ap.add_argument("--seeds", default="42-51")
    ap.add_argument("--file", default="default")
    ap.add_argument("--data", type=Path, default=DATA)
    args = ap.parse_args()
    from capplan.bench.online.frag import TypicalPods
    from capplan.bench.online.policies import PolicyContext
    from capplan.bench.online.sim import MILLI, Fleet, PodTable, simulate
    from capplan.bench.online.table import make_policy
    from capplan.bench.protocols import online_order, seeds_from
    from capplan.io.alibaba import read_nodes, read_pods

    fleet = Fleet.from_trace(read_nodes(args.data / "openb_node_list_gpu_node.csv"))
    pods = PodTable.from_trace(read_pods(args.data / f"openb_pod_list_{args.file}.csv"))
    typical = TypicalPods.from_pods(fleet, pods)
    print("| seed | unalloc. GPUs (state at 100%) | on share GPUs | fully free GPUs | share floor (L2) | "
          "BFD waste | 810-milli shares placed | failed pods |")
    print("|---|---|---|---|---|---|---|---|")
    rows = []
    for seed in seeds_from(args.seeds):
        order = online_order(pods, fleet.total_milli, seed)
        demand = np.cumsum([pods.demand_milli(int(i)) for i in order])
        k100 = int(np.flatnonzero(np.round(demand / fleet.total_milli * 100) <= 100)[-1])
        ctx = PolicyContext(fleet=fleet, pods=pods, typical=typical, seed=seed)
        state, res = simulate(fleet, pods, order[: k100 + 1], make_policy(args.policy, ctx), seed)
        shares = [int(pods.milli[i]) for k, i in enumerate(order[: k100 + 1])
                  if res.nodes[k] and pods.num[i] == 1 and pods.milli[i] < MILLI]
        slots = np.arange(fleet.slots)[None, :] < fleet.gpus[:, None]
        free = state.gpu_left[slots]
        unalloc, full = free.sum() / MILLI, float((free == MILLI).sum())
        floor = (l2_bins(shares) * C - sum(shares)) / C
        bfd = (bfd_bins(shares) * C - sum(shares)) / C
        n810 = sum(1 for x in shares if x == 810)
        failed = sum(1 for n in res.nodes if not n)
        rows.append((unalloc, unalloc - full, full, floor, bfd, n810, failed))
        print(f"| {seed} | {unalloc:.1f} | {unalloc - full:.1f} | {full:.0f} | {floor:.1f} | {bfd:.1f} | {n810} | "
              f"{failed} |", flush=True)
    means = [statistics.mean(r[j] for r in rows) for j in range(7)]
    print(f"| **mean** | {means[0]:.1f} | {means[1]:.1f} | {means[2]:.1f} | {means[3]:.1f} | {means[4]:.1f} | "
          f"{means[5]:.0f} | {means[6]:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
