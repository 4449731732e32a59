"""What the exact power rule for MIG slices and shares costs the CP-SAT time model (issue 17).

Usage::

    python benchmarks/schedule_power_cost.py [--sizes small-mig] [--seeds 1 2 3] [--time-limit 60] [--workers 2]

For each instance of :mod:`schedule_bench`, runs ``cpsat`` twice in fresh processes: with the exact rule (a
GPU's busy time cut into pieces, the default) and with each free slice or share charged a full TDP under
every budget (``TimeModel(exact_power=False)``, stricter than the rule). Prints, per run, the objective,
bound and gap, the neighbourhoods tried and kept, whether the model was exact, the CP-SAT models built and
the variables and constraints of the largest, and the neighbourhoods whose hint did not complete.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent


def run_one(size: str, seed: int, exact: bool, limit: float, workers: int) -> dict[str, Any]:
    """One instance with the exact or the stricter power rule (in this process)."""
    sys.path.insert(0, str(HERE))
    from schedule_bench import generate

    from capplan.io.scenario import problem_from_data
    from capplan.placement.schedule import exact as full
    from capplan.placement.schedule import schedule
    from capplan.placement.schedule import window as lns
    from capplan.placement.schedule.timemodel import model

    sizes: list[tuple[int, int]] = []
    failed = [0]

    class Counted(model.TimeModel):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **dict(kwargs, exact_power=exact))
            sizes.append((len(self.m.proto.variables), len(self.m.proto.constraints)))

        def complete(self, budget: float, seed: int) -> list[int] | None:
            out = super().complete(budget, seed)
            failed[0] += out is None
            return out

    setattr(full, "TimeModel", Counted)  # noqa: B010 (both modules took the class at import)
    setattr(lns, "TimeModel", Counted)  # noqa: B010
    p = problem_from_data(generate(size, seed))
    t0 = time.perf_counter()
    s = schedule(p, "cpsat", time_limit=limit, seed=0, workers=workers)
    biggest = max(sizes, default=(0, 0))
    return {"size": size, "seed": seed, "exact_power": exact, "strategy": s.strategy, "status": s.status,
            "objective": s.objective, "bound": s.bound, "gap": s.gap, "wait_gpu_h": s.wait_gpu_h,
            "lns_tried": s.metrics.get("lns_tried"), "lns_kept": s.metrics.get("lns_kept"),
            "model_exact": s.metrics.get("model_exact"), "models": len(sizes), "max_vars": biggest[0],
            "max_constraints": biggest[1], "hint_failed": failed[0], "wall_s": round(time.perf_counter() - t0, 2)}


def main(argv: list[str] | None = None) -> int:
    """Run both rules on each instance; print one dict per run."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("command", nargs="?", default="run", choices=("run", "one"))
    ap.add_argument("--sizes", nargs="+", default=["small-mig"])
    ap.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--exact", type=int, default=1, help="one: 1 exact power rule, 0 stricter")
    args = ap.parse_args(argv)
    if args.command == "one":
        print(repr(run_one(args.sizes[0], args.seeds[0], bool(args.exact), args.time_limit, args.workers)))
        return 0
    for size in args.sizes:
        for seed in args.seeds:
            for exact in (1, 0):
                out = subprocess.run([sys.executable, __file__, "one", "--sizes", size, "--seeds", str(seed),
                                      "--exact", str(exact), "--time-limit", str(args.time_limit),
                                      "--workers", str(args.workers)], capture_output=True, text=True, check=True)
                print(out.stdout.strip().splitlines()[-1], flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
