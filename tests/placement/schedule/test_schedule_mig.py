"""MIG slices and GPU shares in the CP-SAT time model: hand-worked timelines, exhaustive search on tiny
instances, the validator on random ones, determinism."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capplan.io.scenario import problem_from_data
from capplan.model.problem import Problem
from capplan.model.schedule import Schedule
from capplan.model.units import UNITS_PER_GPU
from capplan.model.validate_schedule import check_schedule
from capplan.placement.schedule import schedule
from capplan.placement.schedule.exact import schedule_cpsat, unsupported
from tests.placement.schedule.test_schedule_properties import running_problem, timed_scenario

HOUR = 3600
A100 = "A100-SXM4-80GB"


def one_gpu(workloads: list[dict[str, Any]], horizon: str = "4h", running: list[dict[str, Any]] | None = None,
            gpus: int = 1, model: str = A100) -> Problem:
    node = {"name": "n", "gpu": model, "gpus": gpus, "cpu": 64, "memory_gib": 512}
    return problem_from_data({"schedule": {"horizon": horizon, "step": "1h"},
                              "cluster": {"levels": ["node"], "nodes": [node]},
                              "workloads": workloads, "running": running or []})


def cpsat(p: Problem) -> Schedule:
    assert unsupported(p) is None
    s = schedule(p, "cpsat", time_limit=10)
    assert s.strategy.startswith("cpsat") and "cpsat_declined" not in s.metrics
    assert check_schedule(p, s) == []
    return s


def placed(s: Schedule, name: str) -> list[tuple[int, int | None]]:
    """(start, MIG slice start) of each replica of ``name``, sorted."""
    return sorted((a.start_s, a.mig.start if a.mig else None) for a in s.assignments if a.workload == name)


def test_two_3g_slices_then_a_4g_that_must_wait() -> None:
    """A gang of two 3g.40gb (slices 0-3 and 4-7, the only starts of 3g) must end by 2h, so it holds the whole
    GPU from 0 to 2h; the 4g.40gb (start 0 only, slices 0-3) starts at 2h, when they end."""
    p = one_gpu([{"name": "pair", "kind": "training", "mig": "3g.40gb", "replicas": 2, "duration": "2h",
                  "deadline": "2h"},
                 {"name": "four", "mig": "4g.40gb", "duration": "1h"}])
    s = cpsat(p)
    assert s.status == "optimal"
    assert placed(s, "pair") == [(0, 0), (0, 4)]
    assert placed(s, "four") == [(2 * HOUR, 0)]


def test_a_slice_start_forces_the_order() -> None:
    """A running 1g.10gb sits on slice 1 until 1h. The 4g.40gb may start only at slice 0 (slices 0-3), so it
    waits until 1h; the 3g.40gb takes slices 4-7 at once (its start 0 would overlap slice 1 too)."""
    running = [{"workload": "old", "replica": 0, "node": "n", "gpus": [0], "mig": {"profile": "1g.10gb", "start": 1},
                "ends_in": "1h"}]
    p = one_gpu([{"name": "old", "mig": "1g.10gb"},
                 {"name": "four", "mig": "4g.40gb", "duration": "1h"},
                 {"name": "three", "mig": "3g.40gb", "duration": "1h"}], running=running)
    s = cpsat(p)
    assert s.status == "optimal"
    assert placed(s, "four") == [(HOUR, 0)]
    assert placed(s, "three") == [(0, 4)]


def test_shares_add_up_to_one_gpu_and_its_memory() -> None:
    """Two 0.25 shares that need 50 GiB each cannot share an 80 GB GPU: one after the other. A 0.5 share
    without a memory demand runs beside the first at once (0.25 + 0.5 <= 1)."""
    p = one_gpu([{"name": "big", "kind": "shared", "gpu_fraction": 0.25, "gpu_memory_gib": 50, "replicas": 2,
                  "duration": "1h"},
                 {"name": "half", "kind": "shared", "gpu_fraction": 0.5, "duration": "1h"}], horizon="2h")
    s = cpsat(p)
    assert s.status == "optimal"
    assert placed(s, "big") == [(0, None), (HOUR, None)]
    assert placed(s, "half") == [(0, None)]


def test_mig_share_and_whole_use_of_one_gpu_take_turns() -> None:
    """One GPU: a 3g slice, a 0.5 share and a whole-GPU job of one hour each, all released at 0, horizon 3h.
    No two kinds may use the GPU at once, so they run one after another; the whole GPU (most demand) goes
    first to keep the demand-weighted wait smallest: 1 x 0 + 0.5 x 1h + 3/7 x 2h or 3/7 x 1h + 0.5 x 2h."""
    p = one_gpu([{"name": "whole", "gpus": 1, "duration": "1h"},
                 {"name": "slice", "mig": "3g.40gb", "duration": "1h"},
                 {"name": "share", "kind": "shared", "gpu_fraction": 0.5, "duration": "1h"}], horizon="3h")
    s = cpsat(p)
    assert s.status == "optimal"
    assert [a for a, _ in placed(s, "whole")] == [0]
    assert [a for a, _ in placed(s, "share")] == [HOUR]
    assert [a for a, _ in placed(s, "slice")] == [2 * HOUR]


def test_tenant_isolated_shares_wait_for_the_other_tenant() -> None:
    """Tenant a's share asks for tenant isolation: tenant b's share may not use its GPU at the same time, so
    one runs after the other (either order: same work, same wait)."""
    p = one_gpu([{"name": "a", "kind": "shared", "gpu_fraction": 0.25, "duration": "1h", "tenant": "a",
                  "isolation": "tenant", "priority": 5},
                 {"name": "b", "kind": "shared", "gpu_fraction": 0.25, "duration": "1h", "tenant": "b"}], horizon="2h")
    s = cpsat(p)
    assert s.status == "optimal"
    assert sorted(placed(s, "a") + placed(s, "b")) == [(0, None), (HOUR, None)]


def test_one_partition_profile_per_gpu_at_a_time_on_a_homogeneous_model() -> None:
    """An MI300X GPU runs one partition mode at a time: a DPX (slices 0-3) and a QPX (slices 4-5) would fit side by
    side in slices but not in modes, so they take turns."""
    p = one_gpu([{"name": "dpx", "mig": "DPX", "duration": "1h"}, {"name": "qpx", "mig": "QPX", "duration": "1h"}],
                horizon="2h", model="MI300X-192GB")
    s = cpsat(p)
    assert s.status == "optimal"
    assert sorted(a for a, _ in placed(s, "dpx") + placed(s, "qpx")) == [0, HOUR]


def test_at_most_one_media_extension_slice_per_gpu() -> None:
    """``1g.10gb+me`` may appear once per GPU: two of them run one after another though slices are free."""
    p = one_gpu([{"name": "me", "mig": "1g.10gb+me", "replicas": 2, "duration": "1h"}], horizon="2h")
    s = cpsat(p)
    assert s.status == "optimal"
    assert [a for a, _ in placed(s, "me")] == [0, HOUR]


def test_slices_sharing_a_gpu_draw_its_tdp_once_under_a_budget() -> None:
    """A rack of 1 kW feeds two busy A100s (400 W each). Five 3g.40gb slices of an hour: two GPUs with two slices
    each run at 0 (800 W, each GPU drawing its TDP once), the fifth would switch a third GPU on, so it waits until
    1h. The model's power rule is exact here (``model_exact``), so the schedule is proven optimal."""
    nodes = [{"name": "n", "gpu": A100, "gpus": 4, "cpu": 64, "memory_gib": 512}]
    p = problem_from_data({"schedule": {"horizon": "2h", "step": "1h"},
                           "cluster": {"levels": ["rack", "node"], "racks": [{"name": "r", "power_kw": 1,
                                                                              "nodes": nodes}]},
                           "workloads": [{"name": "s", "mig": "3g.40gb", "replicas": 5, "duration": "1h"}]})
    s = cpsat(p)
    assert s.metrics["model_exact"] is True and s.status == "optimal"
    assert [a for a, _ in placed(s, "s")] == [0, 0, 0, 0, HOUR]
    assert len({a.gpus for a in s.assignments if a.start_s == 0}) == 2


