"""Ctrl-C ends a running ``capplan plan`` through the documented path: ``interrupted``, exit 1, nothing written."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_sigint_ends_as_interrupted(tmp_path: Path) -> None:
    """SIGINT during a CP-SAT solve: stderr ends with `interrupted`, exit code 1, the old output kept."""
    out = tmp_path / "plan.json"
    out.write_text("previous\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "capplan", "plan", str(ROOT / "benchmarks" / "instances" / "medium-1.yaml"),
         "--strategy", "cpsat", "--time-limit", "60", "-q", "-o", str(out)],
        stderr=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)),
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # a shell's `&` would ignore it
    time.sleep(4)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    assert err.strip().splitlines()[-1] == "interrupted", err
    assert out.read_text() == "previous\n" and [p.name for p in tmp_path.iterdir()] == ["plan.json"]


def test_new_output_readable_under_umask_022(tmp_path: Path) -> None:
    """`capplan plan -o` writes a 0644 file under umask 022."""
    out = tmp_path / "plan.json"
    subprocess.run([sys.executable, "-m", "capplan", "plan", str(ROOT / "benchmarks" / "instances" / "small-1.yaml"),
                    "--strategy", "greedy", "-q", "-o", str(out)], check=True, capture_output=True,
                   env=dict(os.environ, PYTHONPATH=str(ROOT)), preexec_fn=lambda: os.umask(0o022) and None)
    assert out.stat().st_mode & 0o777 == 0o644


def test_sigint_during_schedule_ends_as_interrupted(tmp_path: Path) -> None:
    """SIGINT during the time model's CP-SAT search (`capplan schedule`): as for `plan`, exit 1, `interrupted`,
    the old output kept (the solver factory leaves SIGINT with Python for every CP-SAT solve)."""
    import json

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from schedule_bench import generate

    scenario = tmp_path / "small.json"
    scenario.write_text(json.dumps(generate("small", 1)))
    out = tmp_path / "schedule.json"
    out.write_text("previous\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "capplan", "schedule", str(scenario), "--strategy", "cpsat", "--time-limit", "60",
         "-q", "-o", str(out)],
        stderr=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)),
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(6)
    assert proc.poll() is None, "the schedule ended before the signal: the test needs a longer solve"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    assert err.strip().splitlines()[-1] == "interrupted", err
    assert out.read_text() == "previous\n" and sorted(p.name for p in tmp_path.iterdir()) == ["schedule.json",
                                                                                             "small.json"]
