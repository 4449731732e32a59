"""``--time-limit`` bounds the whole ``plan``, ``schedule`` and ``reserve`` command (issues 15, 27).

Each case runs ``python -m capplan plan SCENARIO --time-limit T -q -o PLAN`` in a fresh process and
measures its wall time (interpreter start, parse, solve, validate, write, exit). Prints one Markdown
row per case: wall / limit, whether wall <= 1.1 x limit + 1 s, and the plan's objective (placed GPUs
per priority), so that "quality never drops when the limit grows" can be read off::

    python benchmarks/limits_bench.py                       # default trace at 2 5 10 30 s, 100k at 30 60 s
    python benchmarks/limits_bench.py --cases default:2 default:10 --repeat 3
    python benchmarks/limits_bench.py --checkout /tmp/main-copy --cases default:2   # another checkout's code
    python benchmarks/limits_bench.py --command schedule --cases schedule-week:2 schedbench-medium:10
    python benchmarks/limits_bench.py --command reserve --cases reserve-small:2 reservebench50:10

Besides the wall time it prints the CPU seconds of the ``capplan`` process (user + system): on a
shared machine the wall time of the fixed steps (start, import, load, validate) grows with the load,
their CPU time much less, so CPU seconds compare two checkouts more fairly than wall seconds.

A case is ``SCENARIO:SECONDS`` or ``SCENARIO:SECONDS:STRATEGY`` (default ``--strategy``).
Scenarios: ``default`` is the Alibaba default trace imported with ``capplan import alibaba`` (YAML,
8,152 pods on 1,213 nodes); ``fleet100k`` is :func:`fleet_bench.synthetic` at 100,000 GPUs (JSON);
``isofleet100k`` (or ``isofleet10k``) is :func:`greedy_scale.fleet`, issue 25's fleet (tenant isolation over
40 tenants, gangs with a required rack or block, MIG inference at the top priority), for greedy and ``auto``.
``defaultjson`` is the default trace written as JSON (its load costs what a fast YAML parser would).
``cpureplicasN`` (e.g. ``cpureplicas1m``, ``cpureplicas100k``) is :func:`cpu_replicas`: N CPU-only replicas in
10 workloads on 1,000 nodes over one day on an hourly grid (issue 27's 10^6-replica ``schedule`` case).
All are written once into ``--workdir``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

# ../shared/data next to the repository (a worktree under /work/wt/ finds /work/shared)
DATA = next((d for d in (Path(__file__).resolve().parents[k] / "shared" / "data" / "alibaba-gpu-v2023"
                         for k in (2, 3)) if d.exists()),
            Path(__file__).resolve().parents[2] / "shared" / "data" / "alibaba-gpu-v2023")
EXAMPLES = Path(__file__).resolve().parents[1] / "models" / "examples"
INSTANCES = Path(__file__).resolve().parent / "instances"
DEFAULT_CASES = ["default:2", "default:5", "default:10", "default:30", "fleet100k:30", "fleet100k:60",
                 "isofleet100k:30:greedy", "isofleet100k:60:greedy", "isofleet100k:60", "isofleet10k:20:greedy"]


def cpu_replicas(total: int, workloads: int = 10, nodes: int = 1000) -> dict[str, object]:
    """A ``schedule`` scenario of ``total`` CPU-only replicas in ``workloads`` equal workloads on ``nodes`` GPU nodes
    (8 x H100, 128 cores, 1 TiB each), horizon one day, step one hour (deterministic, no randomness).

    Workload ``k`` asks 1-4 cores and 4-16 GiB per replica for 1-6 hours from release ``k`` hours, priority
    0 or 10; the demand is about 2.2x the core-hours of the day, so the cores are the
    bottleneck, most replicas wait and some do not run (issue 27's whole-command limit at 10^6 replicas).
    """
    each = total // workloads
    return {
        "schedule": {"horizon": "1d", "step": "1h"},
        "cluster": {"name": f"cpu-replicas-{total}", "levels": ["rack", "node"], "racks": [
            {"name": f"r{r + 1}", "nodes": [{"name_prefix": f"r{r + 1}n", "count": 20, "gpu": "H100-SXM5-80GB",
                                              "gpus": 8, "cpu": 128, "memory_gib": 1024}]}
            for r in range(nodes // 20)]},
        "workloads": [{"name": f"cpu{k}", "replicas": each, "cpu": 1 + k % 4, "memory_gib": 4 * (1 + k % 4),
                       "duration": f"{1 + k % 6}h", "release": f"{k}h", "priority": 10 if k % 3 == 0 else 0}
                      for k in range(workloads)],
    }


def scenario(name: str, workdir: Path) -> Path:
    """The scenario file of ``name`` (written on first use)."""
    workdir.mkdir(parents=True, exist_ok=True)
    if name == "default":
        path = workdir / "default.yaml"
        if not path.exists():
            subprocess.run([sys.executable, "-m", "capplan", "import", "alibaba",
                            str(DATA / "openb_node_list_gpu_node.csv"), str(DATA / "openb_pod_list_default.csv"),
                            "-o", str(path)], check=True, capture_output=True)
        return path
    if name == "defaultjson":  # the same scenario as JSON: what the load costs with a fast parser
        path = workdir / "defaultjson.json"
        if not path.exists():
            from capplan.io.files import load_yaml_or_json

            path.write_text(json.dumps(load_yaml_or_json(scenario("default", workdir), "scenario")))
        return path
    if name.startswith("isofleet"):  # issue 25's fleet: isolation over 40 tenants, gangs, MIG at the top
        from greedy_scale import fleet

        gpus = int(name.removeprefix("isofleet").replace("k", "000"))
        path = workdir / f"{name}.json"
        if not path.exists():
            path.write_text(json.dumps(fleet(gpus)))
        return path
    if name.startswith("fleet"):
        from fleet_bench import synthetic

        gpus = int(name.removeprefix("fleet").replace("k", "000"))
        path = workdir / f"{name}.json"
        if not path.exists():
            path.write_text(json.dumps(synthetic(gpus)))
        return path
    if name.startswith("cpureplicas"):  # issue 27: CPU-only replicas in bulk (cpureplicas1m = 10^6)
        total = int(name.removeprefix("cpureplicas").replace("k", "000").replace("m", "000000"))
        path = workdir / f"{name}.json"
        if not path.exists():
            path.write_text(json.dumps(cpu_replicas(total)))
        return path
    if name.startswith("reservebench"):  # benchmarks/reserve_bench.py's planning file at N scenarios
        from reserve_bench import instance

        path = workdir / f"{name}.json"
        if not path.exists():
            path.write_text(json.dumps(instance(int(name.removeprefix("reservebench")))))
        return path
    if name.startswith("schedbench-"):  # benchmarks/schedule_bench.py's scenario of that size, seed 1
        from schedule_bench import generate

        path = workdir / f"{name}.json"
        if not path.exists():
            path.write_text(json.dumps(generate(name.removeprefix("schedbench-"), 1)))
        return path
    for where in (Path(name), EXAMPLES / f"{name}.yaml", INSTANCES / f"{name}.yaml"):
        if where.is_file():
            return where
    raise SystemExit(f"unknown scenario {name!r}: default, fleetNk (e.g. fleet100k), isofleetNk, reservebenchN, "
                     "cpureplicasN (e.g. cpureplicas1m), "
                     "schedbench-SIZE, a file, or the name of a models/examples or benchmarks/instances file")


def _cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run_case(path: Path, limit: float, strategy: str, checkout: Path | None = None,
             command: str = "plan") -> dict[str, object]:
    """One ``capplan plan`` run in a fresh process: wall and CPU seconds, exit code and the plan's figures.

    ``checkout``: run that source tree's ``capplan`` (it becomes the working directory and
    ``PYTHONPATH``; ``python -m`` puts the working directory first on the path).
    """
    work = Path(tempfile.mkdtemp(prefix="limits-"))
    out = work / ("out" if command == "reserve" else f"{command}.json")
    env = os.environ.copy()
    if checkout is not None:
        env["PYTHONPATH"] = str(checkout)
    argv = [sys.executable, "-m", "capplan", command, str(path), "--time-limit", str(limit), "-o", str(out)]
    argv += ["--method", strategy] if command == "reserve" else ["--strategy", strategy, "-q"]
    c, t = _cpu(), time.perf_counter()
    res = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=checkout)
    wall = time.perf_counter() - t
    row: dict[str, object] = {"wall": round(wall, 2), "cpu": round(_cpu() - c, 2), "code": res.returncode}
    if res.returncode in (0, 3) and command == "reserve":
        doc = json.loads((out / "plan.json").read_text())
        row.update(strategy=doc["solver"]["method"], objective=doc["costs"]["total"], gap=doc["solver"].get("gap"))
    elif res.returncode in (0, 3):
        plan = json.loads(out.read_text())
        row.update(strategy=plan["strategy"], objective=plan["objective"], gap=plan["gap"],
                   worst=max(plan.get("gaps") or [plan["gap"]]), cut=plan["metrics"].get("cut_by_time_limit"),
                   placed=plan["metrics"].get("replicas_placed"))
    else:
        row["error"] = res.stderr.strip().splitlines()[-1:] or ["?"]
    shutil.rmtree(work, ignore_errors=True)
    return row


def main() -> None:
    """Command line entry."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", nargs="+", default=DEFAULT_CASES, help="SCENARIO:SECONDS[:STRATEGY] ...")
    ap.add_argument("--repeat", type=int, default=1, help="runs per case (the median wall is reported)")
    ap.add_argument("--strategy", default="auto", help="the strategy (reserve: the --method)")
    ap.add_argument("--command", choices=("plan", "schedule", "reserve"), default="plan",
                    help="the command timed (default plan)")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/capplan-limits"))
    ap.add_argument("--checkout", type=Path, help="run this source tree's capplan (default: the installed one)")
    a = ap.parse_args()
    print(f"load {os.getloadavg()[0]:.2f}")
    print("| scenario | limit s | strategy | wall s (median) | wall / limit | <= 1.1 x limit + 1 s | CPU s (median) "
          "| objective (GPUs per priority) | gap | worst priority gap | cut by the limit | runs (wall) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for case in a.cases:
        name, secs, *how = case.split(":")
        limit = float(secs)
        path = scenario(name, a.workdir)
        rows = [run_case(path, limit, how[0] if how else a.strategy, a.checkout, a.command) for _ in range(a.repeat)]
        walls = [float(str(r["wall"])) for r in rows]
        wall = statistics.median(walls)
        last = rows[-1]
        ok = "yes" if wall <= 1.1 * limit + 1 else "NO"
        cpu = statistics.median(float(str(r["cpu"])) for r in rows)
        print(f"| {name} | {limit:g} | {last.get('strategy', '-')} | {wall:.2f} | {wall / limit:.2f} | {ok} | "
              f"{cpu:.2f} | "
              f"{last.get('objective', last.get('error'))} | {last.get('gap', '-')} | {last.get('worst', '-')} | "
              f"{last.get('cut', '-')} | "
              f"{', '.join(f'{w:.1f}' for w in walls)} |", flush=True)


if __name__ == "__main__":
    main()
