"""The one occupancy state: exact add/remove and rollback, and per-node fit agreeing with its array screens."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from capplan.io.scenario import load_scenario
from capplan.placement.core.options import PlanOptions
from capplan.placement.core.state import ClusterState, Placement
from capplan.placement.greedy import plan_greedy

EXAMPLES = Path(__file__).parents[3] / "models" / "examples"
ARRAYS = ("cpu", "mem", "mode", "users", "used", "frac", "gmem", "mig_mask", "prof_count", "free_whole",
          "power_free", "node_tenant", "gpu_tenant", "node_iso", "gpu_iso")


def _snapshot(st: ClusterState) -> dict[str, np.ndarray]:
    return {k: getattr(st, k).copy() for k in ARRAYS}


def test_removing_a_plan_restores_the_empty_state() -> None:
    """Applying every assignment of a plan and removing them in any order leaves the state as it was."""
    for name in ("mig-inference", "mixed-fleet", "training-cluster"):
        p = load_scenario(EXAMPLES / f"{name}.yaml")
        plan = plan_greedy(p, PlanOptions())
        st = ClusterState(p)
        empty = _snapshot(st)
        placed = []
        for a in plan.assignments:
            w = p.workload(a.workload)
            d = p.can_host(w, p.cluster.nodes[p.cluster.node_index[a.node]])
            assert d is not None
            placed.append((w, d, st.place_assignment(w, d, a)))
        assert int(st.users.sum()) == sum(len(a.gpus) for a in plan.assignments)
        for w, d, pl in placed[::2] + placed[1::2]:
            st.apply(w, d, pl, -1)
        after = _snapshot(st)
        assert all(np.array_equal(empty[k], after[k]) for k in ARRAYS), [k for k in ARRAYS
                                                                         if not np.array_equal(empty[k], after[k])]


def test_rollback_undoes_a_trial() -> None:
    """Changes after a checkpoint are undone by rollback and kept by commit."""
    p = load_scenario(EXAMPLES / "mixed-fleet.yaml")
    st = ClusterState(p)
    before = _snapshot(st)
    w = next(x for x in p.workloads if x.gpus)
    idx, _ = st.eligible(w)
    i = int(idx[0])
    d = st.demand_at(w, i)
    mark = st.checkpoint()
    pl = st.fit(w, d, i)
    assert isinstance(pl, Placement)
    st.apply(w, d, pl)
    assert int(st.free_whole[i]) == int(before["free_whole"][i]) - d.gpus
    st.rollback(mark)
    assert all(np.array_equal(before[k], getattr(st, k)) for k in ARRAYS)
    mark = st.checkpoint()
    st.apply(w, d, pl)
    st.commit()
    assert st.journal is None and int(st.users[i].sum()) == d.gpus


def test_fit_agrees_with_the_array_screens() -> None:
    """On a filled cluster, a node passes the CPU/memory/isolation screen exactly when fit gets past those checks,
    and every placement fit returns is one the per-GPU views allow."""
    p = load_scenario(EXAMPLES / "mig-inference.yaml")
    plan = plan_greedy(p, PlanOptions())
    st = ClusterState.with_assignments(p, list(plan.assignments))
    for w in p.workloads:
        idx, _ = st.eligible(w)
        ok = st.node_ok(w, idx)
        for i, screen in zip(idx.tolist(), ok.tolist(), strict=True):
            r = st.fit(w, st.demand_at(w, i), i)
            if not screen:
                assert r in ("cpu", "memory", "isolation")
            if r in ("cpu", "memory"):
                assert not screen
            if isinstance(r, Placement):
                for g in r.gpus:
                    view = st.gpus[i][g]
                    assert view.fixed is None or view.fixed.mode in ("whole", "mig", "shared")
