"""Run many (protocol, policy, seed) benchmark jobs in parallel, resumably, with a progress bar.

Each finished job is written atomically to ``DIR/runs/<protocol>-<policy>-<seed>.json``; a job
whose file exists is skipped, so an interrupted run resumes where it stopped. When all jobs are
done, ``DIR/runs.csv`` (one row per policy, seed and arrived-% bin) and ``DIR/final.csv`` (one row
per run, end-of-run metrics) are rebuilt from the job files.
"""

from __future__ import annotations

import csv
import io
import json
import sys
import time
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from capplan.bench.metrics import COLUMNS, PLAN_COLUMNS
from capplan.io.files import write_text_atomic


@dataclass(frozen=True)
class Source:
    """Where the pods and nodes come from: a trace file pair or a synthetic config."""

    kind: str  # "alibaba" | "synthetic"
    nodes: str = ""
    pods: str = ""
    config: str = ""

    @property
    def label(self) -> str:
        """A short name (the pod file's or the config's stem)."""
        return Path(self.pods or self.config).stem


@dataclass(frozen=True)
class Job:
    """One run."""

    source: Source
    protocol: str  # "online" | "batch" | "replay"
    policy: str
    seed: int
    time_limit: float = 60.0
    # replay only: re-plan period and time limit (s), noise of run-time estimates, share of the nodes kept and
    # the seed that draws them (None: the run's seed)
    replan_every: float = 600.0
    replan_limit: float = 2.0
    noise_sigma: float = 0.5
    fleet_fraction: float = 1.0
    fleet_seed: int | None = None

    @property
    def key(self) -> str:
        """The job's file stem."""
        return f"{self.protocol}-{self.policy}-{self.seed}"


@lru_cache(maxsize=4)
def _load(source: Source) -> tuple[Any, Any, list[Any], dict[str, Any], Any]:
    """(fleet, pod table, trace pods, scenario cluster data, Synthetic or None), cached per process."""
    from capplan.bench.online.sim import Fleet, PodTable
    from capplan.io.alibaba import read_nodes, read_pods, trace_data

    if source.kind == "synthetic":
        from capplan.bench.synthetic import generate, load_config

        syn = generate(load_config(source.config))
        fleet = Fleet.from_trace(syn.nodes, rack=syn.rack, block=syn.block)
        table = PodTable.from_trace(syn.pods, replicas=syn.replicas, priority=syn.priority)
        return fleet, table, syn.pods, {"cluster": syn.cluster_data()}, syn
    nodes, pods = read_nodes(source.nodes), read_pods(source.pods)
    data = trace_data(nodes, [], source.label)
    return Fleet.from_trace(nodes), PodTable.from_trace(pods), pods, {"cluster": data["cluster"]}, None


@lru_cache(maxsize=2)
def _load_replay(source: Source, fleet_fraction: float, seed: int) -> Any:
    """The replay's pods and fleet (:func:`capplan.bench.replay.protocol.load_replay`), cached per process."""
    from capplan.bench.replay.protocol import load_replay
    from capplan.io.alibaba import read_nodes, read_pods

    return load_replay(read_nodes(source.nodes), read_pods(source.pods), fleet_fraction, seed)


def run_replay_job(job: Job) -> dict[str, Any]:
    """One replay run: its metrics (``final``), every pod's wait and the hourly allocation."""
    from capplan.bench.replay.protocol import hourly_allocation, replay_metrics, run_replay

    fleet_seed = job.seed if job.fleet_seed is None else job.fleet_seed
    tr = _load_replay(job.source, job.fleet_fraction, fleet_seed)
    run = run_replay(tr, job.policy, job.seed, job.replan_every, job.noise_sigma, job.replan_limit)
    final = replay_metrics(tr, run)
    final.update(replan_every_s=job.replan_every, noise_sigma=job.noise_sigma, fleet_fraction=job.fleet_fraction,
                 fleet_seed=fleet_seed)
    return {"job": asdict(job), "rows": [], "final": final, "waits": (run.start - tr.arrival).tolist(),
            "allocation": hourly_allocation(tr, run)}


