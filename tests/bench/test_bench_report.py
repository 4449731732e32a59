"""The harness never prints nan or contradictory figures: monotone online curves, final figures, flagged ties."""

from __future__ import annotations

import csv
import itertools
import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from capplan.bench.metrics import allocation_curve
from capplan.bench.online.sim import Fleet, PodTable
from capplan.bench.protocols import run_online
from capplan.bench.report import summary_markdown
from capplan.bench.runner import Job, Source, run_all
from capplan.bench.synthetic import SynthConfig, generate
from capplan.io.alibaba import TraceNode, TracePod

CONFIG = Path(__file__).resolve().parents[2] / "benchmarks" / "configs" / "mixed-small.yaml"


def _nondecreasing(curve: dict[int, float]) -> bool:
    xs = sorted(curve)
    return xs == list(range(xs[0], xs[-1] + 1)) and all(curve[a] <= curve[b] for a, b in itertools.pairwise(xs))


@settings(max_examples=15, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4), st.sampled_from([125, 250, 500, 1000]), st.integers(1, 3)),
                min_size=4, max_size=30), st.lists(st.integers(0, 99), min_size=2, max_size=4, unique=True))
def test_online_curves_are_monotone_in_arrived_workload(shapes: list[tuple[int, int, int]], seeds: list[int]) -> None:
    """Whatever the pods and seeds, the mean curve over seeds never falls as workload arrives."""
    nodes = [TraceNode(f"n{i}", 32000, 131072, 4, "T4") for i in range(3)]
    pods = [TracePod(f"p{i}", 1000 * cpu, 4096, num if milli == 1000 else 1, milli)
            for i, (num, milli, cpu) in enumerate(shapes)]
    fleet, table = Fleet.from_trace(nodes), PodTable.from_trace(pods)
    runs = [[r.__dict__ for r in run_online(fleet, table, "random", s, frag_bins=False).rows] for s in seeds]
    curve = allocation_curve(runs)
    assert curve and _nondecreasing(curve)


def test_curve_of_seeds_covering_different_bins_does_not_fall() -> None:
    """Two seeds with rows in different bins: a per-bin mean fell from 44% to 16%; the curve does not."""
    a = [{"arrived_pct": 0, "allocation_pct": 0.0}, {"arrived_pct": 44, "allocation_pct": 44.0},
         {"arrived_pct": 60, "allocation_pct": 50.0}]
    b = [{"arrived_pct": 0, "allocation_pct": 0.0}, {"arrived_pct": 45, "allocation_pct": 16.0},
         {"arrived_pct": 70, "allocation_pct": 30.0}]
    curve = allocation_curve([a, b])
    assert _nondecreasing(curve) and max(curve) == 60  # only bins both runs reach
    assert curve[44] == 22.0 and curve[45] == 30.0 and curve[60] == 33.0


def _result(policy: str, seed: int, rows: list[dict[str, Any]], alloc: float, failed: int) -> dict[str, Any]:
    final = {"allocation_pct": alloc, "unallocated_gpus": 10.0, "fragmentation_pct": 1.0, "stranded_pct": 0.5,
             "failed_pods": failed, "seconds": 0.1}
    return {"job": {"protocol": "online", "policy": policy, "seed": seed}, "rows": rows, "final": final}


def test_identical_policies_are_flagged_and_no_nan() -> None:
    """All policies alike: the summary says so; a curve without a 100% bin reads n/a, never nan."""
    rows = [{"arrived_pct": 0, "allocation_pct": 0.0}, {"arrived_pct": 45, "allocation_pct": 40.0}]
    same = [_result(p, s, rows, 57.3, 1) for p in ("firstfit", "fgd", "random") for s in (1, 2)]
    text = summary_markdown(same)
    assert "identical" in text and "nan" not in text and "| n/a | 57.30 |" in text
    differ = [*same[:-1], _result("random", 2, rows, 40.0, 3)]
    assert "identical" not in summary_markdown(differ)


def test_summary_agrees_with_final_csv(tmp_path: Path) -> None:
    """The summary's allocation at the end is final.csv's mean, and the synthetic policies differ."""
    src = Source("synthetic", config=str(CONFIG))
    jobs = [Job(src, "online", pol, seed) for pol in ("firstfit", "leastallocated") for seed in (42, 43)]
    results = run_all(jobs, tmp_path, quiet=True)
    text = summary_markdown(results)
    assert "nan" not in text and "identical" not in text
    with open(tmp_path / "final.csv", newline="") as fh:
        finals = list(csv.DictReader(fh))
    for pol in ("firstfit", "leastallocated"):
        mean = sum(float(r["allocation_pct"]) for r in finals if r["policy"] == pol) / 2
        assert f"| {pol} | " in text and f"| {mean:.2f} |" in text.split(f"| {pol} | ")[1].split("\n")[0]
    json.dumps(results)  # the results stay JSON (resumable job files)


def test_synthetic_load_is_kept_and_gangs_fit_the_fleet() -> None:
    """The workload ends within one smallest gang of the load target; no gang is larger than the fleet."""
    for seed in range(1, 6):
        cfg = SynthConfig(seed=seed, blocks=1, racks_per_block=2, nodes_per_rack=4, load=1.0,
                          training_sizes=[8, 16, 64, 128, 512])
        syn = generate(cfg)
        fleet_gpus = 8 * 8
        demand = sum(p.gpu_milli * p.num_gpu * k for p, k in zip(syn.pods, syn.replicas, strict=True)) / 1000
        assert fleet_gpus <= demand <= fleet_gpus + 8
        assert all(p.num_gpu * k <= fleet_gpus for p, k in zip(syn.pods, syn.replicas, strict=True))
