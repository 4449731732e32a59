"""Benchmark report: a Markdown summary table and PNG plots (matplotlib, Agg backend).

* ``summary.md``: per protocol (never mixed), per policy: mean allocation at 100% arrived (from the
  monotone curve, :func:`capplan.bench.metrics.allocation_curve`) and at the end, unallocated GPUs and
  fragmentation at the end (the run's final metrics, as in final.csv), seconds per run; ``n/a`` where a
  figure does not exist, and a warning when every policy gives the same figures; batch
  adds MIG slice utilisation, gangs placed/total and gang spread (empty cells: not applicable).
* ``allocation.png``: mean allocation vs arrived workload per policy (online), with the FGD
  authors' published mean curves dashed when ``fgd-expected-results`` covers the same trace.
* ``time.png``: seconds per run vs pods per run, per policy.
* replay protocol: a wait table, ``replay*.csv``, ``wait_cdf.png`` and ``allocation_time.png``
  (:mod:`capplan.bench.replay.report`).
"""

from __future__ import annotations

import csv
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from capplan.bench.metrics import allocation_curve
from capplan.bench.online.table import PUBLISHED_NAMES
from capplan.bench.plots import finish_plot
from capplan.io.files import write_text_atomic


def _mean(xs: list[float]) -> float:
    return statistics.mean(xs) if xs else float("nan")


def _cell(rows: list[dict[str, Any]], key: str, fmt: str = ".2f") -> str:
    """Mean of ``key`` over rows that have a value, or an empty cell when none has."""
    xs = [float(r[key]) for r in rows if r.get(key) is not None]
    return format(statistics.mean(xs), fmt) if xs else ""


def _gangs(rows: list[dict[str, Any]]) -> str:
    """Mean ``placed/total`` gangs over rows that report gangs (empty when none does)."""
    xs = [r for r in rows if r.get("gangs_total") is not None]
    if not xs:
        return ""
    return f"{_mean([r['gangs_placed'] for r in xs]):.1f}/{_mean([r['gangs_total'] for r in xs]):.1f}"


def _avg(xs: list[float], fmt: str = ".2f") -> str:
    """Mean of ``xs`` formatted, or ``n/a`` when there is nothing to average (never ``nan``)."""
    return format(statistics.mean(xs), fmt) if xs else "n/a"


def _online_table(pols: dict[str, list[dict[str, Any]]]) -> list[str]:
    """The online table: every figure from the run's final metrics (as in final.csv) or the monotone curve."""
    out = [f"### Online protocol ({len(next(iter(pols.values())))} seeds per policy)", "",
           "| policy | alloc % @100% arrived | alloc % @end | unallocated GPUs @end | FGD frag % @end | "
           "stranded % | failed pods | s/run |", "|---|---|---|---|---|---|---|---|"]
    rank = []
    for pol, runs in pols.items():
        curve = allocation_curve([res["rows"] for res in runs])
        fin = [res["final"] for res in runs]
        cells = [_avg([curve[100]] if 100 in curve else []), _avg([f["allocation_pct"] for f in fin]),
                 _avg([f["unallocated_gpus"] for f in fin], ".1f"),
                 _avg([f["fragmentation_pct"] for f in fin if f.get("fragmentation_pct") is not None]),
                 _avg([f["stranded_pct"] for f in fin]), _avg([f["failed_pods"] for f in fin], ".0f"),
                 _avg([f["seconds"] for f in fin])]
        rank.append((statistics.mean([f["allocation_pct"] for f in fin]), pol, cells))
    for _, pol, cells in sorted(rank, reverse=True):
        out.append(f"| {pol} | " + " | ".join(cells) + " |")
    reached = [max((r["arrived_pct"] for r in res["rows"]), default=0) for runs in pols.values() for res in runs]
    if reached and min(reached) < 100:
        out += ["", f"n/a at 100% arrived: a run's binned records stop at {min(reached)}% arrived (one large pod "
                    "took arrivals past the last bin, or the run ended there)."]
    same = {(c[0], c[1], c[2], c[5]) for _, _, c in rank}  # allocation @100% and @end, unallocated, failed pods
    if len(rank) > 1 and len(same) == 1:
        out += ["", f"**Warning: all {len(rank)} policies give identical allocation and failed pods.** The workload "
                    "does not tell policies apart (e.g. everything that fits is placed whatever the order); "
                    "check the arrival load and the largest pods against the fleet."]
    return out


