"""benchmarks/online_spec_traces.py: default-trace variants with GPU pods tied to one model."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import script_module

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "online_spec_traces.py"
FIELDS = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time"


@pytest.fixture(scope="module")
def st() -> ModuleType:
    return script_module(SCRIPT, "online_spec_traces")


NODES = [{"sn": "a", "gpu": "8", "model": "G2"}, {"sn": "b", "gpu": "2", "model": "T4"},
         {"sn": "c", "gpu": "0", "model": ""}]


def _pods() -> list[dict[str, str]]:
    rows = [(0, 0), (1, 1000), (1, 500), (4, 1000), (8, 1000)] * 20
    return [dict(zip(FIELDS.split(","), [f"p{j}", "4000", "8192", str(n), str(m), "", "LS", "Running", "0", "", ""],
                     strict=True)) for j, (n, m) in enumerate(rows)]


def test_all_tied_to_g2_where_a_g2_node_fits(st: ModuleType) -> None:
    """share 1, only G2: every GPU pod gets G2 (the 8-GPU node hosts all sizes); CPU-only pods stay untied."""
    got = st.tied(_pods(), NODES, 1.0, "G2")
    assert all(r["gpu_spec"] == ("G2" if int(r["num_gpu"]) else "") for r in got)


def test_drawn_models_host_the_pod_and_nothing_else_changes(st: ModuleType) -> None:
    """Drawn models: a 4- or 8-GPU pod never gets T4 (2-GPU nodes only); share 0 changes nothing."""
    pods = _pods()
    got = st.tied(pods, NODES, 1.0, None)
    assert {r["gpu_spec"] for r in got if int(r["num_gpu"]) >= 4} == {"G2"}
    assert {r["gpu_spec"] for r in got if r["num_gpu"] == "1"} == {"G2", "T4"}
    assert [{**r, "gpu_spec": ""} for r in got] == pods
    assert st.tied(pods, NODES, 0.0, None) == pods
    assert st.tied(pods, NODES, 0.5, None) == st.tied(pods, NODES, 0.5, None)  # fixed seed


def test_unknown_variant_is_refused(tmp_path: Path) -> None:
    """A variant name that is not spec<NN> / specg2<NN> exits 2 naming the option, writing nothing."""
    (tmp_path / "d").mkdir()
    with open(tmp_path / "d" / "openb_pod_list_default.csv", "w", newline="") as fh:
        csv.writer(fh).writerow(FIELDS.split(","))
    out = subprocess.run([sys.executable, str(SCRIPT), "--data", str(tmp_path / "d"), "-o", str(tmp_path / "o"),
                          "--variants", "spec60,gpuspec10"], capture_output=True, text=True)
    assert out.returncode == 2 and "--variants" in out.stderr and not (tmp_path / "o").exists()
