"""Monte Carlo check of the goodput model, spare policies side by side, and the spot crossover.

Usage::

    python benchmarks/goodput_sim.py --days 30 --reps 2000 --seed 0

An independent discrete-event simulator, written from the contract of issue 29 (docs/concepts.md,
Goodput), not from the planner's code: a gang of ``nodes`` nodes of 8 GPUs; every GPU of the running gang
fails at ``rate`` per hour (the gang is exposed while it computes, checkpoints and restarts); a failure
loses the work since the last completed checkpoint and sends the node to repair for ``repair`` hours; the
restart takes ``restart`` hours when a replacement node is free, else ``restart_without_spare``; the gang
computes ``tau`` hours, then writes a checkpoint of ``checkpoint`` hours. Nodes in repair at time 0 are
drawn from the stationary state (Poisson with mean λ·T_r, each with a uniform remaining repair).

Policies, on the same failure trace (common random numbers):

* ``none``: no spare, every restart waits for a node;
* ``kueue``: replace a failed node only if a free node happens to exist in the domain: the rack's
  ``pool`` (8) other nodes, less those in repair, each busy with other work with probability ``busy``
  (85 % and 97 %), drawn afresh at each failure;
* ``capplan``: the spares ``spares: auto`` holds, idle and dedicated: a spare is free while fewer than
  ``s`` nodes are in repair.

Only the closed-form figures come from :mod:`capplan.model.goodput` (the thing under test). numpy, fixed seed.
"""

from __future__ import annotations

import argparse
import math
import platform
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from capplan.model.goodput import Interruptible, auto_spares, best_goodput, evaluate

GPUS_PER_NODE = 8


@dataclass(frozen=True)
class Gang:
    """A gang and its failure setting (hours; rate per GPU-hour)."""

    nodes: int
    rate: float
    checkpoint: float
    tau: float
    repair: float
    restart: float
    restart_without_spare: float

    @property
    def lam(self) -> float:
        return self.nodes * GPUS_PER_NODE * self.rate


@dataclass(frozen=True)
class Trace:
    """One replication: failure times, and the nodes in repair when each failure happens."""

    failures: np.ndarray
    in_repair: np.ndarray
    horizon: float


def make_trace(g: Gang, horizon: float, rng: np.random.Generator) -> Trace:
    """Poisson failures at rate λ over ``horizon`` hours; in-repair counts from a stationary start."""
    count = rng.poisson(g.lam * horizon)
    failures = np.sort(rng.uniform(0.0, horizon, count))
    initial = rng.uniform(0.0, g.repair, rng.poisson(g.lam * g.repair))  # remaining repair of nodes out at 0
    ends = np.concatenate((initial, failures + g.repair))
    starts = np.concatenate((np.full(initial.size, -np.inf), failures))
    # nodes in repair just before failure i: repairs started before it and not yet over
    in_repair = np.array([int(np.sum((starts < f) & (ends > f))) for f in failures], dtype=np.int64)
    return Trace(failures, in_repair, horizon)


def useful_hours(g: Gang, t: Trace, restart_of: Callable[[int, int], float]) -> float:
    """Work kept by checkpoints over the trace; ``restart_of(i, in_repair)`` is failure i's restart time.

    Work after the last checkpoint counts at the horizon (the gang runs on; a 30-day window must not charge
    the half segment it happens to cut).
    """
    cycle = g.tau + g.checkpoint
    work, up = 0.0, 0.0  # up: when the gang last (re)started computing from a checkpoint
    for i, f in enumerate(t.failures):
        if f > up:
            work += math.floor((f - up) / cycle) * g.tau
        up = f + restart_of(i, int(t.in_repair[i]))  # a failure during a restart starts it over
    if t.horizon > up:  # the run goes on past the horizon: its work since the last checkpoint is not lost yet
        done, part = divmod(t.horizon - up, cycle)
        work += done * g.tau + min(part, g.tau)
    return work


def policies(g: Gang, spares: int, pool: int, busy: tuple[float, ...],
             rng: np.random.Generator, t: Trace) -> dict[str, Callable[[int, int], float]]:
    """The restart rule of each policy for trace ``t`` (the kueue pool's occupancy drawn once per failure)."""
    luck = rng.random((t.failures.size, max(pool, 1)))  # which pool nodes happen to be free

    def kueue(b: float) -> Callable[[int, int], float]:
        def rule(i: int, n: int) -> float:
            free = max(0, pool - n)
            return g.restart if free and bool(np.any(luck[i, :free] >= b)) else g.restart_without_spare
        return rule

    return {
        "none": lambda i, n: g.restart_without_spare,
        **{f"kueue (pool {b:.0%} busy)": kueue(b) for b in busy},
        "capplan": lambda i, n: g.restart if n < spares else g.restart_without_spare,
    }


def closed_form(g: Gang, spares: int) -> float:
    model = Interruptible(gpus=g.nodes * GPUS_PER_NODE, nodes=g.nodes, rate_per_gpu_hour=g.rate,
                          checkpoint=g.checkpoint * 3600, node_repair=g.repair * 3600, restart=g.restart * 3600,
                          restart_without_spare=g.restart_without_spare * 3600, interval=g.tau * 3600)
    return evaluate(model, spares).goodput


