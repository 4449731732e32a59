"""Greedy's MIG fast path places the slices one-by-one fitting would, on fleets with preset layouts and isolation.

The fast path: the exact MIG screen (:mod:`capplan.placement.core.migfit`: per GPU, the profiles with a valid free
start), a node's slices in one step (:func:`capplan.placement.core.fit.fill_slices`: GPUs ranked once and filled
in order, each GPU's slice sequence cached). The reference below is the rule written plainly: for each replica,
every GPU of the node is looked at, the best by (idle last, most slices used, most valid placements left,
index) takes it at the start keeping the most placements free, and the replica is applied before the next.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capplan.io.scenario import problem_from_data
from capplan.model.plan import MigSlot
from capplan.model.problem import Workload
from capplan.placement import PlanOptions
from capplan.placement.core.fit import fill_slices, gpu_mode_fits, node_reason, share_strands
from capplan.placement.core.fleet import MIG, Placement
from capplan.placement.core.migslots import mig_starts, placements_left
from capplan.placement.core.state import ClusterState
from capplan.placement.greedy import plan_greedy
from tests.placement.test_greedy_bulk import OneByOne, assert_plan_of_reference

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

PROFILES = {"H100-SXM5-80GB": ["1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"],
            "A100-SXM4-80GB": ["1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb"],
            "A30-24GB": ["1g.6gb", "2g.12gb", "4g.24gb"]}
PRESETS = {  # valid layouts per model (those of benchmarks/shapes.py)
    "H100-SXM5-80GB": [[("3g.40gb", 0), ("3g.40gb", 4)], [("1g.10gb", s) for s in range(7)],
                       [("4g.40gb", 0), ("2g.20gb", 4), ("1g.10gb", 6)]],
    "A100-SXM4-80GB": [[("3g.40gb", 0), ("3g.40gb", 4)], [("1g.10gb", s) for s in range(7)],
                       [("4g.40gb", 0), ("2g.20gb", 4), ("1g.10gb", 6)]],
    "A30-24GB": [[("2g.12gb", 0), ("2g.12gb", 2)], [("1g.6gb", s) for s in range(4)],
                 [("2g.12gb", 0), ("1g.6gb", 2), ("1g.6gb", 3)]]}


@st.composite
def mig_scenario(draw: st.DrawFn) -> dict[str, Any]:
    """Racks of MIG-capable nodes (maybe power-capped), some GPUs with preset MIG layouts or modes; MIG workloads
    of three tenants with tenant or node isolation, beside a few whole-GPU and shared ones."""
    racks = []
    k = 0
    for r in range(draw(st.integers(1, 3))):
        nodes = []
        for _ in range(draw(st.integers(1, 3))):
            k += 1
            model = draw(st.sampled_from(sorted(PROFILES)))
            gpus = draw(st.sampled_from([2, 4, 8]))
            node: dict[str, Any] = {"name": f"n{k}", "gpu": model, "gpus": gpus,
                                    "cpu": draw(st.sampled_from([8, 64])), "memory_gib": 512}
            modes = []
            for g in range(gpus):
                pick = draw(st.integers(0, 5))
                if pick < len(PRESETS[model]):
                    lay = [{"profile": p, "start": s} for p, s in PRESETS[model][pick]]
                    modes.append({"gpus": [g], "mode": "mig", "layout": lay})
                elif pick == 3:
                    modes.append({"gpus": [g], "mode": draw(st.sampled_from(["mig", "whole", "shared"]))})
            if modes:
                node["gpu_modes"] = modes
            nodes.append(node)
        rack: dict[str, Any] = {"name": f"r{r}", "nodes": nodes}
        if draw(st.integers(0, 2)) == 0:
            rack["power_kw"] = draw(st.sampled_from([0.5, 1, 2, 4]))
        racks.append(rack)
    workloads = []
    for i in range(draw(st.integers(1, 8))):
        w: dict[str, Any] = {"name": f"w{i}", "replicas": draw(st.integers(1, 24)),
                             "cpu": draw(st.sampled_from([1, 2, 8])), "priority": draw(st.sampled_from([0, 10])),
                             "tenant": draw(st.sampled_from(["a", "b", "c"])),
                             "isolation": draw(st.sampled_from(["none", "none", "tenant", "node"]))}
        kind = draw(st.integers(0, 5))
        if kind == 0:
            w["gpus"] = draw(st.sampled_from([1, 2]))
        elif kind == 1:
            w.update(kind="shared", gpu_fraction=0.5)
        elif kind == 2:
            w.update(mig="auto", gpu_memory_gib=draw(st.sampled_from([5, 10, 20, 40])))
        else:
            model = draw(st.sampled_from(sorted(PROFILES)))
            w.update(mig=draw(st.sampled_from(PROFILES[model])), gpu_models=[model])
        workloads.append(w)
    return {"cluster": {"name": "m", "levels": ["rack", "node"], "racks": racks}, "workloads": workloads}


def reference_fit(state: ClusterState, w: Workload, i: int) -> Placement | str:
    """One MIG slice of ``w`` on node ``i`` by the rule itself (see the module docstring), or the reason."""
    why = node_reason(state, w, i)
    if why:
        return why
    d = state.demand_at(w, i)
    model = state.models[int(state.model_id[i])]
    assert d.profile is not None and model is not None
    width = (1 << d.profile.memory_slices) - 1
    best: tuple[tuple[int, ...], int, int] | None = None
    blocked = False
    for g in range(int(state.gpu_count[i])):
        starts = mig_starts(state, model, i, g, d.profile)
        if not gpu_mode_fits(state, i, g, MIG) or not starts:
            continue
        idle = int(state.users[i, g]) == 0
        if not idle and not state.gpu_tenant_ok_at(w, i, g):
            blocked = True
            continue
        if idle and not state.power_ok(i, 1):
            continue
        if not idle and state.tdp[i] and int(state.power_free[state.node_dom[i]].min()) < 0:
            continue
        mask, layout = int(state.mig_mask[i, g]), state.layout_slots.get((i, g))
        start, after = max(((s, placements_left(model, mask | width << s, layout)) for s in starts),
                           key=lambda x: x[1])  # the first start with the most placements left
        key = (idle, -mask.bit_count(), -after, g)
        if best is None or key < best[0]:
            best = (key, g, start)
    if best is None:
        return "isolation" if blocked else "gpu"
    return Placement(node=i, gpus=(best[1],), slot=MigSlot(profile=d.profile.name, start=best[2]))


class MigOneByOne(OneByOne):
    """The reference placer: no screens, every replica fitted on its own (MIG slices by :func:`reference_fit`)."""

    def _gpu_screen(self, w: Workload, part: np.ndarray) -> np.ndarray:
        return np.ones(part.size, dtype=bool)

    def _fill(self, w: Workload, i: int, n: int, done: list[Placement]) -> int:
        state = self.st
        d = state.demand_at(w, i)
        before = len(done)
        while len(done) < n:
            r = reference_fit(state, w, i) if d.kind == "mig" else state.fit(w, d, i)
            if not isinstance(r, Placement):
                if r not in ("power", "quota"):
                    self.remember(w, np.array([i], dtype=np.int64))
                break
            if self.keep_room and d.kind == "fraction" and share_strands(state, d, r):
                break  # the first walk of a share: only where it strands nothing
            state.apply(w, d, r)
            done.append(r)
        return len(done) - before


@SETTINGS
@given(mig_scenario())
def test_mig_fast_path_gives_the_plan_of_one_by_one(data: dict[str, Any]) -> None:
    """The greedy plan (assignments, reasons, objective) is the reference placer's, and valid."""
    assert_plan_of_reference(data, MigOneByOne)