def test_overlapping_slices_on_one_gpu_count_its_union_once() -> None:
    """A rack of 400 W feeds one busy A100 of two. ``a`` and ``b`` (3g.40gb, 2h; ``b`` released at 1h) and ``w``
    (a whole GPU, 1h), horizon 4h. Charging each slice a TDP, ``a`` and ``b`` could not overlap and all three would
    not fit. The GPU draws 400 W while either slice runs, so: ``w`` at 0, then ``a`` and ``b`` together on one GPU
    from 1h (wait 3/7 GPU x 1h; ``a`` from 0 and ``b`` from 1h would push ``w`` to 3h, a wait of 3 GPU-h)."""
    nodes = [{"name": "n", "gpu": A100, "gpus": 2, "cpu": 64, "memory_gib": 512}]
    p = problem_from_data({"schedule": {"horizon": "4h", "step": "1h"},
                           "cluster": {"levels": ["rack", "node"], "racks": [{"name": "r", "power_kw": 0.4,
                                                                              "nodes": nodes}]},
                           "workloads": [{"name": "a", "mig": "3g.40gb", "duration": "2h"},
                                         {"name": "b", "mig": "3g.40gb", "duration": "2h", "release": "1h"},
                                         {"name": "w", "gpus": 1, "duration": "1h"}]})
    s = cpsat(p)
    assert s.metrics["model_exact"] is True and s.status == "optimal"
    start = {a.workload: (a.start_s, a.gpus) for a in s.assignments}
    assert (start["w"][0], start["a"][0], start["b"][0]) == (0, HOUR, HOUR)
    assert start["a"][1] == start["b"][1]


