"""Compare the online baselines with the FGD authors' published allocation ratios, per trace file.

Runs the online protocol of the FGD paper (:func:`capplan.bench.protocols.run_online`) for every
requested (trace file, policy, seed) and compares the mean GPU allocation ratio at 100% and 130%
arrived workload with the authors' per-seed results (``fgd-expected-results/analysis_allo_discrete.csv``,
policies 01-Random ... 06-FGD, seeds 42-51). A (file, policy) row passes when both differences are
within 1 percentage point. Policies the authors did not publish (``firstfit``, ``leastallocated``,
``mostallocated``) are run and shown with "-" for published.

Every finished run is cached as ``OUT/<file>-<policy>-<seed>.json`` (``file, policy, seed, seconds``
and the allocation % at ``"100"`` and ``"130"``: the format of ``benchmarks/online_vs_fgd.py``), so a
rerun skips it (resumable). Cheap policies run first, FGD last. Takes minutes to hours (FGD 15-50 s
per run), so it is a benchmark, not a unit test; results are recorded in docs/benchmarks.md.

Usage::

    python benchmarks/fgd_reproduce.py [--files default,cpu050,...] [--policies random,...,fgd]
        [--seeds 42-51] [--jobs 2] [-o DIR] [--markdown FILE] [--no-run] [--data DIR]

The original check (FGD and BestFit on the default trace) is
``--files default --policies fgd,bestfit``. Exit codes: 0 every published row within 1 point,
1 a row outside it (or runs missing under ``--no-run``), 2 bad arguments.
"""

from __future__ import annotations

import argparse
import csv
import functools
import json
import re
import statistics
import sys
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from capplan.io.files import write_text_atomic
from capplan.model.errors import InputError

if TYPE_CHECKING:
    from capplan.bench.online.sim import Fleet, PodTable

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "alibaba-gpu-v2023"
RESULTS = Path("fgd-expected-results") / "analysis_allo_discrete.csv"
NODES = "openb_node_list_gpu_node.csv"
POINTS = (100, 130)
TOLERANCE = 1.0  # percentage points
PUBLISHED_POLICIES = ("random", "dotprod", "gpuclustering", "gpupacking", "bestfit", "fgd")
SLOW = frozenset({"fgd"})  # scheduled after the cheap policies

Run = dict[str, Any]
Published = dict[tuple[str, str], list[dict[int, float]]]  # (file, policy) -> per-seed {point: alloc %}


def pod_file(data: Path, file: str) -> Path:
    """The pod CSV of a trace file's short name (``default`` -> ``openb_pod_list_default.csv``)."""
    return data / f"openb_pod_list_{file}.csv"


def published(path: Path) -> Published:
    """The authors' per-seed allocation at POINTS, keyed by (short file name, capplan policy name)."""
    from capplan.bench.online.table import PUBLISHED_NAMES

    ours = {v: k for k, v in PUBLISHED_NAMES.items()}
    out: Published = {}
    with open(path, newline="") as fh:
        for r in csv.DictReader(fh):
            if r["sc_policy"] in ours:
                key = (r["workload"].removeprefix("openb_pod_list_"), ours[r["sc_policy"]])
                out.setdefault(key, []).append({p: float(r[str(p)]) for p in POINTS})
    return out


def _names(text: str) -> list[str]:
    return list(dict.fromkeys(x.strip() for x in text.split(",") if x.strip()))


def resolve_policies(text: str) -> list[str]:
    """Canonical policy names (aliases resolved, duplicates dropped); InputError for unknown ones."""
    from capplan.bench.online.table import canonical

    names = list(dict.fromkeys(canonical(x) for x in _names(text)))
    if not names:
        raise InputError("--policies", "no policy given; e.g. fgd,bestfit")
    return names


def resolve_files(text: str, data: Path, pub: Published) -> list[str]:
    """The requested trace files, or every published file whose pod CSV is in ``data`` (default first)."""
    if not text.strip():
        present = {f for f, _ in pub if pod_file(data, f).is_file()}
        # default first, then by name with numbers compared as numbers (gpushare40 before gpushare100)
        return sorted(present, key=lambda f: (f != "default", re.sub(r"\d+", lambda m: m[0].zfill(6), f)))
    files = _names(text)
    missing = [f for f in files if not pod_file(data, f).is_file()]
    if missing:
        raise InputError("--files", f"no pod file {', '.join(pod_file(data, f).name for f in missing)} in {data}")
    return files