def summary_markdown(results: list[dict[str, Any]]) -> str:
    """The summary table(s), one per protocol; empty figures read ``n/a``, identical policies are flagged."""
    out = []
    by_proto: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for res in results:
        by_proto[res["job"]["protocol"]][res["job"]["policy"]].append(res)
    for proto, pols in sorted(by_proto.items()):
        if proto == "online":
            out += _online_table(pols)
        elif proto == "replay":
            from capplan.bench.replay.report import replay_markdown

            out += replay_markdown(pols)
        else:
            out += [f"### Batch protocol (pods known up front; {proto})", "",
                    "| strategy | placed % of capacity | bound % | status | s/run | peak MiB | MIG compute % | "
                    "MIG memory % | gangs placed/total | gang spread |", "|---|---|---|---|---|---|---|---|---|---|"]
            for pol, runs in sorted(pols.items()):
                rows = [res["rows"][0] for res in runs]
                out.append(f"| {pol} | {_cell(rows, 'allocation_pct') or 'n/a'} | "
                           f"{_cell(rows, 'bound_pct') or 'n/a'} | "
                           f"{', '.join(sorted({res['final']['status'] for res in runs}))} | "
                           f"{_cell(rows, 'seconds') or 'n/a'} | "
                           f"{_avg([res['final']['peak_mib'] for res in runs], '.1f')} | "
                           f"{_cell(rows, 'mig_compute_pct')} | {_cell(rows, 'mig_memory_pct')} | "
                           f"{_gangs(rows)} | {_cell(rows, 'gang_spread_mean', '.2f')} |")
        out.append("")
    return "\n".join(out)


def published_curves(expected_csv: Path, workload: str) -> dict[str, dict[int, float]]:
    """Mean published allocation per arrived % for each policy on ``workload`` (empty if absent)."""
    if not expected_csv.is_file():
        return {}
    back = {v: k for k, v in PUBLISHED_NAMES.items()}
    acc: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    with open(expected_csv, newline="") as fh:
        for row in csv.DictReader(fh):
            if row["workload"] != workload or row["sc_policy"] not in back:
                continue
            for k in range(131):
                if row.get(str(k)):
                    acc[back[row["sc_policy"]]][k].append(float(row[str(k)]))
    return {p: {k: statistics.mean(v) for k, v in d.items()} for p, d in acc.items()}


def plots(results: list[dict[str, Any]], out: Path, published: dict[str, dict[int, float]]) -> list[Path]:
    """Write allocation.png and time.png; return the paths written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    runs_of: dict[str, list[list[dict[str, Any]]]] = defaultdict(list)
    for res in results:
        if res["job"]["protocol"] == "online":
            runs_of[res["job"]["policy"]].append(res["rows"])
    curves = {pol: allocation_curve(rows) for pol, rows in runs_of.items()}
    if curves:
        fig, ax = plt.subplots(figsize=(8, 5))
        for k, (pol, pts) in enumerate(sorted(curves.items())):
            xs = sorted(pts)
            line = ax.plot(xs, [pts[x] for x in xs], label=f"{pol} (capplan)", color=f"C{k}")
            if pol in published:
                ps = sorted(published[pol])
                ax.plot(ps, [published[pol][x] for x in ps], "--", color=line[0].get_color(),
                        label=f"{pol} (published)")
        ax.set_xlabel("arrived workload (% of GPU capacity)")
        ax.set_ylabel("GPU allocation (%)")
        ax.set_title("Online protocol: allocation vs arrived workload (mean over seeds)")
        written.append(finish_plot(plt, fig, ax, out / "allocation.png"))
    pts2: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for res in results:
        f = res["final"]
        size = f.get("pods") or f.get("demand_gpus") or 0
        pts2[f"{res['job']['protocol']}:{res['job']['policy']}"].append((float(size), float(f["seconds"])))
    if pts2:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for key, xy in sorted(pts2.items()):
            ax.scatter([p[0] for p in xy], [p[1] for p in xy], label=key, s=14)
        ax.set_xlabel("pods per run (online) / GPU demand (batch)")
        ax.set_ylabel("seconds per run")
        if all(p[1] > 0 for xy in pts2.values() for p in xy):  # a run timed at 0 s has no place on a log axis
            ax.set_yscale("log")
        written.append(finish_plot(plt, fig, ax, out / "time.png"))
    return written


def write_report(results: list[dict[str, Any]], out: Path, expected_csv: Path | None, workload: str) -> Path:
    """Write summary.md and the plots; return the summary path."""
    published = published_curves(expected_csv, workload) if expected_csv else {}
    text = f"# Benchmark summary: {workload}\n\n" + summary_markdown(results)
    if published:
        text += f"\nPublished FGD curves ({', '.join(sorted(published))}) are drawn dashed in allocation.png.\n"
    replay = [res for res in results if res["job"]["protocol"] == "replay"]
    if replay:
        from capplan.bench.replay.report import replay_plots, write_replay_tables

        write_replay_tables(replay, out)
        replay_plots(replay, out)
    write_text_atomic(out / "summary.md", text)
    plots(results, out, published)
    return out / "summary.md"
