"""capplan's online policy against FGD's published results, per trace file of the Alibaba v2023 family.

For every pod file present in the data folder that the FGD authors' per-run results
(``fgd-expected-results/analysis_allo_discrete.csv``) cover, runs the online protocol of the
FGD paper (``capplan.bench``: seed-shuffled pods, inflation to 130% of GPU capacity, place on
arrival or fail for good) with ``--policies`` (default ``capplan``) over ``--seeds`` and
compares the mean GPU allocation at 100% and 130% arrived with the published FGD mean over
seeds 42-51. A file *wins* when the policy's mean beats FGD's published mean at both points.

Each finished run is saved to ``OUT/<file>-<policy>-<seed>.json``; existing files are reused, so
an interrupted benchmark resumes. Results are recorded in docs/benchmarks-online.md.

Usage::

    python benchmarks/online_vs_fgd.py [--files default,cpu250] [--seeds 42-51] [--policies capplan,fgd]
                                       [--jobs 2] [--data DIR] [-o OUT]
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "alibaba-gpu-v2023"
POINTS = (100, 130)
PUBLISHED = "06-FGD"


def _one(args: tuple[str, str, str, int]) -> dict[str, object]:
    data, file, policy, seed = args
    from capplan.bench.protocols import run_online
    from capplan.bench.sim import Fleet, PodTable
    from capplan.io.alibaba import read_nodes, read_pods

    fleet = Fleet.from_trace(read_nodes(Path(data) / "openb_node_list_gpu_node.csv"))
    pods = PodTable.from_trace(read_pods(Path(data) / f"openb_pod_list_{file}.csv"))
    run = run_online(fleet, pods, policy, seed, frag_bins=False)
    alloc = {r.arrived_pct: r.allocation_pct for r in run.rows}
    return {"file": file, "policy": policy, "seed": seed, "seconds": run.final["seconds"],
            **{str(p): alloc[p] for p in POINTS}}


def published(data: Path) -> dict[str, dict[int, float]]:
    """Published FGD mean allocation at POINTS per trace file (short name, e.g. ``cpu250``)."""
    with open(data / "fgd-expected-results" / "analysis_allo_discrete.csv", newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["sc_policy"] == PUBLISHED]
    out: dict[str, dict[int, float]] = {}
    for name in sorted({r["workload"] for r in rows}):
        mine = [r for r in rows if r["workload"] == name]
        out[name.removeprefix("openb_pod_list_")] = {p: statistics.mean(float(r[str(p)]) for r in mine)
                                                      for p in POINTS}
    return out


def _seeds(text: str) -> list[int]:
    from capplan.bench.protocols import seeds_from

    return seeds_from(text)


def main() -> int:
    """Run the comparison and print a Markdown table; exit 0 when the first policy wins every file."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--files", default="", help="comma-separated short names (default: all present and published)")
    ap.add_argument("--seeds", default="42-51")
    ap.add_argument("--policies", default="capplan")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("-o", "--out", type=Path, default=Path("out-online-vs-fgd"))
    args = ap.parse_args()
    pub = published(args.data)
    present = [f for f in pub if (args.data / f"openb_pod_list_{f}.csv").is_file()]
    files = [f.strip() for f in args.files.split(",") if f.strip()] or present
    missing = [f for f in files if f not in present]
    if missing:
        print(f"--files: no published result or no pod file for {', '.join(missing)}; "
              f"choose from {', '.join(present)}", file=sys.stderr)
        return 2
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    seeds = _seeds(args.seeds)
    args.out.mkdir(parents=True, exist_ok=True)
    jobs = [(str(args.data), f, p, s) for f in files for p in policies for s in seeds]
    todo = [j for j in jobs if not (args.out / f"{j[1]}-{j[2]}-{j[3]}.json").is_file()]
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for res in pool.map(_one, todo):
            path = args.out / f"{res['file']}-{res['policy']}-{res['seed']}.json"
            path.write_text(json.dumps(res))
            print(f"done {path.name}: {res['100']} / {res['130']} ({res['seconds']} s)", file=sys.stderr)
    results = [json.loads((args.out / f"{j[1]}-{j[2]}-{j[3]}.json").read_text()) for j in jobs]
    from capplan.io.alibaba import read_nodes

    gpus = sum(n.gpus for n in read_nodes(args.data / "openb_node_list_gpu_node.csv"))
    wins = 0
    print(f"| trace file | policy | alloc % @100 (mean of {len(seeds)}) | FGD published @100 | diff | "
          f"alloc % @130 | FGD published @130 | diff | unalloc. GPUs @100 ours / FGD | min..max @100 | s/run | win |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for f in files:
        for p in policies:
            mine = [r for r in results if r["file"] == f and r["policy"] == p]
            m = {pt: statistics.mean(float(r[str(pt)]) for r in mine) for pt in POINTS}
            d = {pt: m[pt] - pub[f][pt] for pt in POINTS}
            win = all(v > 0 for v in d.values())
            wins += win and p == policies[0]
            un = (100 - m[100]) * gpus / 100, (100 - pub[f][100]) * gpus / 100
            print(f"| {f} | {p} | {m[100]:.2f} | {pub[f][100]:.2f} | {d[100]:+.2f} | {m[130]:.2f} | "
                  f"{pub[f][130]:.2f} | {d[130]:+.2f} | {un[0]:.0f} / {un[1]:.0f} | "
                  f"{min(float(r['100']) for r in mine):.2f}..{max(float(r['100']) for r in mine):.2f} | "
                  f"{statistics.mean(float(r['seconds']) for r in mine):.0f} | {'win' if win else 'LOSS'} |")
    print(f"\n{policies[0]} wins {wins} of {len(files)} files ({time.perf_counter() - t0:.0f} s wall, "
          f"{args.jobs} processes)")
    return 0 if wins == len(files) else 1


if __name__ == "__main__":
    sys.exit(main())
