"""The Alibaba trace loader and the ``capplan import alibaba`` command on every variant of the family."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import yaml

from capplan.cli.main import main
from capplan.io.alibaba import load_alibaba, read_nodes, read_pods
from capplan.io.scenario import load_scenario
from capplan.model.errors import InputError

DATA = Path(__file__).parents[2] / ".." / "shared" / "data" / "alibaba-gpu-v2023"
needs_data = pytest.mark.skipif(not (DATA / "openb_pod_list_default.csv").is_file(),
                                reason=f"Alibaba trace not found at {DATA}")
FULL = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time"


def _nodes(tmp: Path) -> Path:
    p = tmp / "nodes.csv"
    p.write_text("sn,cpu_milli,memory_mib,gpu,model\nn0,32000,131072,2,T4\nn1,96000,393216,8,G2\nn2,64000,262144,0,\n")
    return p


def _head(src: Path, dst: Path, n: int) -> Path:
    with open(src) as fh:
        dst.write_text("".join(fh.readline() for _ in range(n + 1)))
    return dst


def test_gpuspec_variant(tmp_path: Path) -> None:
    """A gpuspec*-style file (gpu_spec 'A|B') becomes allowed models on the workload."""
    pods = tmp_path / "openb_pod_list_gpuspec10.csv"
    pods.write_text(f"{FULL}\np0,4000,8192,1,500,T4|G2,LS,Running,0,10,0\np1,4000,8192,2,1000,G2,BE,Running,0,10,0\n")
    got = read_pods(pods)
    assert got[0].gpu_spec == ("T4", "G2") and got[1].gpu_spec == ("G2",)
    prob = load_alibaba(_nodes(tmp_path), pods)
    w0 = prob.workload("p0")
    assert w0.gpu_fraction == 0.5 and set(w0.gpu_models or ()) == {"T4", "G2"}


def test_multigpu_variant_five_columns(tmp_path: Path) -> None:
    """A multigpu*-style file with only name, cpu_milli, memory_mib, num_gpu, gpu_milli loads."""
    pods = tmp_path / "openb_pod_list_multigpu50.csv"
    pods.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,8000,16384,8,1000\np1,2000,4096,0,0\n")
    prob = load_alibaba(_nodes(tmp_path), pods)
    assert prob.workload("p0").gpus == 8 and prob.workload("p1").gpus is None


@pytest.mark.parametrize(("row", "field"), [
    ("p0,abc,8192,1,500", "cpu_milli"),
    ("p0,4000,8192,2,500", "gpu_milli"),
    ("p0,4000,-5,1,500", "memory_mib"),
])
def test_bad_rows_name_file_line_column(tmp_path: Path, row: str, field: str) -> None:
    """A bad value raises InputError naming file:line.column."""
    pods = tmp_path / "bad.csv"
    pods.write_text(f"name,cpu_milli,memory_mib,num_gpu,gpu_milli\np9,1000,1024,0,0\n{row}\n")
    with pytest.raises(InputError) as exc:
        read_pods(pods)
    assert f"{pods}:3.{field}" in str(exc.value)


def test_missing_column(tmp_path: Path) -> None:
    """A pod file without a required column is rejected with the columns found."""
    pods = tmp_path / "bad.csv"
    pods.write_text("name,cpu_milli,memory_mib\np0,1,1\n")
    with pytest.raises(InputError, match="lacks column"):
        read_pods(pods)


@needs_data
@pytest.mark.parametrize("variant", ["default", "cpu050", "cpu0", "gpushare100", "gpushare40"])
def test_shared_folder_variants(tmp_path: Path, variant: str) -> None:
    """Every variant family present in the shared folder loads (first 300 pods)."""
    pods = _head(DATA / f"openb_pod_list_{variant}.csv", tmp_path / f"{variant}.csv", 300)
    prob = load_alibaba(DATA / "openb_node_list_gpu_node.csv", pods)
    assert len(prob.workloads) == 300 and len(prob.cluster.nodes) == 1213


@needs_data
def test_all_rows_of_default_match_counts() -> None:
    """The default file reads in full with the documented pod counts."""
    pods = read_pods(DATA / "openb_pod_list_default.csv")
    assert len(pods) == 8152
    assert sum(p.num_gpu == 0 for p in pods) == 1088
    assert sum(p.num_gpu == 1 and p.gpu_milli < 1000 for p in pods) == 3078
    assert len(read_nodes(DATA / "openb_node_list_all_node.csv")) == 1523


def test_import_cli_writes_valid_scenario(tmp_path: Path) -> None:
    """`capplan import alibaba` writes a scenario that loads back as the same workloads."""
    pods = tmp_path / "pods.csv"
    with open(pods, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec"])
        w.writerows([["a", 4000, 8192, 1, 250, ""], ["b", 8000, 16384, 2, 1000, "G2"], ["c", 1000, 1024, 0, 0, ""]])
    out = tmp_path / "s.yaml"
    assert main(["import", "alibaba", str(_nodes(tmp_path)), str(pods), "-o", str(out)]) == 0
    prob = load_scenario(out)
    assert prob.workload("a").gpu_fraction == 0.25 and prob.workload("b").gpus == 2
    assert yaml.safe_load(out.read_text())["cluster"]["levels"] == ["node"]


def test_import_cli_bad_input_exit_2_nothing_written(tmp_path: Path) -> None:
    """Bad input exits 2 and writes no file."""
    pods = tmp_path / "pods.csv"
    pods.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\na,x,1,0,0\n")
    out = tmp_path / "s.yaml"
    assert main(["import", "alibaba", str(_nodes(tmp_path)), str(pods), "-o", str(out)]) == 2
    assert not out.exists()


@pytest.mark.parametrize(("cell", "column"), [("p\x001", "name"), ("p\x07", "name"), ("p\x1b[31m", "name"),
                                               ("p\x85q", "name")])
def test_control_characters_in_names_are_refused_with_the_row(tmp_path: Path, cell: str, column: str) -> None:
    """NUL and other control characters in a pod name: exit 2 naming file:line.column, nothing written."""
    pods = tmp_path / "pods.csv"
    with open(pods, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerows([["name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"], ["ok", 1000, 1024, 0, 0],
                     [cell, 1000, 1024, 0, 0]])
    with pytest.raises(InputError) as exc:
        read_pods(pods)
    assert f"{pods}:3.{column}" in str(exc.value) and "control character" in str(exc.value)
    out = tmp_path / "s.yaml"
    assert main(["import", "alibaba", str(_nodes(tmp_path)), str(pods), "-o", str(out)]) == 2
    assert not out.exists()


def test_control_character_in_a_node_id_is_refused(tmp_path: Path) -> None:
    """The node file's sn too."""
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\nn\x000,32000,131072,2,T4\n", encoding="utf-8")
    with pytest.raises(InputError) as exc:
        read_nodes(nodes)
    assert f"{nodes}:2.sn" in str(exc.value)