def optimum_tau(nodes: int, rate: float, checkpoint: float) -> float:
    model = Interruptible(gpus=nodes * GPUS_PER_NODE, nodes=nodes, rate_per_gpu_hour=rate,
                          checkpoint=checkpoint * 3600, node_repair=1, restart=0, restart_without_spare=0)
    return evaluate(model, 0).interval_s / 3600


def compare(g: Gang, spares: int, days: float, reps: int, seed: int, pool: int = 8,
            busy: tuple[float, ...] = (0.85, 0.97)) -> dict[str, dict[str, float]]:
    """Mean goodput, GPU-hours lost and spare GPU-hours per policy over ``reps`` replications."""
    rng = np.random.default_rng(seed)
    horizon = days * 24.0
    sums: dict[str, float] = {}
    for _ in range(reps):
        t = make_trace(g, horizon, rng)
        for name, rule in policies(g, spares, pool, busy, rng, t).items():
            sums[name] = sums.get(name, 0.0) + useful_hours(g, t, rule) / horizon
    gpus = g.nodes * GPUS_PER_NODE
    out = {}
    for name, total in sums.items():
        u = total / reps
        held = spares if name == "capplan" else 0
        out[name] = {"goodput": u, "lost_gpu_h": gpus * horizon * (1 - u), "spare_gpu_h": held * 8 * horizon,
                     "closed_form": float("nan") if name.startswith("kueue") else closed_form(g, held)}
    return out


def spot_crossover(sizes: list[int], per_node_hour: float, checkpoint: float, restart: float, spot: float,
                   on_demand: float, days: float, reps: int, seed: int) -> list[dict[str, float]]:
    """Effective $ per useful GPU-hour of spot by gang size (closed form and simulated) against on demand."""
    rows = []
    for nodes in sizes:
        rate = per_node_hour / GPUS_PER_NODE
        tau = optimum_tau(nodes, rate, checkpoint)
        g = Gang(nodes, rate, checkpoint, tau, repair=1.0, restart=restart, restart_without_spare=restart)
        u = best_goodput(nodes * per_node_hour, checkpoint * 3600, restart * 3600)
        rng = np.random.default_rng(seed + nodes)
        sim = float(np.mean([useful_hours(g, make_trace(g, days * 24, rng), lambda i, n: restart) / (days * 24)
                             for _ in range(reps)]))
        rows.append({"gpus": nodes * GPUS_PER_NODE, "nodes": nodes, "u": u, "u_sim": sim,
                     "spot_per_useful": spot / u if u > 0 else math.inf, "on_demand": on_demand})
    return rows


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=False).stdout.strip()
    except OSError:  # pragma: no cover
        return "?"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--days", type=float, default=30.0)
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--price", type=float, default=3.0, help="$ per GPU-hour of a spare")
    args = ap.parse_args()
    t0 = time.perf_counter()
    print(f"commit {_commit()}, python {platform.python_version()}, {args.reps} replications of "
          f"{args.days:g} days, seed {args.seed}\n")
    print("| gang | rate /GPU-h | repair | spares (auto) | policy | goodput (sim) | closed form | diff pp | "
          "GPU-h lost | spare GPU-h | spare cost $ |")
    print("|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    for rate, repair in ((2e-5, 72.0), (1e-4, 24.0)):
        nodes = 64
        tau = optimum_tau(nodes, rate, 0.1)
        g = Gang(nodes, rate, 0.1, tau, repair, 0.25, 4.0)
        spares = auto_spares(Interruptible(gpus=512, nodes=nodes, rate_per_gpu_hour=rate, checkpoint=360,
                                           node_repair=repair * 3600, restart=900, restart_without_spare=14400))
        for name, r in compare(g, spares, args.days, args.reps, args.seed).items():
            diff = "" if math.isnan(r["closed_form"]) else f"{100 * (r['goodput'] - r['closed_form']):+.2f}"
            cf = "" if math.isnan(r["closed_form"]) else f"{r['closed_form']:.4f}"
            print(f"| 512 GPUs | {rate:g} | {repair:g} h | {spares} | {name} | {r['goodput']:.4f} | {cf} | {diff} | "
                  f"{r['lost_gpu_h']:,.0f} | {r['spare_gpu_h']:,.0f} | {r['spare_gpu_h'] * args.price:,.0f} |")
    print("\nSpot crossover (0.01 interruptions per node-hour, checkpoint 6 min, re-provision 30 min, "
          "spot $2.00, on demand $4.00 per GPU-hour)\n")
    print("| gang GPUs | nodes | u (closed form) | u (sim) | spot $ per useful GPU-h | on demand | cheaper |")
    print("|---:|---:|---:|---:|---:|---:|---|")
    for r in spot_crossover([1, 2, 4, 8, 16, 32, 64, 128], 0.01, 0.1, 0.5, 2.0, 4.0, args.days,
                            max(50, args.reps // 10), args.seed):
        print(f"| {r['gpus']:.0f} | {r['nodes']:.0f} | {r['u']:.4f} | {r['u_sim']:.4f} | {r['spot_per_useful']:.2f} | "
              f"{r['on_demand']:.2f} | {'spot' if r['spot_per_useful'] < r['on_demand'] else 'on demand'} |")
    print(f"\n{time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
