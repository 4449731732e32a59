"""Time fields of the scenario format and the schedule validator (each rule caught on a broken schedule)."""

from __future__ import annotations

from typing import Any

import pytest

from capplan.io.scenario import dump_scenario, problem_from_data
from capplan.model.errors import InputError
from capplan.model.schedule import Schedule, TimedAssignment
from capplan.model.timing import format_seconds, parse_seconds
from capplan.model.validate_schedule import check_schedule
from capplan.placement.schedule import schedule


@pytest.mark.parametrize(("text", "secs"), [(90, 90), ("90s", 90), ("15m", 900), ("2h", 7200), ("3d", 259200),
                                            ("1.5h", 5400), ("45", 45)])
def test_parse_seconds(text: Any, secs: int) -> None:
    assert parse_seconds(text) == secs
    assert parse_seconds(format_seconds(secs)) == secs


@pytest.mark.parametrize("bad", ["2w", "-5", "h", True, -1, "0.5s", [1]])
def test_parse_seconds_rejects(bad: Any) -> None:
    with pytest.raises(ValueError, match=r"90s, 15m, 2h, 3d|whole number|zero or more"):
        parse_seconds(bad)


def data(workloads: list[dict[str, Any]], running: list[dict[str, Any]] | None = None,
         spec: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"cluster": {"levels": ["rack", "node"], "racks": [
        {"name": "r1", "power_kw": 6, "nodes": [{"name_prefix": "n", "count": 2, "gpu": "H100-SXM5-80GB", "gpus": 8,
                                                 "cpu": 64, "memory_gib": 512}]}]},
        "workloads": workloads, "running": running or []}
    if spec is not None:
        out["schedule"] = spec
    return out


def test_old_files_still_load_and_time_fields_round_trip() -> None:
    p = problem_from_data(data([{"name": "a", "gpus": 1}]))
    assert p.schedule is None and p.workloads[0].duration is None and p.workloads[0].release == 0
    p = problem_from_data(data([{"name": "a", "gpus": 1, "duration": "2h", "release": "15m", "deadline": "1d"}],
                               [{"workload": "a", "replica": 0, "node": "n1", "gpus": [0], "ends_in": "90s"}],
                               {"horizon": "7d", "step": "5m"}))
    w = p.workloads[0]
    assert (w.duration, w.release, w.deadline) == (7200, 900, 86400)
    assert p.schedule is not None and (p.schedule.horizon, p.schedule.step) == (604800, 300)
    assert [(e.workload, e.replica, e.ends_in) for e in p.ends_in] == [("a", 0, 90)]
    import yaml

    again = problem_from_data(yaml.safe_load(dump_scenario(p)))
    assert again.workloads == p.workloads and again.ends_in == p.ends_in and again.schedule == p.schedule


@pytest.mark.parametrize(("workload", "path", "words"), [
    ({"duration": "2x"}, "workloads[0].duration", "90s, 15m"),
    ({"duration": 0}, "workloads[0].duration", "greater than 0"),
    ({"deadline": "1h"}, "workloads[0]", "needs a duration"),
    ({"duration": "2h", "release": "1h", "deadline": "2h"}, "workloads[0]", "after the deadline"),
])
def test_bad_time_fields_name_the_field(workload: dict[str, Any], path: str, words: str) -> None:
    with pytest.raises(InputError, match=words) as exc:
        problem_from_data(data([{"name": "a", "gpus": 1, **workload}]))
    assert exc.value.path == path


def test_bad_schedule_section_and_ends_in() -> None:
    with pytest.raises(InputError, match="longer than the horizon") as exc:
        problem_from_data(data([{"name": "a", "gpus": 1}], spec={"horizon": "1h", "step": "2h"}))
    assert exc.value.path == "schedule"
    with pytest.raises(InputError) as exc:
        problem_from_data(data([{"name": "a", "gpus": 1}], spec={"horizon": "soon"}))
    assert exc.value.path == "schedule.horizon"
    with pytest.raises(InputError) as exc:
        problem_from_data(data([{"name": "a", "gpus": 1}],
                               [{"workload": "a", "replica": 0, "node": "n1", "gpus": [0], "ends_in": "later"}]))
    assert exc.value.path == "running[0].ends_in"


