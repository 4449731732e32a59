"""benchmarks/goodput_sim.py: the independent Monte Carlo agrees with the closed form (fewer replications)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from tests.conftest import script_module

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "goodput_sim.py"


@pytest.fixture(scope="module")
def sim() -> ModuleType:
    return script_module(SCRIPT, "goodput_sim")


def test_monte_carlo_agrees_with_the_closed_form(sim: ModuleType) -> None:
    """A 512-GPU gang, 30 days, 1e-4 per GPU-hour, 24 h repair, 4 spares: within 0.5 pp with and without spares;
    planned spares beat none, and a Kueue-style pool that is mostly busy helps less than it."""
    g = sim.Gang(64, 1e-4, 0.1, sim.optimum_tau(64, 1e-4, 0.1), 24.0, 0.25, 4.0)
    out = sim.compare(g, 4, 30.0, 200, 0)
    for name in ("none", "capplan"):
        assert abs(out[name]["goodput"] - out[name]["closed_form"]) < 0.005, (name, out[name])
    assert out["capplan"]["goodput"] > out["kueue (pool 97% busy)"]["goodput"] > out["none"]["goodput"]
    assert out["capplan"]["spare_gpu_h"] == 4 * 8 * 720


def test_trace_in_repair_is_poisson(sim: ModuleType) -> None:
    """The in-repair count an interruption sees has the stationary Poisson mean a = λ·T_r."""
    g = sim.Gang(64, 1e-4, 0.1, 3.0, 24.0, 0.25, 4.0)
    rng = np.random.default_rng(1)
    seen = np.concatenate([sim.make_trace(g, 720.0, rng).in_repair for _ in range(300)])
    assert seen.mean() == pytest.approx(g.lam * 24.0, rel=0.03)
