"""benchmarks/fgd_reproduce.py: arguments, cache reuse and the comparison table, on a tiny synthetic trace."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import script_module

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "fgd_reproduce.py"


@pytest.fixture(scope="module")
def fr() -> ModuleType:
    """The benchmark script imported as a module."""
    return script_module(SCRIPT, "fgd_reproduce")


def _published(data: Path, rows: list[tuple[str, str, int, float, float]]) -> None:
    out = data / "fgd-expected-results"
    out.mkdir(parents=True, exist_ok=True)
    lines = ["workload,sc_policy,tune,seed,total_gpus,100,130"]
    lines += [f"openb_pod_list_{w},{p},1.3,{s},8,{a},{b}" for w, p, s, a, b in rows]
    (out / "analysis_allo_discrete.csv").write_text("\n".join(lines) + "\n")


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """Four 2-GPU nodes, small GPU shares (steps < 2% of capacity), a published file naming a missing trace."""
    d = tmp_path / "data"
    d.mkdir()
    (d / "openb_node_list_gpu_node.csv").write_text(
        "sn,cpu_milli,memory_mib,gpu,model\n" + "".join(f"n{i},32000,131072,2,T4\n" for i in range(4)))
    (d / "openb_pod_list_default.csv").write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n" +
        "".join(f"p{i:03d},200,1024,1,{[100, 60, 80][i % 3]}\n" for i in range(150)))
    _published(d, [("default", "05-BestFit", s, 50.0, 60.0) for s in (1, 2)] +
               [("gpuspec10", "06-FGD", 1, 90.0, 91.0)])
    return d


def test_runs_cache_and_compare(fr: ModuleType, data: Path, tmp_path: Path) -> None:
    """Runs every (file, policy, seed) once, caches it, tables it, and judges rows against published means."""
    out, md = tmp_path / "out", tmp_path / "table.md"
    argv = ["--data", str(data), "--policies", "bestfit,spread", "--seeds", "1-2", "--jobs", "1", "-o", str(out),
            "--markdown", str(md)]
    code = fr.main(argv)
    names = sorted(p.name for p in out.glob("*.json"))
    assert names == ["default-bestfit-1.json", "default-bestfit-2.json",
                     "default-leastallocated-1.json", "default-leastallocated-2.json"]
    runs = [json.loads((out / n).read_text()) for n in names[:2]]
    mean100 = sum(r["100"] for r in runs) / 2
    mean130 = sum(r["130"] for r in runs) / 2
    assert code == (0 if abs(mean100 - 50) <= 1 and abs(mean130 - 60) <= 1 else 1)
    table = md.read_text().splitlines()
    unpublished = next(line for line in table if "| leastallocated |" in line)
    assert unpublished.endswith("| - |") and "| - | - |" in unpublished

    # Published equal to ours: PASS, and the cached runs are reused, not redone.
    _published(data, [("default", "05-BestFit", r["seed"], r["100"], r["130"] + 0.9) for r in runs])
    marker = out / "default-bestfit-1.json"
    marker.write_text(json.dumps(dict(runs[0], seconds=12345.0)))
    assert fr.main(argv) == 0
    assert json.loads(marker.read_text())["seconds"] == 12345.0
    row = next(line for line in md.read_text().splitlines() if "| bestfit |" in line)
    assert "| +0.00 |" in row and "| -0.90 |" in row and row.endswith("| PASS |")
    assert "PASS: 1 of 1 published (file, policy) rows within 1 pp" in md.read_text()

    # Off by more than a point: FAIL (exit 1) from the cache alone.
    _published(data, [("default", "05-BestFit", r["seed"], r["100"] + 1.5, r["130"]) for r in runs])
    assert fr.main([*argv, "--no-run"]) == 1
    assert "FAIL: 0 of 1" in md.read_text()


def test_no_run_reports_missing_runs(fr: ModuleType, data: Path, tmp_path: Path) -> None:
    """With --no-run nothing is computed; unfinished runs are listed and the check fails."""
    out, md = tmp_path / "out", tmp_path / "t.md"
    out.mkdir()
    (out / "default-fgd-1.json").write_text(json.dumps(
        {"file": "default", "policy": "fgd", "seed": 1, "seconds": 3.0, "100": 80.0, "130": 81.0}))
    assert fr.main(["--data", str(data), "--policies", "fgd", "--seeds", "1,2", "-o", str(out), "--no-run",
                    "--markdown", str(md)]) == 1
    assert not (out / "default-fgd-2.json").exists()
    text = md.read_text()
    assert "| default | fgd | 1 | 80.00 | - | - | 81.00 |" in text
    assert "Not finished (1 runs): fgd on default (seeds 2)." in text


def test_default_files_are_published_and_present(fr: ModuleType, data: Path) -> None:
    """Without --files: the published trace files whose pod CSV exists (gpuspec10 is absent)."""
    pub = fr.published(data / "fgd-expected-results" / "analysis_allo_discrete.csv")
    assert set(pub) == {("default", "bestfit"), ("gpuspec10", "fgd")}
    assert fr.resolve_files("", data, pub) == ["default"]
    assert fr.resolve_policies("binpack, fgd,fgd") == ["mostallocated", "fgd"]


@pytest.mark.parametrize("bad", [["--policies", "nope"], ["--files", "gpuspec10"], ["--seeds", "x-y"],
                                 ["--jobs", "0"], ["--policies", ","]])
def test_bad_arguments_exit_2(fr: ModuleType, data: Path, tmp_path: Path, bad: list[str]) -> None:
    """Unknown policy, absent trace file, bad seeds or jobs: exit 2 and nothing written."""
    out = tmp_path / "o"
    assert fr.main(["--data", str(data), "-o", str(out), *bad]) == 2
    assert not out.exists()


def test_load_run_rejects_foreign_or_broken_cache(fr: ModuleType, tmp_path: Path) -> None:
    """A cache file is reused only when it is complete and records that very run."""
    path = tmp_path / "default-fgd-42.json"
    good = {"file": "default", "policy": "fgd", "seed": 42, "seconds": 12.7, "100": 95.24, "130": 95.45}
    path.write_text(json.dumps(good))
    assert fr.load_run(path, "default", "fgd", 42) == good
    assert fr.load_run(path, "default", "fgd", 43) is None
    assert fr.load_run(tmp_path / "absent.json", "default", "fgd", 42) is None
    for broken in ("{", json.dumps({k: v for k, v in good.items() if k != "130"}),
                   json.dumps(dict(good, seconds="slow")), "[]"):
        path.write_text(broken)
        assert fr.load_run(path, "default", "fgd", 42) is None