# -------------------------------------------------------------------------- validator
def base() -> tuple[Any, Schedule]:
    p = problem_from_data(data([{"name": "a", "gpus": 8, "duration": "2h", "release": "1h"},
                                {"name": "b", "gpus": 8, "duration": "1h", "deadline": "5h"},
                                {"name": "g", "kind": "training", "replicas": 2, "gpus": 4, "duration": "1h"}],
                               spec={"horizon": "6h", "step": "30m"}))
    s = schedule(p, "heuristic")
    assert check_schedule(p, s) == []
    return p, s


def moved(s: Schedule, workload: str, replica: int, **change: Any) -> Schedule:
    out = [a.model_copy(update=change) if (a.workload, a.replica) == (workload, replica) else a
           for a in s.assignments]
    return s.model_copy(update={"assignments": tuple(out)})


def test_validator_catches_each_time_rule() -> None:
    p, s = base()
    a = next(x for x in s.assignments if x.workload == "a")
    b = next(x for x in s.assignments if x.workload == "b")
    assert any("before its release" in v for v in check_schedule(p, moved(s, "a", 0, start_s=0, end_s=7200)))
    assert any("not on the 1800 s grid" in v
               for v in check_schedule(p, moved(s, "a", 0, start_s=a.start_s + 60, end_s=a.end_s + 60)))
    assert any("expected" in v for v in check_schedule(p, moved(s, "a", 0, end_s=a.end_s + 1800)))
    assert any("after its deadline" in v for v in check_schedule(p, moved(s, "b", 0, start_s=16200, end_s=19800)))
    assert any("past the horizon" in v
               for v in check_schedule(p, moved(s, "a", 0, start_s=18000, end_s=18000 + 7200)))
    g1 = next(x for x in s.assignments if x.workload == "g" and x.replica == 1)
    assert any("start at different times" in v
               for v in check_schedule(p, moved(s, "g", 1, start_s=g1.start_s + 1800, end_s=g1.end_s + 1800)))
    # a and b on the same GPUs at overlapping times: exclusivity is checked at the instant b starts
    clash = moved(s, "b", 0, node=a.node, gpus=a.gpus, start_s=a.start_s, end_s=a.start_s + 3600)
    assert any("whole GPU used by 2 replicas" in v for v in check_schedule(p, clash))
    # one after the other on the same GPUs is fine for the rules (only the summary changes)
    after = moved(s, "b", 0, node=a.node, gpus=a.gpus, start_s=a.end_s, end_s=a.end_s + 3600)
    assert not any("whole GPU" in v or "power" in v for v in check_schedule(p, after))
    assert b.end_s <= 5 * 3600


def test_validator_checks_power_at_every_instant() -> None:
    """The rack's 6 kW feed 8 H100 (700 W) at once: two 8-GPU jobs on two nodes may not overlap."""
    p, s = base()
    a = next(x for x in s.assignments if x.workload == "a")
    other = "n2" if a.node == "n1" else "n1"
    clash = moved(s, "b", 0, node=other, gpus=tuple(range(8)), start_s=a.start_s, end_s=a.start_s + 3600)
    assert any("budget 6 kW" in v for v in check_schedule(p, clash))


def test_validator_checks_summary_and_rows() -> None:
    p, s = base()
    assert any("objective" in v for v in check_schedule(p, s.model_copy(update={"objective": (1.0,)})))
    assert any("wait_gpu_h" in v for v in check_schedule(p, s.model_copy(update={"wait_gpu_h": 99.0})))
    assert any("below the objective" in v for v in check_schedule(p, s.model_copy(update={"bound": (0.0,)})))
    rows = tuple(r.model_copy(update={"wait_s": 5}) for r in s.workloads)
    assert any("workloads row" in v for v in check_schedule(p, s.model_copy(update={"workloads": rows})))
    extra = TimedAssignment(workload="zz", replica=0, node="n1", start_s=0, end_s=1)
    assert any("unknown replica" in v
               for v in check_schedule(p, s.model_copy(update={"assignments": (*s.assignments, extra)})))
    assert any("neither scheduled" in v for v in check_schedule(p, s.model_copy(update={"assignments": ()})))
