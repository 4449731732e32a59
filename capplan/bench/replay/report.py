"""Tables and plots of the replay protocol (``capplan bench alibaba --protocol replay``).

Written into the output folder beside the common runs.csv / final.csv / summary.md:

* ``replay.csv``: one row per (policy, seed): pods, mean / p50 / p95 / p99 / max wait (s), pods
  waiting over 1 h, mean and peak GPU allocation (%), run seconds, and capplan's re-plan counters.
* ``replay_by_shape.csv``: one row per (policy, seed, shape) with the same wait columns; shapes
  are ``whole-gpu`` (one whole GPU), ``share`` (part of one GPU), ``multi-gpu`` and ``cpu-only``.
* ``replay_allocation.csv``: one row per (policy, seed, hour): the time-weighted mean GPU
  allocation (% of the fleet's GPUs) over that hour of the trace.
* ``wait_cdf.png``: the share of pods that waited at most x seconds, per policy (x log-scaled);
  ``allocation_time.png``: per policy, the daily mean GPU allocation over the whole trace (left) and
  the hourly mean over its last 40 days, where the default trace's pods arrive (right).
"""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from capplan.bench.plots import finish_plot
from capplan.bench.replay.protocol import REPLAY_POLICIES, SHAPES, wait_cdf
from capplan.io.files import write_text_atomic

#: The right panel of allocation_time.png: hourly allocation over the last days of the replay.
ZOOM_DAYS = 40
#: Line styles per policy, so that coinciding lines stay visible.
STYLES = ("-", "--", "-.", ":", (0, (5, 1, 1, 1, 1, 1)))
WAIT_COLUMNS = ("pods", "mean_wait_s", "p50_wait_s", "p95_wait_s", "p99_wait_s", "max_wait_s", "waiting_over_1h")
RUN_COLUMNS = ("mean_allocation_pct", "peak_allocation_pct", "makespan_s", "seconds", "cpu_seconds", "replans",
               "replan_seconds", "replan_max_seconds", "replan_max_queue", "planned_starts", "early_starts",
               "fallback_starts", "slipped_pods", "slip_seconds", "max_slip_s", "backfilled", "nodes", "gpus",
               "pods_in_file", "excluded_never_scheduled", "excluded_never_fits", "censored", "replan_every_s",
               "noise_sigma", "fleet_fraction", "fleet_seed")


