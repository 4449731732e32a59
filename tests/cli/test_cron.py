"""Issue 28: what a nightly job and a log reader meet (pipes, grouped reasons, -q, summary JSON, log lines)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from capplan.cli.main import main
from capplan.model.plan import Plan
from capplan.placement.core.summary import causes_text, group_unplaced
from tests.conftest import EXAMPLES

ROOT = Path(__file__).resolve().parents[2]
MIXED = str(EXAMPLES / "mixed-fleet.yaml")
ENV = dict(os.environ, PYTHONPATH=str(ROOT))


def _capplan(*argv: str, close: str) -> tuple[int, bytes]:
    """Run capplan with its stdout or stderr reader gone before the first write; exit code and the other stream."""
    proc = subprocess.Popen([sys.executable, "-m", "capplan", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=ENV)
    gone, other = (proc.stdout, proc.stderr) if close == "stdout" else (proc.stderr, proc.stdout)
    assert gone is not None and other is not None
    gone.close()
    text = other.read()
    return proc.wait(timeout=120), text


def test_stdout_reader_gone_ends_quietly() -> None:
    """`capplan schema | head -1`: exit 0 or 141, no traceback, no "internal error"."""
    code, err = _capplan("schema", close="stdout")
    assert code in (0, 141) and err == b"", err
    code, err = _capplan("plan", MIXED, "--strategy", "greedy", close="stdout")
    assert code in (0, 141) and b"internal error" not in err and b"Traceback" not in err, err


def test_stderr_reader_gone_still_writes_the_plan(tmp_path: Path) -> None:
    """A log reader that closes early costs the log, not the plan: exit 0 and a valid plan file."""
    out = tmp_path / "plan.json"
    code, stdout = _capplan("-v", "plan", MIXED, "--strategy", "greedy", "-o", str(out), close="stderr")
    assert code == 0 and stdout == b""
    assert Plan.from_json(out.read_text()).status == "optimal"
    assert main(["validate", MIXED, str(out)]) == 0


def test_unplaced_grouped_by_cause() -> None:
    """Hand-worked: numbers aside, one cause per family and diagnosis; largest first; top N then a count."""
    rows = [(f"w{i}", 1, f"host CPU: needs {i} cores; not enough free CPU on {500 + i} of 900 eligible nodes; "
                         f"held by x (priority 0): 3 cores") for i in range(5)]
    rows += [("g", 3, "gang: needs 3 x 8 GPUs at once; the cluster has 2 free"), ("m", 1, "GPU model: none")]
    causes = group_unplaced(rows)
    assert [(c.family, c.replicas, c.workloads) for c in causes] == [("host CPU", 5, 5), ("gang", 3, 1),
                                                                    ("GPU model", 1, 1)]
    assert causes[0].reason == "not enough free CPU on 500 of 900 eligible nodes"
    lines = causes_text(causes, top=2, more_hint="PLAN.json")
    assert lines[0] == ("5 replicas (5 workloads): host CPU: not enough free CPU on 500 of 900 eligible nodes; "
                        "e.g. w0, w1, w2 and 2 more")
    assert lines[-1] == "... 1 more cause (1 replicas), see PLAN.json" and len(lines) == 3


def _crowded(tmp_path: Path, n: int = 40) -> Path:
    """mixed-fleet with ``n`` copies of a 16-GPU gang that does not fit: many unplaced, one cause."""
    data = yaml.safe_load(Path(MIXED).read_text())
    data["workloads"] += [{"name": f"big-{i}", "gpus": 8, "replicas": 16, "priority": 1} for i in range(n)]
    f = tmp_path / "crowded.yaml"
    f.write_text(yaml.safe_dump(data))
    return f


def test_summary_groups_and_quiet_keeps_the_headline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """40 unplaced workloads with one cause: a few lines, not 40; -q keeps exactly the one-line summary."""
    f, out = _crowded(tmp_path), tmp_path / "plan.json"
    assert main(["plan", str(f), "-o", str(out), "--strategy", "greedy"]) == 0
    err = capsys.readouterr().err.splitlines()
    unplaced = [line for line in err if "unplaced" in line or "e.g." in line]
    assert len(unplaced) <= 4 and any("40 workloads" in line for line in err), err
    assert main(["plan", str(f), "-o", str(out), "--strategy", "greedy", "-q"]) == 0
    quiet = capsys.readouterr().err.splitlines()
    assert len(quiet) == 1 and quiet[0].split(";")[1] == err[0].split(";")[1] and "unplaced" in quiet[0], quiet


def test_summary_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--summary-json: status, per-priority gaps, allocation, unplaced by reason, wall time; written atomically."""
    f, out, summary = _crowded(tmp_path, 3), tmp_path / "plan.json", tmp_path / "run" / "summary.json"
    assert main(["plan", str(f), "-o", str(out), "--strategy", "greedy", "-q", "--summary-json", str(summary)]) == 0
    s: dict[str, Any] = json.loads(summary.read_text())
    plan = Plan.from_json(out.read_text())
    assert s["status"] == plan.status and s["exit_code"] == 0 and s["command"] == "plan"
    assert s["priorities"] == list(plan.priorities) and len(s["gaps"]) == len(plan.priorities)
    for gap, obj, bnd in zip(s["gaps"], plan.objective, plan.bound, strict=True):
        assert gap == pytest.approx((bnd - obj) / bnd if bnd else 0.0, abs=1e-6)
    assert s["allocation"]["gpus_total"] == plan.metrics["gpus_total"]
    assert s["unplaced"]["replicas"] == sum(len(u.replicas) for u in plan.unplaced) > 0
    assert sum(c["replicas"] for c in s["unplaced"]["by_reason"]) == s["unplaced"]["replicas"]
    assert 0 < s["wall_seconds"] < 60 and set(s["unpriced"]) == {"gpus", "models"}
    assert s["gpus_reconfigured"] == plan.metrics["gpus_reconfigured"] == 0 and s["nodes_to_drain"] == []
    assert s["running_breaks"] == []
    assert [p.name for p in summary.parent.iterdir()] == ["summary.json"]


