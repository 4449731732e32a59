"""ETA accuracy: capplan's start estimates vs kueue#13159's moving average, on the Alibaba replay under Kueue.

``python benchmarks/eta_bench.py [--quick] [--fleet-fraction 0.006] [--fleet-seed 42] [--seed 42]
[--replan-every 1h] [--sigmas 0,0.5] [--json OUT.json]`` replays the Alibaba trace
(``openb_pod_list_default.csv`` on a seeded share of ``openb_node_list_gpu_node.csv``, the replay protocol of
``capplan bench alibaba --protocol replay``) with Kueue's admission as the reality
(:mod:`capplan.bench.replay.kueue`): three ClusterQueues (team-a BestEffortFIFO, team-b StrictFIFO, team-c
BestEffortFIFO), pods drawn into them with the seed. At every re-plan tick each pending pod's estimated start,
by capplan (``schedule --policy kueue`` on the state then, run times exact or lognormal-noisy) and by the
moving-average estimator (EWMA and sliding window), is compared with the start it gets
(:mod:`capplan.bench.eta`). Prints a Markdown table and one JSON line; docs/benchmarks-eta.md has the results.
``--quick`` stops sampling after 60 ticks (about a minute).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "alibaba-gpu-v2023"
#: (name, strategy, share of the pods, share of the fleet's GPUs as quota)
QUEUES: tuple[tuple[str, Any, float, float], ...] = (("team-a", "BestEffortFIFO", 0.5, 0.5),
                                                     ("team-b", "StrictFIFO", 0.3, 0.35),
                                                     ("team-c", "BestEffortFIFO", 0.2, 0.25))


def commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True,
                             cwd=Path(__file__).resolve().parent)
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", default=str(DATA / "openb_node_list_gpu_node.csv"))
    ap.add_argument("--pods", default=str(DATA / "openb_pod_list_default.csv"))
    ap.add_argument("--fleet-fraction", type=float, default=0.006)
    ap.add_argument("--fleet-seed", type=int, default=42)
    ap.add_argument("--seed", type=int, default=42, help="queue draw, tie-breaks and the noisy run times")
    ap.add_argument("--replan-every", default="1h", help="seconds between re-plan ticks (90s/10m/1h)")
    ap.add_argument("--sigmas", default="0,0.5", help="lognormal sigmas of the run times capplan sees")
    ap.add_argument("--no-spread", action="store_true", help="leave out capplan-s<sigma>-expected and -sampled "
                    "(the estimator told the spread sigma of its run times)")
    ap.add_argument("--samples", type=int, default=8,
                    help="simulations per re-plan of capplan-s<sigma>-sampled (0: leave it out)")
    ap.add_argument("--half-life", type=float, default=10.0, help="EWMA half-life in admissions")
    ap.add_argument("--window", type=int, default=20, help="sliding window in admission intervals")
    ap.add_argument("--min-wait", type=int, default=600, help="only pods waiting longer count (seconds)")
    ap.add_argument("--max-ticks", type=int, default=None, help="stop sampling after this many ticks")
    ap.add_argument("--quick", action="store_true", help="--max-ticks 60")
    ap.add_argument("--progress", type=int, default=0, metavar="N", help="a line on stderr every N ticks")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args(argv)
    from capplan.bench.eta import alibaba_queues, error_stats, relative_errors, run_eta
    from capplan.bench.replay.sim import load_replay
    from capplan.io.alibaba import read_nodes, read_pods
    from capplan.model.timing import parse_seconds

    every = parse_seconds(args.replan_every)
    sigmas = [float(x) for x in args.sigmas.split(",") if x.strip()]
    max_ticks = 60 if args.quick else args.max_ticks
    t0, c0 = time.perf_counter(), time.process_time()
    tr = load_replay(read_nodes(args.nodes), read_pods(args.pods), args.fleet_fraction, args.fleet_seed)
    queues, queue_of = alibaba_queues(tr, QUEUES, args.seed)
    run = run_eta(tr, queues, queue_of, every, sigmas, args.seed, args.half_life, args.window, max_ticks,
                  progress=lambda line: print(line, file=sys.stderr, flush=True), every_n=args.progress,
                  spread=not args.no_spread, samples=args.samples)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    waits = run.start - tr.arrival
    common = run.common(args.min_wait)
    # where the errors come from: per queue, and against the wait still ahead at the tick
    have = np.ones(len(run.pod), dtype=bool)
    for e in run.estimates.values():
        have &= ~np.isnan(e)
    act, arr, q = run.start[run.pod], run.arrival[run.pod], queue_of[run.pod]
    per_queue = {name: {n: error_stats(relative_errors(np.where(have & (q == k), e, np.nan), act, arr,
                                                          args.min_wait)) for n, e in run.estimates.items()}
                 for k, name in enumerate(x.name for x in queues)}
    ahead = {n: error_stats(relative_errors(np.where(have, e, np.nan), act, run.tick, args.min_wait))
             for n, e in run.estimates.items()}
    # each pod once: the estimate at the first tick after it arrived (what its user sees on submitting)
    _, first = np.unique(run.pod, return_index=True)
    at_submit = {n: error_stats(relative_errors(np.where(have, e, np.nan)[first], act[first], arr[first],
                                                args.min_wait)) for n, e in run.estimates.items()}
    signed = {}
    for n, e in run.estimates.items():
        k = have & (act - arr > args.min_wait)
        s = (e[k] - act[k]) / (act[k] - arr[k])
        signed[n] = [round(float(x), 3) for x in np.percentile(s, [10, 50, 90])] if k.any() else []
    out: dict[str, Any] = {
        "commit": commit(), "argv": sys.argv[1:] if argv is None else argv, "nodes": len(tr.nodes),
        "gpus": int(tr.fleet.gpus.sum()), "pods": len(tr.arrival),
        "queues": [{"name": x.name, "strategy": x.strategy, "gpu_quota": x.gpus,
                    "pods": int((queue_of == k).sum()), "waiting_over_min": int((waits[queue_of == k] >
                                                                                 args.min_wait).sum())}
                   for k, x in enumerate(queues)],
        "pods_waiting_over_min": int((waits > args.min_wait).sum()), "ticks_sampled": len(set(run.tick.tolist())),
        "samples": len(run.pod), "errors": common, "errors_by_queue": per_queue, "errors_vs_wait_ahead": ahead,
        "errors_first_estimate_per_pod": at_submit,
        "signed_error_p10_p50_p90": signed, "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), **run.metrics}
    print("| estimator | samples | median error | p90 error | signed p10 / p50 / p90 |")
    print("|---|---|---|---|---|")
    for n, st in common.items():
        sg = " / ".join(f"{x:+.2f}" for x in signed[n])
        print(f"| {n} | {st['samples']:,} | {st['median']:.3f} | {st['p90']:.3f} | {sg} |")
    print(json.dumps(out))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
