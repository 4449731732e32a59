"""Issue 18: every hostile input of the generated corpus is refused cleanly and cheaply.

The corpus comes from ``tests/data/hostile/make_corpus.py``. Every case must: exit 2, print
exactly one error line that names the field (or the file), leave the output that was there
before untouched and write nothing else, and stay under 5 s of CPU and 1 GiB of memory. The
cases run in two worker processes (``run_corpus.py``) under an address-space limit of 1.5 GiB;
the worst case also runs alone through ``python -m capplan`` under the same limit.
"""

from __future__ import annotations

import importlib.util
import json
import os
import resource
import signal
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent
ROOT = HERE.parent  # the repository
CORPUS = HERE / "data" / "hostile"
_spec = importlib.util.spec_from_file_location("make_corpus", CORPUS / "make_corpus.py")
assert _spec is not None and _spec.loader is not None
make_corpus = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_corpus)

CASES: list[dict[str, Any]] = make_corpus.cases()
MEMORY_LIMIT = 3 * 2**29  # 1.5 GiB of address space
RSS_BOUND_KIB = 2**20  # 1 GiB peak resident memory
CPU_BOUND_S = 5.0
PREVIOUS = b"previous output\n"


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    resource.setrlimit(resource.RLIMIT_CPU, (120, 120))
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): (p.read_bytes() if p.stat().st_size < 2**20 else b"<big>")
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _output(case: dict[str, Any], folder: Path) -> str:
    """Put a previous output where the case writes; return its path ('' when the case writes none)."""
    out = case["output"]
    if out is None:
        return ""
    target = folder / out
    if out.endswith("/"):
        target.mkdir(parents=True, exist_ok=True)
        (target / "plan.json").write_bytes(PREVIOUS)
    else:
        target.write_bytes(PREVIOUS)
    return str(target)


def _spawn(argv: list[str], cwd: Path) -> tuple[int, str, str, resource.struct_rusage]:
    """Run ``argv`` under the limits; exit code, stdout, stderr and the child's resource usage."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    names = (f".stdout-{threading.get_ident()}", f".stderr-{threading.get_ident()}")
    with open(cwd / names[0], "wb") as out, open(cwd / names[1], "wb") as err:
        proc = subprocess.Popen(argv, cwd=cwd, stdout=out, stderr=err, preexec_fn=_limits, env=env)
        timer = threading.Timer(600, proc.kill)
        timer.start()
        _, status, usage = os.wait4(proc.pid, 0)
        timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
    texts = [(cwd / n).read_text(errors="replace") for n in names]
    for n in names:
        (cwd / n).unlink()
    return proc.returncode, texts[0], texts[1], usage


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Build the corpus once and run every case (two worker processes in parallel)."""
    root = tmp_path_factory.mktemp("hostile")
    make_corpus.write(root)
    outputs = {c["name"]: _output(c, root / c["name"]) for c in CASES}
    (root / "outputs.json").write_text(json.dumps(outputs), encoding="utf-8")
    before = {c["name"]: _snapshot(root / c["name"]) for c in CASES}
    names = [c["name"] for c in CASES]
    groups = [names[0::2], names[1::2]]
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = list(pool.map(lambda g: _spawn([sys.executable, str(CORPUS / "run_corpus.py"), str(root), *g],
                                              root), groups))
    out: dict[str, dict[str, Any]] = {}
    for code, stdout, stderr, _ in runs:
        assert code == 0, stderr[-3000:]
        report = json.loads(stdout.strip().splitlines()[-1])
        for name, r in report["results"].items():
            out[name] = r | {"rss_kib": report["peak_rss_kib"], "before": before[name],
                             "after": _snapshot(root / name)}
    return out


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_hostile_input_refused_cleanly(case: dict[str, Any], results: dict[str, dict[str, Any]]) -> None:
    """Exit 2, one error line naming the field, nothing written, bounded CPU time and memory."""
    r = results[case["name"]]
    errors = [line for line in r["stderr"].splitlines() if "error:" in line]
    assert r["code"] == 2, r["stderr"]
    assert "Traceback" not in r["stderr"]
    assert len(errors) == 1, r["stderr"]
    assert case["expect"] in errors[0], errors[0]
    assert r["after"] == r["before"], "an output was written or changed"
    assert r["cpu"] < CPU_BOUND_S, f"{r['cpu']:.1f} s of CPU"
    assert r["rss_kib"] < RSS_BOUND_KIB, f"{r['rss_kib'] / 2**20:.2f} GiB peak"


def test_alias_bomb_through_the_command(tmp_path: Path) -> None:
    """The alias bomb, alone through ``python -m capplan`` under the memory limit: exit 2 within bounds."""
    case = next(c for c in make_corpus.cases() if c["name"] == "alias-bomb-name")
    folder = tmp_path / case["name"]
    folder.mkdir()
    for name, content in case["files"].items():
        (folder / name).write_text(content, encoding="utf-8")
    out = _output(case, folder)
    argv = [out if a == "{out}" else a for a in case["argv"]]
    code, _, stderr, usage = _spawn([sys.executable, "-m", "capplan", *argv], folder)
    assert code == 2 and stderr.count("error:") == 1 and case["expect"] in stderr, stderr
    assert (folder / "plan.json").read_bytes() == PREVIOUS
    assert usage.ru_utime + usage.ru_stime < CPU_BOUND_S and usage.ru_maxrss < RSS_BOUND_KIB


def test_corpus_script_writes_its_cases(tmp_path: Path) -> None:
    """The generator script writes one folder per case and a cases.json listing them."""
    subprocess.run([sys.executable, str(CORPUS / "make_corpus.py"), str(tmp_path)], check=True, capture_output=True)
    listed = {c["name"] for c in json.loads((tmp_path / "cases.json").read_text())}
    assert listed == {c["name"] for c in CASES} and all((tmp_path / n).is_dir() for n in listed)