def cache_path(out: Path, file: str, policy: str, seed: int) -> Path:
    """Where the run (file, policy, seed) is cached."""
    return out / f"{file}-{policy}-{seed}.json"


def load_run(path: Path, file: str, policy: str, seed: int) -> Run | None:
    """The cached run at ``path`` if it is complete and is that run; None otherwise (rerun it)."""
    try:
        run = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(run, dict) or (run.get("file"), run.get("policy"), run.get("seed")) != (file, policy, seed):
        return None
    numbers = [run.get(k) for k in ("seconds", *map(str, POINTS))]
    if not all(isinstance(v, int | float) for v in numbers):
        return None
    return run


@functools.lru_cache(maxsize=2)
def _inputs(data: str, file: str) -> tuple[Fleet, PodTable]:
    """The fleet and pods of one trace file, read once per worker process."""
    from capplan.bench.online.sim import Fleet, PodTable
    from capplan.io.alibaba import read_nodes, read_pods

    fleet = Fleet.from_trace(read_nodes(Path(data) / NODES))
    return fleet, PodTable.from_trace(read_pods(pod_file(Path(data), file)))


def run_one(job: tuple[str, str, str, int]) -> Run:
    """Run one (data folder, file, policy, seed) online and return its cache record."""
    from capplan.bench.protocols import run_online

    data, file, policy, seed = job
    fleet, pods = _inputs(data, file)
    run = run_online(fleet, pods, policy, seed, frag_bins=False)
    alloc = {r.arrived_pct: r.allocation_pct for r in run.rows}
    if any(p not in alloc for p in POINTS):
        raise RuntimeError(f"{file}: the arrived workload never reached {POINTS} % of capacity (seed {seed})")
    return {"file": file, "policy": policy, "seed": seed, "seconds": run.final["seconds"],
            **{str(p): alloc[p] for p in POINTS}}


