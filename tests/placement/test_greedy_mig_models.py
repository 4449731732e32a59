"""Greedy's choice of GPU model for MIG work (:meth:`capplan.placement.bestfit.BestFitOrder._model_rank`) and its
order of MIG workloads within a priority (:func:`capplan.placement.greedy.workload_order`), hand-worked.

Each case is built so that the rule before (models ranked by the instance's compute slices alone, ties to the
node with the least free CPU; workloads by total demand) places less: the expected plans are worked out by hand
from the catalog's profiles (H200: 1g.18gb, 1g.35gb = 1 compute + 2 memory slices, 3g.71gb; B200: 1g.23gb =
1 + 1, 2g.45gb = 2 + 2; H100: 1g.10gb = 1 + 1, 1g.20gb = 1 + 2; all with 7 compute and 8 memory slices).
"""

from __future__ import annotations

from typing import Any

import pytest

from capplan.model.problem import Workload
from capplan.model.units import UNITS_PER_GPU
from capplan.placement import solve
from capplan.placement.bestfit import BestFitOrder, gpu_share
from capplan.placement.core.state import ClusterState
from capplan.placement.greedy import workload_order
from tests.conftest import scenario


def _node(name: str, gpu: str, cpu: int) -> dict[str, Any]:
    """A one-GPU node; the old rule's last tie (least free CPU first) goes to the node with less ``cpu``."""
    return {"name": name, "gpu": gpu, "gpus": 1, "cpu": cpu, "memory_gib": 256}


#: The models of these fleets (a replica's value is its smallest compute share over the models it allows).
MODELS = ["H200-SXM-141GB", "B200-180GB", "H100-SXM5-80GB"]


def _auto(name: str, gib: int, replicas: int, priority: int = 0) -> dict[str, Any]:
    return {"name": name, "mig": "auto", "gpu_memory_gib": gib, "replicas": replicas, "cpu": 1, "memory_gib": 1,
            "priority": priority, "gpu_models": MODELS}