@SETTINGS
@given(mig_scenario(), st.randoms(use_true_random=False))
def test_fill_slices_and_migfit_on_any_occupancy(data: dict[str, Any], rnd: Any) -> None:
    """On the greedy plan's occupancy with some replicas removed again: every node's one-step fill equals fitting
    by the reference one replica at a time, and the MIG screen's bits are exactly the profiles with a free start."""
    p = problem_from_data(data)
    plan = plan_greedy(p, PlanOptions())
    state = ClusterState(p)
    fit0 = state.migfit  # built now: the placements and removals below go through its dirty rows
    nodes = p.cluster.nodes
    for a in plan.assignments:
        w = p.workload(a.workload)
        state.place_assignment(w, p.demand_on(w, nodes[p.cluster.node_index[a.node]]), a)  # type: ignore[arg-type]
    for a in rnd.sample(plan.assignments, len(plan.assignments) // 3):
        w = p.workload(a.workload)
        d = p.demand_on(w, nodes[p.cluster.node_index[a.node]])
        assert d is not None
        state.apply(w, d, state.placement_of(a), -1)
    fit = state.migfit
    assert fit is fit0
    for i in range(state.n):
        model = state.models[int(state.model_id[i])]
        assert model is not None
        for g in range(int(state.gpu_count[i])):
            want = sum(1 << k for k, prof in enumerate(model.profiles)
                       if gpu_mode_fits(state, i, g, MIG) and mig_starts(state, model, i, g, prof))
            assert int(fit.gpu[i, g]) == want, (i, g)
        assert int(fit.node[i]) == int(np.bitwise_or.reduce(fit.gpu[i]))
    for w in p.workloads:
        if w.mig is None:
            continue
        for i in state.eligible(w)[0].tolist():
            d = state.demand_at(w, i)
            most = rnd.randint(1, 30)
            fast = fill_slices(state, w, d, i, most)
            mark = state.checkpoint()
            slow: list[Placement] = []
            while len(slow) < most and isinstance(r := reference_fit(state, w, i), Placement):
                state.apply(w, d, r)
                slow.append(r)
            state.rollback(mark)
            assert fast == slow, (w.name, i)
