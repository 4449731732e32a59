"""Can every job of a scheduling-benchmark instance run? A rack split says yes by building the schedule.

Usage::

    python benchmarks/schedule_split_bench.py --size small --seed 2 --time-limit 600 [-o SCHEDULE.json]

Forces every job with GPU demand (and every guaranteed job, at its release) present and tries
:func:`capplan.placement.schedule.timemodel.split.split_schedule` (per-rack pooled model, then the full time
model rack by rack). A schedule it finds is decoded, given its reasons, checked by the independent
validator and compared with the energy bound: when the bound counts all the work, such a schedule is
optimal at every work level, which settles where the optimum lies (docs/benchmarks-schedule.md).
Failure proves nothing. Prints one dict; ``-o`` writes the schedule JSON.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from schedule_bench import SIZES, generate

from capplan.io.files import write_text_atomic
from capplan.io.scenario import problem_from_data
from capplan.model.validate_schedule import assert_valid_schedule
from capplan.placement.schedule.heuristic import diagnose
from capplan.placement.schedule.jobs import Jobs, model_inputs
from capplan.placement.schedule.result import make_schedule
from capplan.placement.schedule.timemodel.split import rack_parts, split_schedule


def main(argv: list[str] | None = None) -> int:
    """Run the split on one instance and print the outcome."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="small", choices=list(SIZES))
    ap.add_argument("--seed", type=int, default=2)
    ap.add_argument("--time-limit", type=float, default=600.0)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--solver-seed", type=int, default=0)
    ap.add_argument("--tries", type=int, default=8, help="phase-1 seeds tried in turn")
    ap.add_argument("-o", "--output", type=Path, default=None)
    args = ap.parse_args(argv)
    p = problem_from_data(generate(args.size, args.seed))
    assert p.schedule is not None
    horizon, step = p.schedule.horizon, p.schedule.step
    jobs = Jobs(p, horizon, step)
    caps, budgets, busy = model_inputs(p, horizon)
    cl = p.cluster
    level = cl.levels[-2]
    parts = rack_parts(caps, budgets, [cl.domain_of(n, level) for n in cl.nodes])
    if parts is None:
        print({"error": "a power budget spans racks"})
        return 1
    force = [j for j, jb in enumerate(jobs.jobs) if jb.units or jb.guaranteed]
    on_time = [j for j, jb in enumerate(jobs.jobs) if jb.guaranteed]
    t0 = time.perf_counter()
    sol = split_schedule(jobs.jobs, busy, caps, budgets, horizon, step, parts[0], parts[1], force, on_time,
                         time_limit=args.time_limit, seed=args.solver_seed, workers=args.workers, tries=args.tries)
    wall = round(time.perf_counter() - t0, 2)
    out: dict[str, object] = {"size": args.size, "seed": args.seed, "forced": len(force), "found": sol is not None,
                              "wall_s": wall}
    if sol is not None:
        items = jobs.decode(sol)
        diag = diagnose(p, horizon, step, items, None)
        s = assert_valid_schedule(p, make_schedule(p, "rack-split", items, diag.unscheduled, horizon=horizon,
                                                   step=step, reasons=diag.reasons, seconds=wall))
        out.update(status=s.status, objective=s.objective, bound=s.bound, gap=s.gap, wait_gpu_h=s.wait_gpu_h,
                   scheduled=s.metrics.get("replicas_scheduled"), replicas=s.metrics.get("replicas_total"))
        if args.output is not None:
            write_text_atomic(args.output, s.to_json())
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