def test_share_counts_memory_slices() -> None:
    """A 20 GiB instance takes a seventh of a B200 (1g.23gb: one slice of each kind) and a quarter of an H200
    (1g.35gb: two of its eight memory slices), though both are one compute slice (a seventh) of the GPU."""
    p = scenario([_node("h", "H200-SXM-141GB", 8), _node("b", "B200-180GB", 16)], [_auto("w", 20, 1)])
    st = ClusterState(p)
    per = st.demands(p.workloads[0])[0]
    shares = {m.name: gpu_share(d, m) for d, m in zip(per, st.models, strict=True) if m is not None}
    assert shares == {"B200-180GB": UNITS_PER_GPU // 7, "H200-SXM-141GB": UNITS_PER_GPU // 4}
    rank = BestFitOrder(p, st)._model_rank(p.workloads[0])
    ids = {m.name: k for k, m in enumerate(st.models) if m is not None}
    assert rank[ids["B200-180GB"]] < rank[ids["H200-SXM-141GB"]]


def test_mig_auto_goes_where_it_takes_least_of_the_gpu() -> None:
    """Seven 20 GiB replicas fill the B200 (7 x 1g.23gb); the H200 (listed first, less free CPU: first under the
    old tie) then takes the two 70 GiB replicas (2 x 3g.71gb). Before, four 1g.35gb filled the H200's memory
    slices and the three others went to the B200, where no 3g slice was left for one of the 70 GiB replicas."""
    p = scenario([_node("h", "H200-SXM-141GB", 8), _node("b", "B200-180GB", 16)],
                 [_auto("small", 20, 7, priority=10), _auto("big", 70, 2)])
    plan = solve(p, "greedy")
    assert {a.node for a in plan.assignments if a.workload == "small"} == {"b"}
    assert {(a.node, a.mig.profile) for a in plan.assignments if a.workload == "big" and a.mig} == {
        ("h", "3g.71gb")}
    assert not plan.unplaced
    assert plan.objective == pytest.approx((1.0, 6 / 7))


def test_equal_share_goes_to_the_smallest_instance() -> None:
    """Seven 10 GiB replicas take one compute and one memory slice on both an H100 (1g.10gb) and a B200
    (1g.23gb): the H100's smaller instance serves, and the B200 is left for the 20 GiB replicas below (seven
    1g.23gb). Before, the B200 (less free CPU) took the 10 GiB ones and the H100 held four 20 GiB (1g.20gb)."""
    p = scenario([_node("b", "B200-180GB", 8), _node("h", "H100-SXM5-80GB", 16)],
                 [_auto("ten", 10, 7, priority=10), _auto("twenty", 20, 7)])
    plan = solve(p, "greedy")
    assert {a.node for a in plan.assignments if a.workload == "ten"} == {"h"}
    assert {a.node for a in plan.assignments if a.workload == "twenty"} == {"b"}
    assert not plan.unplaced


def test_named_profile_of_one_model_before_mig_auto_of_many() -> None:
    """At one priority, three ``2g.45gb`` on B200 only (6/7 of a GPU) are placed before seven 20 GiB ``mig:
    auto`` (a whole GPU of value, so first by demand before): the B200 takes 2g.45gb at 0, 2, 4 and one
    1g.23gb at 6, the H200 four 1g.35gb; two auto replicas are left. Before, the seven autos filled the B200
    and no 2g.45gb was placed (value 1 GPU instead of 6/7 + 5/7)."""
    p = scenario([_node("h", "H200-SXM-141GB", 16), _node("b", "B200-180GB", 8)],
                 [_auto("auto", 20, 7),
                  {"name": "named", "mig": "2g.45gb", "gpu_models": ["B200-180GB"], "replicas": 3, "cpu": 1,
                   "memory_gib": 1}])
    assert [w.name for w in workload_order(p)] == ["named", "auto"]
    plan = solve(p, "greedy")
    assert sorted((a.node, a.mig.profile, a.mig.start) for a in plan.assignments if a.mig) == [
        ("b", "1g.23gb", 6), ("b", "2g.45gb", 0), ("b", "2g.45gb", 2), ("b", "2g.45gb", 4),
        ("h", "1g.35gb", 0), ("h", "1g.35gb", 2), ("h", "1g.35gb", 4), ("h", "1g.35gb", 6)]
    assert plan.objective == pytest.approx((11 / 7,))
    ((u),) = plan.unplaced
    assert u.workload == "auto" and len(u.replicas) == 2


def test_whole_gpus_before_mig_slices_of_a_priority() -> None:
    """At the lowest priority (here the only one), eight 1g.10gb (8/7 of a GPU: first by demand before) filled
    one H100 and took a slice of the other, so the 1-GPU replica found no whole GPU (8/7 placed). Now the whole
    GPU goes first and seven slices fill the other GPU: 2 GPUs placed, one slice left."""
    p = scenario([{"name": "n", "gpu": "H100-SXM5-80GB", "gpus": 2, "cpu": 64, "memory_gib": 512}],
                 [{"name": "slices", "mig": "1g.10gb", "replicas": 8, "gpu_models": ["H100-SXM5-80GB"]},
                  {"name": "whole", "gpus": 1}])
    assert [w.name for w in workload_order(p)] == ["whole", "slices"]
    plan = solve(p, "greedy")
    assert plan.objective == pytest.approx((2.0,))
    ((u),) = plan.unplaced
    assert u.workload == "slices" and len(u.replicas) == 1


def test_mig_before_other_work_above_the_lowest_priority() -> None:
    """Above the lowest priority MIG workloads come before whole GPUs (fewest models first); at the lowest,
    after them; gangs first everywhere, then by total demand."""
    p = scenario([{"name": "n", "gpu": "H100-SXM5-80GB", "gpus": 8, "cpu": 64, "memory_gib": 512},
                  {"name": "m", "gpu": "A100-SXM4-80GB", "gpus": 8, "cpu": 64, "memory_gib": 512}],
                 [{"name": "whole9", "gpus": 4, "priority": 9},
                  {"name": "any9", "mig": "1g.10gb", "priority": 9},
                  {"name": "h100only9", "mig": "1g.10gb", "gpu_models": ["H100-SXM5-80GB"], "priority": 9},
                  {"name": "gang9", "kind": "training", "gpus": 1, "replicas": 2, "priority": 9},
                  {"name": "whole0", "gpus": 1}, {"name": "mig0", "mig": "3g.40gb", "replicas": 8}])
    assert [w.name for w in workload_order(p)] == ["gang9", "h100only9", "any9", "whole9", "whole0", "mig0"]
    assert solve(p, "greedy").status in ("optimal", "feasible")


def test_order_unchanged_without_mig() -> None:
    """Whole-GPU, share and gang workloads keep the order by priority, gangs first, then total demand."""
    p = scenario([{"name": "n", "gpu": "H100-SXM5-80GB", "gpus": 8, "cpu": 64, "memory_gib": 512}],
                 [{"name": "one", "gpus": 1, "replicas": 2}, {"name": "four", "gpus": 4},
                  {"name": "sh", "kind": "shared", "gpu_fraction": 0.5, "replicas": 2},
                  {"name": "gang", "kind": "training", "gpus": 1, "replicas": 2}])
    order: list[Workload] = workload_order(p)
    assert [w.name for w in order] == ["gang", "four", "one", "sh"]
