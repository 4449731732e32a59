"""Synthetic fleet and workload generators: determinism, config validation, online runs with gangs."""

from __future__ import annotations

from pathlib import Path

import pytest

from capplan.bench.online.sim import Fleet, PodTable
from capplan.bench.protocols import run_online
from capplan.bench.synthetic import SynthConfig, generate, load_config
from capplan.io.scenario import problem_from_data
from capplan.model.errors import InputError

CONFIGS = Path(__file__).parents[2] / "benchmarks" / "configs"


def test_generation_is_deterministic() -> None:
    """The same seed gives the same fleet and pods; another seed differs."""
    a, b = generate(SynthConfig(seed=5)), generate(SynthConfig(seed=5))
    assert a.pods == b.pods and a.nodes == b.nodes
    assert generate(SynthConfig(seed=6)).pods != a.pods


def test_shipped_configs_load_and_build_scenarios() -> None:
    """Every shipped config loads, and its fleet is a valid scenario cluster with racks and blocks."""
    files = sorted(CONFIGS.glob("*.yaml"))
    assert files
    for f in files:
        syn = generate(load_config(f))
        prob = problem_from_data({"cluster": syn.cluster_data(), "workloads": []})
        assert prob.cluster.levels[:2] == ("block", "rack") or list(prob.cluster.levels[:2]) == ["block", "rack"]
        sizes = {p.num_gpu * k for p, k in zip(syn.pods, syn.replicas, strict=True) if p.name.startswith("train")}
        assert all(8 <= s <= 512 for s in sizes)


def test_unknown_key_rejected(tmp_path: Path) -> None:
    """An unknown parameter is an InputError naming it."""
    f = tmp_path / "c.yaml"
    f.write_text("seed: 1\nbogus: 2\n")
    with pytest.raises(InputError, match="bogus"):
        load_config(f)


def test_online_run_with_gangs() -> None:
    """Gangs place all members or none, and their rack spread is reported."""
    syn = generate(SynthConfig(seed=2, blocks=1, racks_per_block=2, nodes_per_rack=4, load=0.8,
                               mix={"training": 1.0}, training_sizes=[8, 16, 32]))
    fleet = Fleet.from_trace(syn.nodes, rack=syn.rack, block=syn.block)
    run = run_online(fleet, PodTable.from_trace(syn.pods, syn.replicas, syn.priority), "bestfit", 1)
    assert run.final["gangs_placed"] >= 1 and run.final["gang_racks_mean"] >= 1


def test_batch_on_synthetic_gangs_reports_gang_columns(tmp_path: Path) -> None:
    """The batch protocol plans synthetic gangs as training workloads and fills the gang columns."""
    import csv

    from capplan.cli.main import main

    cfg = tmp_path / "c.yaml"
    cfg.write_text("seed: 3\nblocks: 2\nracks_per_block: 2\nnodes_per_rack: 2\nload: 0.9\n"
                   "mix: {training: 0.6, single: 0.2, shared: 0.2}\ntraining_sizes: [8, 16, 32]\n")
    syn = generate(load_config(cfg))
    assert any(k > 1 for k in syn.replicas)
    out = tmp_path / "o"
    assert main(["bench", "synthetic", "--config", str(cfg), "--protocol", "batch", "--policies", "greedy",
                 "--seeds", "1", "-q", "-o", str(out)]) == 0
    with open(out / "runs.csv", newline="") as fh:
        (row,) = list(csv.DictReader(fh))
    assert 0 < int(row["gangs_placed"]) <= int(row["gangs_total"])
    assert float(row["gang_spread_mean"]) >= 1 and row["mig_compute_pct"] == ""
