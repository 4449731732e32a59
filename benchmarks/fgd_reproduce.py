"""Check that online FGD and BestFit reproduce the FGD authors' published allocation ratios.

Runs the online protocol (capplan.bench) on the default Alibaba trace for seeds 42-51 and
compares the mean GPU allocation ratio at 100% and 130% arrived workload with the authors'
cached results (``fgd-expected-results/analysis_allo_discrete.csv``). Pass: every difference
within 1 percentage point. Takes several minutes (FGD ~1 min per seed on one core), so it is a
benchmark, not a unit test; results are recorded in docs/benchmarks.md.

Usage::

    python benchmarks/fgd_reproduce.py [--policies fgd,bestfit] [--jobs 2] [--data DIR]
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "alibaba-gpu-v2023"
SEEDS = range(42, 52)
POINTS = (100, 130)


def _one(args: tuple[str, str, int]) -> tuple[str, int, dict[int, float], float]:
    data, policy, seed = args
    from capplan.bench.protocols import run_online
    from capplan.bench.sim import Fleet, PodTable
    from capplan.traces.alibaba import read_nodes, read_pods

    fleet = Fleet.from_trace(read_nodes(Path(data) / "openb_node_list_gpu_node.csv"))
    pods = PodTable.from_trace(read_pods(Path(data) / "openb_pod_list_default.csv"))
    run = run_online(fleet, pods, policy, seed, frag_bins=False)
    return policy, seed, {r.arrived_pct: r.allocation_pct for r in run.rows}, run.final["seconds"]


def published(data: Path, policy: str) -> dict[int, float]:
    """Mean published allocation at POINTS over the ten seeds for ``policy`` on the default trace."""
    from capplan.bench.policies import PUBLISHED_NAMES

    with open(data / "fgd-expected-results" / "analysis_allo_discrete.csv", newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["workload"] == "openb_pod_list_default"
                and r["sc_policy"] == PUBLISHED_NAMES[policy]]
    return {p: statistics.mean(float(r[str(p)]) for r in rows) for p in POINTS}


def main() -> int:
    """Run the check; exit 0 when every difference is within 1 point."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--policies", default="fgd,bestfit")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--data", type=Path, default=DATA)
    args = ap.parse_args()
    if not (args.data / "openb_pod_list_default.csv").is_file():
        print(f"trace not found under {args.data}", file=sys.stderr)
        return 2
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        results = list(pool.map(_one, [(str(args.data), p, s) for p in policies for s in SEEDS]))
    ok = True
    print(f"| policy | arrived % | ours (mean of {len(SEEDS)} seeds) | published | diff | min..max ours | s/run |")
    print("|---|---|---|---|---|---|---|")
    for p in policies:
        pub = published(args.data, p)
        mine = [r for r in results if r[0] == p]
        for point in POINTS:
            vals = [r[2][point] for r in mine]
            diff = statistics.mean(vals) - pub[point]
            ok &= abs(diff) <= 1.0
            secs = statistics.mean(r[3] for r in mine)
            print(f"| {p} | {point} | {statistics.mean(vals):.2f} | {pub[point]:.2f} | {diff:+.2f} | "
                  f"{min(vals):.2f}..{max(vals):.2f} | {secs:.1f} |")
    print(f"\n{'PASS' if ok else 'FAIL'}: every difference within 1 point: {ok} "
          f"({time.perf_counter() - t0:.0f} s wall, {args.jobs} processes)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