def _csv(rows: list[dict[str, Any]], cols: list[str]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


def write_replay_tables(results: list[dict[str, Any]], out: Path) -> None:
    """Write replay.csv, replay_by_shape.csv and replay_allocation.csv atomically."""
    main, shapes, alloc = [], [], []
    for res in results:
        job, f = res["job"], res["final"]
        key = {"policy": job["policy"], "seed": job["seed"]}
        main.append({**key, **f})
        for s in SHAPES:
            shapes.append({**key, "shape": s, **f["by_shape"][s]})
        for t, a in res.get("allocation", []):
            alloc.append({**key, "hour_start_s": t, "allocation_pct": a})
    write_text_atomic(out / "replay.csv", _csv(main, ["policy", "seed", *WAIT_COLUMNS, *RUN_COLUMNS]))
    write_text_atomic(out / "replay_by_shape.csv", _csv(shapes, ["policy", "seed", "shape", *WAIT_COLUMNS]))
    write_text_atomic(out / "replay_allocation.csv", _csv(alloc, ["policy", "seed", "hour_start_s",
                                                                  "allocation_pct"]))


def _mean(rows: list[dict[str, Any]], key: str, fmt: str) -> str:
    xs = [float(r[key]) for r in rows if r.get(key) is not None]
    return format(float(np.mean(xs)), fmt) if xs else ""


def replay_markdown(pols: dict[str, list[dict[str, Any]]]) -> list[str]:
    """The replay summary: one row per policy (means over seeds), waits in seconds, then waits by shape."""
    rank = {p: k for k, p in enumerate(REPLAY_POLICIES)}
    pols = dict(sorted(pols.items(), key=lambda kv: (rank.get(kv[0], len(rank)), kv[0])))
    first = next(iter(pols.values()))[0]["final"]
    out = [f"### Replay protocol ({len(next(iter(pols.values())))} seed(s) per policy; {first['pods']} pods on "
           f"{first['nodes']} nodes / {first['gpus']} GPUs; waits in seconds)", "",
           "| policy | mean wait | p50 | p95 | p99 | max | waiting > 1 h | mean alloc % | peak alloc % | "
           "re-plans | re-plan s (total / max) | s/run | CPU s/run |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for pol, runs in pols.items():
        f = [r["final"] for r in runs]
        replan = (f"{_mean(f, 'replan_seconds', '.1f')} / {_mean(f, 'replan_max_seconds', '.2f')}"
                  if f[0].get("replans") is not None else "")
        out.append(f"| {pol} | {_mean(f, 'mean_wait_s', '.1f')} | {_mean(f, 'p50_wait_s', '.0f')} | "
                   f"{_mean(f, 'p95_wait_s', '.0f')} | {_mean(f, 'p99_wait_s', '.0f')} | "
                   f"{_mean(f, 'max_wait_s', '.0f')} | {_mean(f, 'waiting_over_1h', '.1f')} | "
                   f"{_mean(f, 'mean_allocation_pct', '.2f')} | {_mean(f, 'peak_allocation_pct', '.2f')} | "
                   f"{_mean(f, 'replans', '.0f')} | {replan} | {_mean(f, 'seconds', '.1f')} | "
                   f"{_mean(f, 'cpu_seconds', '.1f')} |")
    out += ["", "Mean / p95 wait (s) by demand shape (pods):", "",
            "| policy | " + " | ".join(SHAPES) + " |", "|---|" + "---|" * len(SHAPES)]
    for pol, runs in pols.items():
        cells = []
        for s in SHAPES:
            rows = [r["final"]["by_shape"][s] for r in runs]
            cells.append(f"{_mean(rows, 'mean_wait_s', '.1f')} / {_mean(rows, 'p95_wait_s', '.0f')} "
                         f"({_mean(rows, 'pods', '.0f')})")
        out.append(f"| {pol} | " + " | ".join(cells) + " |")
    excl = (f"Left out: {first['excluded_never_scheduled']} pods never scheduled in the trace, "
            f"{first['excluded_never_fits']} that fit no node of this fleet; {first['censored']} still running at "
            f"the trace end run until it (docs/benchmarks.md, replay protocol).")
    return [*out, "", excl]


def replay_plots(results: list[dict[str, Any]], out: Path) -> list[Path]:
    """Write wait_cdf.png and allocation_time.png (first seed of each policy); return the paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_pol: dict[str, dict[str, Any]] = {}
    rank = {p: k for k, p in enumerate(REPLAY_POLICIES)}
    for res in sorted(results, key=lambda r: (rank.get(r["job"]["policy"], len(rank)), r["job"]["seed"])):
        by_pol.setdefault(res["job"]["policy"], res)
    written: list[Path] = []
    if not by_pol:
        return written
    first = next(iter(by_pol.values()))
    f = first["final"]
    fleet = f"{f.get('nodes', '?')} nodes / {f.get('gpus', '?')} GPUs, seed {first['job']['seed']}"
    fig, ax = plt.subplots(figsize=(8, 5))
    for k, (pol, res) in enumerate(by_pol.items()):
        pts = wait_cdf(np.asarray(res["waits"], dtype=np.int64))
        ax.step([max(x, 0.5) for x, _ in pts], [100 * y for _, y in pts], where="post", label=pol, color=f"C{k}",
                ls=STYLES[k % len(STYLES)])
    ax.set_xscale("log")
    ax.set_xlabel("wait (s, log scale; 0 drawn at 0.5 s; 1 h = 3,600 s, 1 day = 86,400 s)")
    ax.set_ylabel("pods that waited at most this long (%)")
    ax.set_title(f"Replay: wait CDF per policy ({fleet})")
    written.append(finish_plot(plt, fig, ax, out / "wait_cdf.png"))
    fig, (ax0, ax) = plt.subplots(1, 2, figsize=(12, 4.5), gridspec_kw={"width_ratios": [1, 2]})
    fig.suptitle(f"Replay: GPU allocation over time ({fleet}; lines that coincide overlap)")
    last = max((int(t) for res in by_pol.values() for t, _ in res.get("allocation", [])), default=0)
    for k, (pol, res) in enumerate(by_pol.items()):
        days: dict[int, list[float]] = defaultdict(list)
        for t, a in res.get("allocation", []):
            days[int(t) // 86400].append(float(a))
        xs = sorted(days)
        ls = STYLES[k % len(STYLES)]
        ax0.plot(xs, [float(np.mean(days[d])) for d in xs], label=pol, color=f"C{k}", lw=1, ls=ls)
        tail = [(int(t) / 86400, float(a)) for t, a in res.get("allocation", []) if int(t) >= last - ZOOM_DAYS * 86400]
        ax.plot([x for x, _ in tail], [y for _, y in tail], label=pol, color=f"C{k}", lw=0.8, ls=ls)
    ax0.set_xlabel("trace day")
    ax0.set_ylabel("GPU allocation (% of the fleet)")
    ax0.set_title("daily mean, whole trace")
    ax0.grid(alpha=0.3)
    ax.set_xlabel("trace day")
    ax.set_ylabel("GPU allocation (% of the fleet)")
    ax.set_title(f"hourly mean, last {ZOOM_DAYS} days")
    written.append(finish_plot(plt, fig, ax, out / "allocation_time.png"))
    return written