def test_log_lines_have_time_level_and_one_clock(tmp_path: Path) -> None:
    """-v log lines carry an ISO time, the level and the command's clock, never decreasing; JSON lines too."""
    out = tmp_path / "plan.json"
    r = subprocess.run([sys.executable, "-m", "capplan", "-v", "plan", MIXED, "-o", str(out), "-q"],
                       capture_output=True, text=True, env=ENV, check=True)
    logs = [line for line in r.stderr.splitlines() if " INFO " in line]
    pattern = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z INFO [\w.]+ \+(\d+\.\d\d)s: ")
    clock = [float(m.group(1)) for line in logs if (m := pattern.match(line))]
    assert len(clock) == len(logs) >= 3 and clock == sorted(clock), r.stderr
    assert not re.search(r"\bat \d+\.\d+ s\b", r.stderr), r.stderr  # no second clock inside the messages
    r = subprocess.run([sys.executable, "-m", "capplan", "plan", MIXED, "-o", str(out), "--log-format", "json"],
                       capture_output=True, text=True, env=ENV, check=True)
    records = [json.loads(line) for line in r.stderr.splitlines()]
    assert records and all({"time", "level", "message", "elapsed_s"} <= set(x) for x in records)
    assert records[0]["message"].startswith("capplan ") and records[0]["level"] == "info"


def test_bad_input_in_json_logs(tmp_path: Path) -> None:
    """Errors are records of level error with --log-format json (exit 2 as ever)."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("cluster: [\n")
    r = subprocess.run([sys.executable, "-m", "capplan", "--log-format", "json", "plan", str(bad)],
                       capture_output=True, text=True, env=ENV)
    assert r.returncode == 2
    (record,) = [json.loads(line) for line in r.stderr.splitlines()]
    assert record["level"] == "error" and "bad.yaml" in record["message"]


def test_plan_warns_once_about_time_fields(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A scenario with release/duration/deadline: one warning pointing at `capplan schedule`."""
    r = subprocess.run([sys.executable, "-m", "capplan", "plan", str(EXAMPLES / "schedule-week.yaml"), "-q",
                        "-o", str(tmp_path / "p.json"), "--strategy", "greedy"],
                       capture_output=True, text=True, env=ENV)
    assert r.returncode in (0, 3), r.stderr
    warnings = [line for line in r.stderr.splitlines() if "WARNING" in line]
    assert len(warnings) == 1 and "capplan schedule" in warnings[0], r.stderr
    r = subprocess.run([sys.executable, "-m", "capplan", "plan", MIXED, "-q", "-o", str(tmp_path / "p.json")],
                       capture_output=True, text=True, env=ENV, check=True)
    assert "WARNING" not in r.stderr


NIGHTLY = ROOT / "contrib" / "nightly.sh"