def test_a_slice_worth_different_shares_on_different_models_is_declined_with_a_reason() -> None:
    """``mig: auto`` with 5 GiB is a 1g.10gb (1/7 GPU) on an A100 and a 1g.6gb (1/4) on an A30: the work would
    depend on the node, so the time model declines and list scheduling answers; restricting the models lifts it."""
    nodes = [{"name": "a", "gpu": A100, "gpus": 1, "cpu": 64, "memory_gib": 512},
             {"name": "b", "gpu": "A30-24GB", "gpus": 1, "cpu": 64, "memory_gib": 512}]
    data: dict[str, Any] = {"schedule": {"horizon": "4h", "step": "1h"},
                            "cluster": {"levels": ["node"], "nodes": nodes},
                            "workloads": [{"name": "s", "mig": "auto", "gpu_memory_gib": 5, "duration": "1h"}]}
    p = problem_from_data(data)
    assert "worth" in (unsupported(p) or "")
    s = schedule(p, "cpsat", time_limit=5)
    assert s.strategy == "heuristic" and "restrict gpu_models" in str(s.metrics["cpsat_declined"])
    data["workloads"][0]["gpu_models"] = [A100]
    assert unsupported(problem_from_data(data)) is None


# ------------------------------------------------------------------ exhaustive search on tiny instances
PROFILES = {"3g.40gb": (3, 4, (0, 4), 2), "4g.40gb": (4, 4, (0,), 1), "2g.20gb": (2, 2, (0, 2, 4), 3)}


#: Valid preset MIG layouts of an A100 over the profiles above: (profile, start) pairs.
LAYOUTS = ([("3g.40gb", 4), ("2g.20gb", 0), ("2g.20gb", 2)], [("4g.40gb", 0), ("3g.40gb", 4)], [("2g.20gb", 4)])


