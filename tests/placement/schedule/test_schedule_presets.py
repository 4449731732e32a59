"""Preset GPU modes in the CP-SAT time model: GPUs fixed to whole, shared or MIG use, to a MIG layout, and
``mig_strategy: single`` nodes. Hand-worked timelines, the validator at every instant, random scenarios.

(CP-SAT = exhaustive search with presets: ``test_schedule_mig.py``.)
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capplan.io.scenario import problem_from_data
from capplan.model.plan import MigSlot
from capplan.model.problem import Problem
from capplan.model.schedule import Schedule
from capplan.model.validate_schedule import check_schedule
from capplan.placement.schedule.exact import schedule_cpsat, unsupported
from tests.placement.schedule.test_schedule_mig import cpsat, placed
from tests.placement.schedule.test_schedule_properties import running_problem, timed_scenario

HOUR = 3600
A100 = "A100-SXM4-80GB"


def problem(nodes: list[dict[str, Any]], workloads: list[dict[str, Any]], horizon: str = "2h") -> Problem:
    return problem_from_data({"schedule": {"horizon": horizon, "step": "1h"},
                              "cluster": {"levels": ["node"], "nodes": nodes}, "workloads": workloads})


def node(gpus: int, modes: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"name": "n", "gpu": A100, "gpus": gpus, "cpu": 64, "memory_gib": 512, "gpu_modes": modes, **extra}


def swap(s: Schedule, name: str, replica: int, **change: Any) -> Schedule:
    """``s`` with one assignment changed (to break a rule on purpose)."""
    out = [a.model_copy(update=change) if (a.workload, a.replica) == (name, replica) else a for a in s.assignments]
    return s.model_copy(update={"assignments": out})


def test_a_share_waits_for_the_one_shared_gpu() -> None:
    """GPU 0 is preset to shared use, GPU 1 to whole use. Three 0.5 shares of an hour: two fill GPU 0 at 0,
    the third waits until 1h (GPU 1 takes no shares). The two one-GPU jobs take turns on GPU 1 (GPU 0 takes
    no whole use)."""
    p = problem([node(2, [{"gpus": [0], "mode": "shared"}, {"gpus": [1], "mode": "whole"}])],
                [{"name": "s", "kind": "shared", "gpu_fraction": 0.5, "replicas": 3, "duration": "1h"},
                 {"name": "w", "gpus": 1, "replicas": 2, "duration": "1h"}])
    s = cpsat(p)
    assert s.status == "optimal"
    assert sorted((a.start_s, a.gpus) for a in s.assignments if a.workload == "s") == [(0, (0,)), (0, (0,)),
                                                                                       (HOUR, (0,))]
    assert sorted((a.start_s, a.gpus) for a in s.assignments if a.workload == "w") == [(0, (1,)), (HOUR, (1,))]
    # the validator checks the presets at every instant: a whole-GPU job on the shared GPU at 1h is caught
    bad = check_schedule(p, swap(s, "w", next(a.replica for a in s.assignments if a.workload == "w" and a.start_s),
                                 gpus=(0,)))
    assert any(v.startswith("at 3600 s: GPU 0 of n") for v in bad)


def test_a_fixed_mig_layout_forbids_a_start() -> None:
    """GPU 0 is fixed to the layout 3g.40gb@4 + 1g.10gb@0,1,2. A 3g.40gb may start at slice 0 or 4 on a free
    A100, but here only at 4: the second of two waits until 1h. A 4g.40gb (slice 0 only, not in the layout)
    never runs; the fourth 1g.10gb waits for a slot of the layout (0, 1 or 2) although slice 3 is free."""
    lay = [{"profile": "3g.40gb", "start": 4}] + [{"profile": "1g.10gb", "start": i} for i in range(3)]
    p = problem([node(1, [{"gpus": [0], "mode": "mig", "layout": lay}])],
                [{"name": "three", "mig": "3g.40gb", "replicas": 2, "duration": "1h"},
                 {"name": "four", "mig": "4g.40gb", "duration": "1h", "priority": 5},
                 {"name": "one", "mig": "1g.10gb", "replicas": 4, "duration": "1h"}])
    s = cpsat(p)
    assert s.status == "optimal"
    assert placed(s, "three") == [(0, 4), (HOUR, 4)]
    assert placed(s, "four") == []
    assert [u.workload for u in s.unscheduled] == ["four"]
    ones = placed(s, "one")
    assert [t for t, _ in ones] == [0, 0, 0, HOUR] and {f for _, f in ones} <= {0, 1, 2}
    # the validator: the same slice at start 0 (allowed on a free A100) breaks the layout at that instant
    late = next(a.replica for a in s.assignments if a.workload == "three" and a.start_s)
    bad = check_schedule(p, swap(s, "three", late, mig=MigSlot(profile="3g.40gb", start=0)))
    assert any("at 3600 s" in v and "preset MIG layout" in v for v in bad)


def test_preset_whole_gpus_on_a_node_no_slice_may_use() -> None:
    """A node without MIG or share work keeps aggregated GPU counts: of its four GPUs only the two preset to (or
    left free for) whole use count. Three two-hour jobs of one GPU each: two at 0, one at 2h; the GPUs they
    get are the whole-use ones."""
    p = problem([node(4, [{"gpus": [0], "mode": "mig"}, {"gpus": [1], "mode": "shared"},
                          {"gpus": [2], "mode": "whole"}])],
                [{"name": "w", "gpus": 1, "replicas": 3, "duration": "2h"}], horizon="4h")
    s = cpsat(p)
    assert s.status == "optimal"
    assert sorted((a.start_s, a.gpus[0]) for a in s.assignments) in ([(0, 2), (0, 3), (2 * HOUR, 2)],
                                                                      [(0, 2), (0, 3), (2 * HOUR, 3)])


def test_a_single_strategy_node_serves_only_its_profile() -> None:
    """Node ``s`` runs ``mig_strategy: single`` with seven 1g.10gb on its GPU; node ``m`` is an ordinary A100.
    Nine single-strategy 1g.10gb replicas fit only on ``s``: seven at 0, two at 1h. The mixed-strategy slices
    and the whole-GPU job may use only ``m``."""
    lay = [{"profile": "1g.10gb", "start": i} for i in range(7)]
    nodes = [dict(node(1, [{"gpus": "all", "mode": "mig", "layout": lay}], mig_strategy="single"), name="s"),
             {"name": "m", "gpu": A100, "gpus": 1, "cpu": 64, "memory_gib": 512}]
    p = problem(nodes, [{"name": "one", "mig": "1g.10gb", "mig_strategy": "single", "replicas": 9, "duration": "1h"},
                        {"name": "mixed", "mig": "1g.10gb", "replicas": 2, "duration": "1h", "priority": 1},
                        {"name": "w", "gpus": 1, "duration": "1h"}])
    s = cpsat(p)
    assert s.status == "optimal"
    ones = [(a.start_s, a.node) for a in s.assignments if a.workload == "one"]
    assert sorted(ones) == [(0, "s")] * 7 + [(HOUR, "s")] * 2
    assert {a.node for a in s.assignments if a.workload != "one"} == {"m"}
    # slices first would cost 2/7 GPU x 1h of wait, the whole GPU first 1 GPU x 1h: the GPU job goes first
    assert [(a.start_s, a.node) for a in s.assignments if a.workload == "w"] == [(0, "m")]
    assert sorted(a.start_s for a in s.assignments if a.workload == "mixed") == [HOUR, HOUR]


# ------------------------------------------------------------------ random scenarios with random presets
#: Valid MIG layouts per model of the scenario generator, and the one profile of a single-strategy node.
LAYOUTS: dict[str, list[list[tuple[str, int]]]] = {
    "H100-SXM5-80GB": [[("3g.40gb", 4), ("1g.10gb", 0), ("1g.10gb", 1)], [("2g.20gb", 0), ("2g.20gb", 2)]],
    "A100-SXM4-80GB": [[("3g.40gb", 0), ("3g.40gb", 4)], [("1g.10gb", 2), ("3g.40gb", 4)]],
    "A30-24GB": [[("2g.12gb", 0), ("1g.6gb", 2)], [("1g.6gb", 3)]],
    "MI300X-192GB": [[("QPX", 0), ("QPX", 4)], [("DPX", 4)]],
}
SINGLE = {"H100-SXM5-80GB": "1g.10gb", "A100-SXM4-80GB": "1g.10gb", "A30-24GB": "1g.6gb"}
SLICES = {"H100-SXM5-80GB": 7, "A100-SXM4-80GB": 7, "A30-24GB": 4}


@st.composite
def preset_scenario(draw: st.DrawFn) -> dict[str, Any]:
    """A timed scenario whose GPUs get random presets: whole, shared or MIG use, a MIG layout, or a whole node
    on ``mig_strategy: single`` (with some MIG workloads asking for that strategy)."""
    data = draw(timed_scenario())
    singles: set[str] = set()
    for rack in data["cluster"]["racks"]:
        for n in rack["nodes"]:
            model = n.get("gpu")
            if not model:
                continue
            if model in SINGLE and draw(st.integers(0, 4)) == 0:
                lay = [{"profile": SINGLE[model], "start": i} for i in range(SLICES[model])]
                n.update(mig_strategy="single", gpu_modes=[{"gpus": "all", "mode": "mig", "layout": lay}])
                singles.add(SINGLE[model])
                continue
            modes = []
            for g in range(n["gpus"]):
                choice = draw(st.sampled_from([None, None, "whole", "shared", "mig", "layout"]))
                if choice == "layout" and model in LAYOUTS:
                    lay2 = draw(st.sampled_from(LAYOUTS[model]))
                    modes.append({"gpus": [g], "mode": "mig", "layout": [{"profile": a, "start": b} for a, b in lay2]})
                elif choice in ("whole", "shared") or (choice == "mig" and model != "T4-16GB"):
                    modes.append({"gpus": [g], "mode": choice})
            n["gpu_modes"] = modes
    for w in data["workloads"]:
        if w.get("mig") in singles and draw(st.booleans()):
            w["mig_strategy"] = "single"
    return data


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(preset_scenario(), st.lists(st.booleans(), min_size=8, max_size=8),
       st.lists(st.sampled_from([0, 1800, 5000, 4 * HOUR]), min_size=8, max_size=8), st.booleans())
def test_cpsat_schedules_with_random_presets_pass_the_validator(data: dict[str, Any], pick: list[bool],
                                                                 ends: list[int], lns: bool) -> None:
    p = running_problem(data, pick, ends)
    if p is None:
        return
    why = unsupported(p)
    assert why is None or "worth" in why  # presets are never declined
    if why is not None:
        return
    spec = p.schedule
    assert spec is not None
    s = schedule_cpsat(p, spec.horizon, spec.step, 1.0, lns=lns)
    assert check_schedule(p, s) == []