def _cron_lines(text: str) -> list[str]:
    return [line.strip().lstrip("#").strip() for line in text.splitlines()
            if re.match(r"^\s*#?\s*\d+ \d+ \* \* \* ", line)]


def test_nightly_wrapper_is_shipped_and_the_docs_agree() -> None:
    """contrib/nightly.sh is the script docs/cron.md shows; README, the doc and the script give one crontab line."""
    script = NIGHTLY.read_text()
    doc = (ROOT / "docs" / "cron.md").read_text()
    block = re.search(r"```sh\n(#!/bin/sh\n.*?)```", doc, re.S)
    assert block is not None and block.group(1) == script
    lines = {*_cron_lines((ROOT / "README.md").read_text()), *_cron_lines(doc), *_cron_lines(script)}
    assert len(lines) == 1 and "flock -n" in next(iter(lines)), lines
    subprocess.run(["sh", "-n", str(NIGHTLY)], check=True)


def test_nightly_wrapper_end_to_end(tmp_path: Path) -> None:
    """The wrapper with a cluster API answering from the stored kubectl exports: imports, plans the live
    cluster and an overlay on it, logs the sweep's closing line and exits 0."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    data = ROOT / "tests" / "data" / "k8s"
    kubectl = bin_dir / "kubectl"  # answers `kubectl get RESOURCE -o json` from the stored exports
    kubectl.write_text(f"#!/bin/sh\ncase \"$2\" in\n  nodes) cat {data / 'nodes.json'} ;;\n"
                       f"  pods,priorityclasses) cat {data / 'pods.json'} ;;\n  *) exit 1 ;;\nesac\n")
    (bin_dir / "capplan").write_text(f"#!/bin/sh\nexec {sys.executable} -m capplan \"$@\"\n")
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    whatif = tmp_path / "what-if"
    whatif.mkdir()
    (whatif / "half.yaml").write_text(f"base: {tmp_path / 'state' / 'live.yaml'}\nworkloads: []\n")
    env = dict(ENV, PATH=f"{bin_dir}:{os.environ['PATH']}", CAPPLAN_STATE=str(tmp_path / "state"),
               CAPPLAN_LOGS=str(tmp_path / "logs"), CAPPLAN_WHATIF=str(whatif))
    r = subprocess.run(["sh", str(NIGHTLY)], env=env, capture_output=True, text=True, timeout=600)
    (log,) = (tmp_path / "logs").iterdir()
    text = log.read_text()
    assert r.returncode == 0, text
    assert "2 scenario(s): 2 planned, 0 unchanged, 0 failed" in text and "capplan sweep exit code 0" in text
    plans = next((tmp_path / "state").glob("*/plans"))
    assert {p.name for p in plans.glob("*.plan.json")} == {"live.plan.json", "half.plan.json"}


def test_every_help_gives_choices_and_defaults() -> None:
    """Every option of every command has help; a default is stated; every choice is named; no `...` lists."""
    import argparse

    from capplan.cli.main import build_parser

    problems: list[str] = []

    def walk(parser: argparse.ArgumentParser, name: str) -> None:
        for a in parser._actions:
            if isinstance(a, argparse._SubParsersAction):
                for sub, sp in a.choices.items():
                    walk(sp, f"{name} {sub}")
                continue
            if isinstance(a, argparse._HelpAction | argparse._VersionAction):
                continue
            text = a.help or ""
            where = f"{name} {'/'.join(a.option_strings) or a.dest}"
            if not text or text == argparse.SUPPRESS:
                problems.append(f"{where}: no help")
            if a.option_strings and a.default not in (None, False, [], argparse.SUPPRESS) and "default" not in text:
                problems.append(f"{where}: default {a.default!r} not stated")
            problems.extend(f"{where}: choice {c!r} not named" for c in a.choices or () if str(c) not in text)
            if "..." in text:
                problems.append(f"{where}: '...' in the help")

    walk(build_parser(), "capplan")
    assert problems == [], "\n".join(problems)


def test_schedule_quiet_keeps_the_headline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`schedule -q` keeps the one-line summary, as `plan -q` does."""
    out = tmp_path / "week.json"
    argv = ["schedule", str(EXAMPLES / "schedule-week.yaml"), "-o", str(out), "--strategy", "heuristic"]
    assert main([*argv, "-q"]) in (0, 3)
    quiet = capsys.readouterr().err.splitlines()
    assert len(quiet) == 1 and quiet[0].startswith("capplan schedule (heuristic)"), quiet
    assert main(argv) in (0, 3)
    assert len(capsys.readouterr().err.splitlines()) > 1