def execute(jobs: Sequence[tuple[str, str, str, int]], out: Path, workers: int) -> None:
    """Run ``jobs`` (cheap policies first) in ``workers`` processes, caching each as it finishes."""
    todo = sorted(jobs, key=lambda j: j[2] in SLOW)
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(run_one, j) for j in todo]
        for k, fut in enumerate(as_completed(futures), 1):
            run = fut.result()
            path = cache_path(out, run["file"], run["policy"], run["seed"])
            write_text_atomic(path, json.dumps(run) + "\n")
            print(f"[{k}/{len(todo)}] {path.name}: {run['100']} / {run['130']} ({run['seconds']} s)",
                  file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Row:
    """One (file, policy): our per-seed allocation at POINTS, the published ones (if any) and time."""

    file: str
    policy: str
    ours: list[dict[int, float]]
    theirs: list[dict[int, float]] | None
    seconds: float

    def mean(self, point: int, published: bool = False) -> float:
        """Mean allocation % at ``point`` (ours, or the published one)."""
        runs = self.theirs if published else self.ours
        return statistics.mean(r[point] for r in runs or [])

    def span(self, point: int, published: bool = False) -> str:
        """``min..max`` of the per-seed allocation % at ``point``."""
        vals = [r[point] for r in (self.theirs if published else self.ours) or []]
        return f"{min(vals):.2f}..{max(vals):.2f}"

    def passed(self) -> bool | None:
        """Whether both means are within TOLERANCE of the published ones; None when unpublished."""
        if not self.theirs:
            return None
        return all(abs(self.mean(p) - self.mean(p, True)) <= TOLERANCE for p in POINTS)


def summarise(runs: Iterable[Run], files: Sequence[str], policies: Sequence[str], pub: Published) -> list[Row]:
    """One row per requested (file, policy) that has at least one run, in request order."""
    groups: dict[tuple[str, str], list[Run]] = {}
    for r in runs:
        groups.setdefault((r["file"], r["policy"]), []).append(r)
    rows = []
    for f in files:
        for p in policies:
            mine = groups.get((f, p))
            if mine:
                rows.append(Row(f, p, [{pt: float(r[str(pt)]) for pt in POINTS} for r in mine], pub.get((f, p)),
                                statistics.mean(float(r["seconds"]) for r in mine)))
    return rows


def passed(rows: Sequence[Row], missing: Sequence[tuple[str, str, int]]) -> bool:
    """True when every published row is within TOLERANCE and no requested run is missing."""
    return not missing and all(r.passed() is not False for r in rows)


def _missing_text(missing: Sequence[tuple[str, str, int]]) -> str:
    groups: dict[tuple[str, str], list[int]] = {}
    for f, p, s in missing:
        groups.setdefault((f, p), []).append(s)
    return "; ".join(f"{p} on {f} (seeds {', '.join(map(str, ss))})" for (f, p), ss in groups.items())


def markdown(rows: Sequence[Row], missing: Sequence[tuple[str, str, int]], seeds: Sequence[int]) -> str:
    """The comparison table, a PASS/FAIL verdict per published row and an overall summary line."""
    a, b = POINTS
    lines = [f"| trace file | policy | seeds | ours @{a} | published @{a} | diff @{a} | ours @{b} | published @{b} | "
             f"diff @{b} | ours min..max @{a} | ours min..max @{b} | published min..max @{a} | s/run | "
             f"within {TOLERANCE:g} pp |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|---|---:|---|"]
    for r in rows:
        cells = [r.file, r.policy, str(len(r.ours))]
        for p in POINTS:
            if r.theirs:
                cells += [f"{r.mean(p):.2f}", f"{r.mean(p, True):.2f}", f"{r.mean(p) - r.mean(p, True):+.2f}"]
            else:
                cells += [f"{r.mean(p):.2f}", "-", "-"]
        ok = r.passed()
        cells += [r.span(a), r.span(b), r.span(a, True) if r.theirs else "-", f"{r.seconds:.1f}",
                  "-" if ok is None else ("PASS" if ok else "FAIL")]
        lines.append("| " + " | ".join(cells) + " |")
    judged = [r for r in rows if r.passed() is not None]
    good = sum(bool(r.passed()) for r in judged)
    if len(seeds) == 1:
        span = f"seed {seeds[0]}"
    elif list(seeds) == list(range(seeds[0], seeds[-1] + 1)):
        span = f"seeds {seeds[0]}-{seeds[-1]}"
    else:
        span = f"seeds {', '.join(map(str, seeds))}"
    lines.append("")
    if judged:
        lines.append(f"{'PASS' if passed(rows, missing) else 'FAIL'}: {good} of {len(judged)} published (file, policy) "
                     f"rows within {TOLERANCE:g} pp at {a}% and {b}% arrived ({span}).")
    else:
        lines.append(f"{'FAIL' if missing else 'DONE'}: no published results for these rows ({span}).")
    if missing:
        lines.append(f"Not finished ({len(missing)} runs): {_missing_text(missing)}.")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Run (or resume) the requested runs and print the comparison table; see the module docstring."""
    from capplan.bench.protocols import seeds_from

    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--files", default="", help="short names, e.g. default,cpu050 (default: all published present)")
    ap.add_argument("--policies", default=",".join(PUBLISHED_POLICIES))
    ap.add_argument("--seeds", default="42-51")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("-o", "--out", type=Path, default=Path("out-fgd-reproduce"))
    ap.add_argument("--markdown", type=Path, help="also write the table to this file")
    ap.add_argument("--no-run", action="store_true", help="only tabulate cached runs")
    args = ap.parse_args(argv)
    try:
        if not (args.data / RESULTS).is_file():
            raise InputError("--data", f"no {RESULTS} under {args.data}")
        if args.jobs < 1:
            raise InputError("--jobs", "must be at least 1")
        pub = published(args.data / RESULTS)
        files = resolve_files(args.files, args.data, pub)
        policies = resolve_policies(args.policies)
        seeds = sorted(set(seeds_from(args.seeds)))
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    wanted = [(f, p, s) for f in files for p in policies for s in seeds]
    t0 = time.perf_counter()
    todo = [(str(args.data), f, p, s) for f, p, s in wanted if load_run(cache_path(args.out, f, p, s), f, p, s) is None]
    if todo and not args.no_run:
        args.out.mkdir(parents=True, exist_ok=True)
        execute(todo, args.out, args.jobs)
    runs = [load_run(cache_path(args.out, f, p, s), f, p, s) for f, p, s in wanted]
    missing = [w for w, r in zip(wanted, runs, strict=True) if r is None]
    rows = summarise([r for r in runs if r is not None], files, policies, pub)
    text = markdown(rows, missing, seeds)
    print(text, end="")
    print(f"{time.perf_counter() - t0:.0f} s wall, {0 if args.no_run else len(todo)} runs done now, "
          f"{len(wanted) - len(todo)} cached, {args.jobs} processes", file=sys.stderr)
    if args.markdown:
        write_text_atomic(args.markdown, text)
    return 0 if passed(rows, missing) else 1


if __name__ == "__main__":
    sys.exit(main())