def _tiny(seed: int, presets: bool = False, power: bool = False) -> dict[str, Any]:
    """A tiny one-node scenario; with ``presets`` its GPUs are randomly fixed to whole, shared or MIG use (some
    to a MIG layout); with ``power`` the node has two GPUs in a rack whose budget (400 W) runs one at a time."""
    rnd = random.Random(seed)
    workloads = []
    for i in range(rnd.randint(3, 4)):
        w: dict[str, Any] = {"name": f"w{i}", "duration": rnd.choice([1, 2]) * HOUR,
                             "release": rnd.choice([0, 0, 1]) * HOUR, "priority": rnd.choice([0, 0, 5]),
                             "tenant": rnd.choice(["a", "b"])}
        kind = rnd.choice(["mig", "mig", "share", "whole"])
        if kind == "mig":
            w["mig"] = rnd.choice(sorted(PROFILES))
        elif kind == "share":
            w.update(kind="shared", gpu_fraction=rnd.choice([0.25, 0.5, 0.75]))
            if rnd.random() < 0.4:
                w["gpu_memory_gib"] = 50
            if rnd.random() < 0.3:
                w["isolation"] = "tenant"
        else:
            w["gpus"] = 1
        if rnd.random() < 0.3:
            w["deadline"] = w["release"] + w["duration"] + rnd.choice([0, 1]) * HOUR
        workloads.append(w)
    node: dict[str, Any] = {"name": "n", "gpu": A100, "gpus": rnd.choice([1, 2]), "cpu": 64, "memory_gib": 512}
    if presets:
        modes = []
        for g in range(node["gpus"]):
            mode = rnd.choice([None, "whole", "shared", "mig", "layout", "layout"])
            if mode == "layout":
                lay = rnd.choice(LAYOUTS)
                modes.append({"gpus": [g], "mode": "mig", "layout": [{"profile": a, "start": b} for a, b in lay]})
            elif mode is not None:
                modes.append({"gpus": [g], "mode": mode})
        node["gpu_modes"] = modes
    if power:
        node["gpus"] = 2
        return {"schedule": {"horizon": "3h", "step": "1h"}, "workloads": workloads,
                "cluster": {"levels": ["rack", "node"], "racks": [{"name": "r", "power_kw": 0.4, "nodes": [node]}]}}
    return {"schedule": {"horizon": "3h", "step": "1h"}, "cluster": {"levels": ["node"], "nodes": [node]},
            "workloads": workloads}


