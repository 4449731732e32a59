"""Bad input on flags and in files that used to get through: refused with the field, exit 2, nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from capplan.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "models" / "examples"


@pytest.mark.parametrize("argv", [["--horizon", "999999999999999999999d"],
                                  ["--horizon", "100000000000d", "--step", "10000000d"],
                                  ["--step", "99999999999999999d"],
                                  ["--time-limit", "1e300"]])
def test_times_on_flags_obey_the_file_limit(tmp_path: Path, argv: list[str],
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """A time above the file limit on numbers (10^15 s) is refused by argparse (exit 2), no traceback."""
    out = tmp_path / "s.json"
    with pytest.raises(SystemExit) as exc:
        main(["schedule", str(EXAMPLES / "schedule-week.yaml"), "-o", str(out), *argv])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {argv[0]}" in err and "1e+15 s" in err and "Traceback" not in err
    assert not out.exists()


def test_horizon_with_too_many_steps_names_the_horizon(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The grid's own rule comes as one line naming --horizon, not pydantic's link."""
    out = tmp_path / "s.json"
    assert main(["schedule", str(EXAMPLES / "schedule-week.yaml"), "--horizon", "1000000000d", "--step", "1s",
                 "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "horizon: the horizon has more than 10,000,000 steps; use a larger step" in err
    assert "pydantic" not in err and not out.exists()


@pytest.mark.parametrize(("what_if", "words"), [("price=-200%", "below -100%"),
                                                 ("demand=-101%", "below -100%"),
                                                 ("lead_time=-50", "must be in 0.."),
                                                 ("price=+99999999999999999999", "above the limit")])
def test_what_if_keeps_the_planning_files_bounds(tmp_path: Path, what_if: str, words: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """A what-if that would make a price, lead time or demand negative (or huge) is refused before any solve,
    as the same value in the planning file is: exit 2, nothing written."""
    out = tmp_path / "out"
    assert main(["reserve", str(EXAMPLES / "reserve-small.yaml"), "-o", str(out), "--what-if", what_if]) == 2
    err = capsys.readouterr().err
    assert "--what-if" in err and words in err, err
    assert not out.exists()


def test_export_option_of_another_format_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--node-labels (mig-parted only) given to kueue-topology is refused, not silently ignored."""
    out = tmp_path / "k.yaml"
    assert main(["export", "kueue-topology", str(EXAMPLES / "mig-inference.yaml"), "-o", str(out),
                 "--node-labels", str(tmp_path / "labels.json")]) == 2
    assert "--node-labels: is read by `export mig-parted` only" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_export_side_output_checked_before_work(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An unwritable --node-labels path fails before anything is written (the main output included)."""
    plan = tmp_path / "p.json"
    assert main(["plan", str(EXAMPLES / "mig-inference.yaml"), "--strategy", "greedy", "-q", "-o", str(plan)]) == 0
    (tmp_path / "afile").write_text("x")
    out = tmp_path / "mp.yaml"
    assert main(["export", "mig-parted", str(EXAMPLES / "mig-inference.yaml"), str(plan), "-o", str(out),
                 "--node-labels", str(tmp_path / "afile" / "labels.json")]) == 2
    assert "--node-labels" in capsys.readouterr().err and not out.exists()


@pytest.fixture(scope="module")
def week_schedule(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    out = tmp_path_factory.mktemp("week") / "s.json"
    assert main(["schedule", str(EXAMPLES / "schedule-week.yaml"), "--strategy", "heuristic", "--time-limit", "10",
                 "-q", "-o", str(out)]) == 0
    data: dict[str, object] = json.loads(out.read_text())
    return data


def test_report_refuses_a_zero_horizon(tmp_path: Path, week_schedule: dict[str, object],
                                       capsys: pytest.CaptureFixture[str]) -> None:
    """A schedule with horizon_s 0 is refused with the field."""
    bad = dict(week_schedule, horizon_s=0)
    (tmp_path / "s.json").write_text(json.dumps(bad))
    out = tmp_path / "r.html"
    assert main(["report", str(EXAMPLES / "schedule-week.yaml"), str(tmp_path / "s.json"), "-o", str(out)]) == 2
    assert "horizon_s" in capsys.readouterr().err and not out.exists()


def test_report_refuses_replicas_overlapping_after_t0(tmp_path: Path, week_schedule: dict[str, object],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """A hand-edited schedule with two replicas on one GPU at some t > 0 is refused with the rule broken."""
    data = json.loads(json.dumps(week_schedule))
    rows = data["assignments"]
    moved = None
    for x in rows:
        others = [y for y in rows if y is not x and y["start_s"] <= x["start_s"] < y["end_s"]
                  and len(y["gpus"]) == len(x["gpus"]) and y["gpus"]]
        if x["start_s"] > 0 and others:
            x["node"], x["gpus"], moved = others[0]["node"], others[0]["gpus"], x
            break
    assert moved is not None
    (tmp_path / "s.json").write_text(json.dumps(data))
    out = tmp_path / "r.html"
    assert main(["report", str(EXAMPLES / "schedule-week.yaml"), str(tmp_path / "s.json"), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"at {moved['start_s']} s: GPU" in err and "used by 2 replicas" in err and not out.exists()