def run_job(job: Job) -> dict[str, Any]:
    """Run one job and return its JSON-ready result (module level: picklable for worker processes).

    Batch runs of synthetic suites pass the recorded kinds (gangs) and MIG requests (real MIG
    profiles); online runs and Alibaba traces use the pod list alone.
    """
    from capplan.bench.protocols import run_batch, run_online

    if job.protocol == "replay":
        return run_replay_job(job)
    fleet, table, trace_pods, cluster, syn = _load(job.source)
    if job.protocol == "online":
        run = run_online(fleet, table, job.policy, job.seed)
        return {"job": asdict(job), "rows": [asdict(r) for r in run.rows], "final": run.final}
    if syn is not None:
        from capplan.bench.synthetic import mig_requests
        from capplan.model.catalog import load_catalog

        b = run_batch(cluster, trace_pods, job.policy, job.seed, fleet.total_milli, job.time_limit,
                      replicas=list(syn.replicas), priority=list(syn.priority), kinds=syn.kinds,
                      mig=mig_requests(syn, load_catalog()))
    else:
        b = run_batch(cluster, trace_pods, job.policy, job.seed, fleet.total_milli, job.time_limit)
    pct = round(100 * b.placed_gpus / b.capacity_gpus, 3)
    row = {"arrived_pct": round(100 * b.demand_gpus / b.capacity_gpus), "allocation_pct": pct,
           "unallocated_gpus": round(b.capacity_gpus - b.placed_gpus, 3), "fragmentation_pct": None,
           "seconds": b.seconds, "bound_pct": round(100 * b.bound_gpus / b.capacity_gpus, 3), **b.plan_metrics}
    return {"job": asdict(job), "rows": [row], "final": asdict(b)}


def _progress(done: int, total: int, t0: float, quiet: bool) -> None:
    if quiet or not sys.stderr.isatty():
        return
    width = 30
    fill = width * done // max(total, 1)
    eta = (time.perf_counter() - t0) / max(done, 1) * (total - done) if done else 0.0
    sys.stderr.write(f"\r[{'#' * fill}{'.' * (width - fill)}] {done}/{total} runs, ETA {eta:5.0f} s")
    sys.stderr.flush()
    if done == total:
        sys.stderr.write("\n")


def run_all(jobs: list[Job], out: Path, workers: int = 1, quiet: bool = False) -> list[dict[str, Any]]:
    """Run the jobs not finished yet (in parallel), then rebuild runs.csv and final.csv."""
    from capplan.placement.core.executor import LocalExecutor, SerialExecutor

    runs = out / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    todo = [j for j in jobs if not (runs / f"{j.key}.json").is_file()]
    executor = SerialExecutor() if workers <= 1 else LocalExecutor(workers)
    t0 = time.perf_counter()
    done = len(jobs) - len(todo)
    _progress(done, len(jobs), t0, quiet)
    step = max(1, workers)
    for k in range(0, len(todo), step):  # chunks: results are saved as they finish (resumable)
        chunk = todo[k:k + step]
        for job, res in zip(chunk, executor.map(run_job, chunk), strict=True):
            write_text_atomic(runs / f"{job.key}.json", json.dumps(res, indent=1))
            done += 1
            _progress(done, len(jobs), t0, quiet)
    results = [json.loads((runs / f"{j.key}.json").read_text()) for j in jobs]
    write_tables(results, out)
    return results


def write_tables(results: list[dict[str, Any]], out: Path) -> None:
    """Write runs.csv (per bin) and final.csv (per run) atomically."""
    cols = ["protocol", *COLUMNS, "bound_pct", *PLAN_COLUMNS]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for res in results:
        job = res["job"]
        for row in res["rows"]:
            w.writerow({"protocol": job["protocol"], "policy": job["policy"], "seed": job["seed"], **row})
    write_text_atomic(out / "runs.csv", buf.getvalue())
    keys: list[str] = []
    for res in results:
        keys += [k for k in res["final"] if k not in keys and k not in ("protocol", "policy", "seed")
                 and not isinstance(res["final"][k], dict)]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=["protocol", "policy", "seed", *keys], extrasaction="ignore",
                       lineterminator="\n")
    w.writeheader()
    for res in results:
        job = res["job"]
        w.writerow({"protocol": job["protocol"], "policy": job["policy"], "seed": job["seed"], **res["final"]})
    write_text_atomic(out / "final.csv", buf.getvalue())