def _exhaustive(data: dict[str, Any]) -> tuple[tuple[int, ...], int]:
    """Best (work per priority, highest first; wait) over every start, GPU and slice start of every workload.

    Written from the rules only: at every hour a GPU is used whole, or by MIG instances at allowed starts
    whose memory slices do not overlap (at most ``max_count`` of a profile, 7 compute slices), or by shares
    that add up to at most 1 and 80 GiB; a tenant-isolated share has its GPU to its tenant. A GPU preset to
    a mode hosts only that kind of use, and one preset to a MIG layout only instances of the layout. Under a
    rack budget, at most ``budget // 400 W`` GPUs have any use at each hour (an A100 in use draws 400 W).
    """
    ws = data["workloads"]
    racks = data["cluster"].get("racks")
    node = racks[0]["nodes"][0] if racks else data["cluster"]["nodes"][0]
    on_most = int(racks[0]["power_kw"] * 1000) // 400 if racks else 99
    gpus = node["gpus"]
    preset: dict[int, tuple[str, set[tuple[str, int]] | None]] = {}
    for m in node.get("gpu_modes", []):
        lay = {(x["profile"], x["start"]) for x in m["layout"]} if "layout" in m else None
        preset[m["gpus"][0]] = ({"shared": "share"}.get(m["mode"], m["mode"]), lay)
    hours = 3
    prios = sorted({w["priority"] for w in ws}, reverse=True)
    options: list[list[tuple[int, int, int] | None]] = []
    for w in ws:
        last = min(w.get("deadline", hours * HOUR), hours * HOUR) - w["duration"]
        firsts = PROFILES[w["mig"]][2] if "mig" in w else (0,)
        options.append([None] + [(t, g, f) for t in range(w["release"], last + 1, HOUR) for g in range(gpus)
                                 for f in firsts])

    def value(w: dict[str, Any]) -> int:
        if "mig" in w:
            return PROFILES[w["mig"]][0] * UNITS_PER_GPU // 7
        if "gpu_fraction" in w:
            return round(w["gpu_fraction"] * 1000) * UNITS_PER_GPU // 1000
        return UNITS_PER_GPU

    def fits(gpu: int, uses: list[tuple[dict[str, Any], int]]) -> bool:
        kinds = {"mig" if "mig" in w else "share" if "gpu_fraction" in w else "whole" for w, _ in uses}
        if len(kinds) > 1:
            return False
        mode, lay = preset.get(gpu, (None, None))
        if mode is not None and kinds and kinds != {mode}:
            return False
        if lay is not None and any((w["mig"], first) not in lay for w, first in uses):
            return False
        if kinds == {"whole"}:
            return len(uses) <= 1
        if kinds == {"share"}:
            tenants = {w["tenant"] for w, _ in uses}
            if len(tenants) > 1 and any(w.get("isolation") == "tenant" for w, _ in uses):
                return False
            return (sum(round(w["gpu_fraction"] * 1000) for w, _ in uses) <= 1000
                    and sum(w.get("gpu_memory_gib", 0) for w, _ in uses) <= 80)
        mask, compute = 0, 0
        for w, first in uses:
            c, size, _, most = PROFILES[w["mig"]]
            bits = ((1 << size) - 1) << first
            if mask & bits or sum(1 for x, _ in uses if x["mig"] == w["mig"]) > most:
                return False
            mask |= bits
            compute += c
        return compute <= 7

    best: tuple[tuple[int, ...], int] | None = None
    state: dict[tuple[int, int], list[tuple[dict[str, Any], int]]] = {}
    chosen: list[tuple[int, int, int] | None] = []

    def search(i: int) -> None:
        nonlocal best
        if i == len(ws):
            work = tuple(sum(value(w) * w["duration"] for w, c in zip(ws, chosen, strict=True)
                             if c is not None and w["priority"] == q) for q in prios)
            wait = sum(value(w) * (c[0] - w["release"]) for w, c in zip(ws, chosen, strict=True) if c is not None)
            if best is None or (work, -wait) > (best[0], -best[1]):
                best = (work, wait)
            return
        for opt in options[i]:
            hours_run = range(opt[0] // HOUR, (opt[0] + ws[i]["duration"]) // HOUR) if opt is not None else range(0)
            cells = [(opt[1], h) for h in hours_run] if opt is not None else []
            for cell in cells:
                state.setdefault(cell, []).append((ws[i], opt[2] if opt else 0))
            powered = all(sum(1 for g in range(gpus) if state.get((g, h))) <= on_most for _, h in cells)
            if powered and all(fits(cell[0], state[cell]) for cell in cells):
                chosen.append(opt)
                search(i + 1)
                chosen.pop()
            for cell in cells:
                state[cell].pop()

    search(0)
    assert best is not None
    return best


@pytest.mark.parametrize("seed", range(10))
def test_cpsat_equals_exhaustive_search_on_tiny_mig_and_share_instances(seed: int) -> None:
    data = _tiny(seed)
    p = problem_from_data(data)
    s = cpsat(p)
    work, wait = _exhaustive(data)
    assert s.status == "optimal"
    assert s.objective == tuple(round(x / UNITS_PER_GPU / HOUR, 6) for x in work)
    assert s.wait_gpu_h == round(wait / UNITS_PER_GPU / HOUR, 6)


@pytest.mark.parametrize("seed", range(100, 112))
def test_cpsat_equals_exhaustive_search_on_tiny_instances_with_preset_gpu_modes(seed: int) -> None:
    data = _tiny(seed, presets=True)
    p = problem_from_data(data)
    work, wait = _exhaustive(data)
    if not any(work):  # the presets rule out every workload (seeds 105, 110): nothing runs
        s = schedule(p, "cpsat", time_limit=5)
        assert not s.assignments and len(s.unscheduled) == len(p.workloads) and check_schedule(p, s) == []
        return
    s = cpsat(p)
    assert s.status == "optimal"
    assert s.objective == tuple(round(x / UNITS_PER_GPU / HOUR, 6) for x in work)
    assert s.wait_gpu_h == round(wait / UNITS_PER_GPU / HOUR, 6)


@pytest.mark.parametrize("seed", range(200, 210))
def test_cpsat_equals_exhaustive_search_on_tiny_instances_under_a_power_budget(seed: int) -> None:
    """Slices and shares on two GPUs of which the budget runs one at a time: the model's power rule is exact."""
    data = _tiny(seed, presets=seed % 2 == 1, power=True)
    p = problem_from_data(data)
    s = cpsat(p)
    work, wait = _exhaustive(data)
    assert s.metrics["model_exact"] is True and s.status == "optimal"
    assert s.objective == tuple(round(x / UNITS_PER_GPU / HOUR, 6) for x in work)
    assert s.wait_gpu_h == round(wait / UNITS_PER_GPU / HOUR, 6)


@pytest.mark.parametrize("seed", range(4))
def test_neighbourhood_search_reaches_the_exhaustive_work_on_tiny_mig_instances(seed: int) -> None:
    data = _tiny(seed)
    p = problem_from_data(data)
    s = schedule_cpsat(p, 3 * HOUR, HOUR, 2.0, lns=True)
    assert s.strategy == "cpsat-lns" and check_schedule(p, s) == []
    work, _ = _exhaustive(data)
    assert s.objective == tuple(round(x / UNITS_PER_GPU / HOUR, 6) for x in work)


# ------------------------------------------------------------------ random scenarios, determinism
def _no_presets(data: dict[str, Any]) -> dict[str, Any]:
    for rack in data["cluster"]["racks"]:
        for node in rack["nodes"]:
            node.pop("gpu_modes", None)
            node.pop("mig_strategy", None)
    for w in data["workloads"]:
        w.pop("mig_strategy", None)
    return data


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(timed_scenario(), st.lists(st.booleans(), min_size=8, max_size=8),
       st.lists(st.sampled_from([0, 1800, 5000, 4 * HOUR]), min_size=8, max_size=8), st.booleans())
def test_cpsat_schedules_with_mig_and_shares_pass_the_validator(data: dict[str, Any], pick: list[bool],
                                                                 ends: list[int], lns: bool) -> None:
    p = running_problem(_no_presets(data), pick, ends)
    if p is None:
        return
    if unsupported(p) is not None:
        return
    spec = p.schedule
    assert spec is not None
    s = schedule_cpsat(p, spec.horizon, spec.step, 1.0, lns=lns)
    assert check_schedule(p, s) == []


def test_same_seed_same_schedule_with_mig_and_shares() -> None:
    nodes = [{"name": f"n{i}", "gpu": A100, "gpus": 2, "cpu": 64, "memory_gib": 512} for i in range(2)]
    ws: list[dict[str, Any]] = []
    for i in range(8):
        w: dict[str, Any] = {"name": f"w{i}", "duration": f"{1 + i % 3}h", "release": f"{i % 2}h",
                             "priority": 5 * (i % 2), "replicas": 1 + i % 2}
        w.update([{"mig": "3g.40gb"}, {"kind": "shared", "gpu_fraction": 0.5}, {"gpus": 1}, {"mig": "2g.20gb"}][i % 4])
        ws.append(w)
    p = problem_from_data({"schedule": {"horizon": "6h", "step": "1h"},
                           "cluster": {"levels": ["node"], "nodes": nodes}, "workloads": ws})
    assert unsupported(p) is None
    for lns in (False, True):
        a, b = (schedule_cpsat(p, 6 * HOUR, HOUR, 3.0, seed=4, lns=lns).model_copy(
            update={"solve_seconds": 0.0, "metrics": {}}) for _ in range(2))
        assert a.to_json() == b.to_json()
        assert check_schedule(p, a) == []
