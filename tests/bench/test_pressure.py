"""Demand per GPU model learned online and the flexible pods kept off short models (capplan.bench.online.pressure)."""

from __future__ import annotations

import numpy as np

from capplan.bench.online.frag import TypicalPods
from capplan.bench.online.packed import PackedFGD
from capplan.bench.online.policies import PolicyContext
from capplan.bench.online.pressure import ModelDemand
from capplan.bench.online.sim import Fleet, PodTable, SimState, pod_view, simulate
from capplan.io.alibaba import TraceNode, TracePod

NODES = [TraceNode("t4", 64000, 262144, 2, "T4"), TraceNode("g2", 64000, 262144, 2, "G2")]
PODS = [TracePod("tied", 8000, 8192, 1, 1000, ("T4",)), TracePod("any", 8000, 8192, 1, 1000),
        TracePod("tied2", 8000, 8192, 1, 1000, ("T4",)), TracePod("both", 8000, 8192, 1, 1000, ("T4", "G2"))]
# Untied pods the runs never place: the typical pods (FGD's knowledge) are then untied whole GPUs only.
OTHERS = [TracePod(f"o{j}", 8000, 8192, 1, 1000) for j in range(80)]


def _ctx(seed: int) -> PolicyContext:
    fleet, table = Fleet.from_trace(NODES), PodTable.from_trace(PODS + OTHERS)
    return PolicyContext(fleet, table, TypicalPods.from_pods(fleet, table), seed)


def test_surplus_by_hand() -> None:
    """One T4-tied and one untied GPU seen: half the coming demand is T4's; T4 (1 GPU free) is short.

    State: the tied pod holds one T4 GPU, so free T4 1000, free G2 2000, F = 3000 milli. Seen: 2000
    milli, 1000 of it tied to T4: phi_T4 = 0.5, surplus T4 = 1000 - 0.5 x 3000 = -500, G2 2000.
    """
    ctx = _ctx(0)
    md = ModelDemand(ctx.fleet)
    assert md.names == ("G2", "T4")
    view = [pod_view(ctx.pods, ctx.fleet, i, {}) for i in range(4)]
    state = SimState.empty(ctx.fleet)
    assert md.short(state, view[1]) is None  # nothing tied yet
    md.add(view[0])
    state.apply(view[0], 0, (0,))
    md.add(view[1])
    assert np.allclose(md.surplus(state), [2000.0, -500.0])
    short = md.short(state, view[1])
    assert short is not None and short.tolist() == [True, False]
    assert md.short(state, view[0]) is None  # a tied pod has no choice of model
    assert md.flexible(view[3]) and not md.flexible(view[0])
    md.add(view[3])  # A|B over both models: counts as untied
    assert md.total == 3000.0 and np.allclose(md.tied, [0.0, 1000.0])


def test_flexible_pod_leaves_the_tied_models_gpu_so_the_tied_pod_fits() -> None:
    """T4-tied, untied, T4-tied: the untied pod goes to G2 on every seed and the second T4 pod fits.

    Without the rule (model_short=0) FGD, whose typical pods are untied whole GPUs, scores both nodes
    alike, so on some seeds the untied pod takes T4's last GPU and the second T4-tied pod fails: the
    case the rule is for.
    """
    order = np.arange(3)
    failed_without = 0
    for seed in range(8):
        ctx = _ctx(seed)
        _, res = simulate(ctx.fleet, ctx.pods, order, PackedFGD(ctx), seed)
        assert res.nodes == [(0,), (1,), (0,)]
        _, res = simulate(ctx.fleet, ctx.pods, order, PackedFGD(ctx, model_short=0.0), seed)
        failed_without += res.nodes[2] == ()
    assert failed_without > 0


def test_nothing_tied_changes_nothing() -> None:
    """Without gpu_spec on any pod the rule never applies: the same placements with it and without it."""
    rng = np.random.default_rng(5)
    nodes = [TraceNode(f"g2-{i}", 96000, 393216, 8, "G2") for i in range(4)] + \
        [TraceNode(f"t4-{i}", 104000, 524288, 2, "T4") for i in range(4)]
    shapes = [(3000, 1, 810), (4000, 1, 320), (11908, 1, 650), (12000, 1, 1000), (8000, 0, 0), (16000, 2, 1000)]
    pods = []
    for j in range(200):
        cpu, num, milli = shapes[int(rng.integers(len(shapes)))]
        pods.append(TracePod(f"p{j}", cpu, 8192, num, milli))
    fleet, table = Fleet.from_trace(nodes), PodTable.from_trace(pods)
    ctx = PolicyContext(fleet, table, TypicalPods.from_pods(fleet, table), 3)
    runs = [simulate(fleet, table, np.arange(len(pods)), PackedFGD(ctx, model_short=w), 3)[1] for w in (1000.0, 0.0)]
    assert runs[0].nodes == runs[1].nodes and runs[0].gpus == runs[1].gpus


def test_gpus_without_cpu_are_no_room_for_the_tied_pods() -> None:
    """10 cores per GPU: T4's last GPU has 4 cores, so it counts 400 milli; a CPU-free share may take it.

    Seen: a T4-tied and an untied GPU (phi_T4 = 0.5). Free usable milli: T4 min(1000, 4000 / 10) = 400,
    G2 2000; F = 2400, surplus T4 = 400 - 1200 = -800. A 1-GPU pod would take T4's 400: short there.
    A 500-milli share with no CPU leaves T4 min(500, 400) = 400 usable: takes nothing, not short.
    """
    ctx = _ctx(0)
    md = ModelDemand(ctx.fleet, cpu_per_gpu=10.0)
    state = SimState.empty(ctx.fleet)
    tied = pod_view(PodTable.from_trace([TracePod("t", 60000, 8192, 1, 1000, ("T4",))]), ctx.fleet, 0, {})
    state.apply(tied, 0, (0,))
    md.add(tied)
    whole = pod_view(PodTable.from_trace([TracePod("w", 2000, 8192, 1, 1000)]), ctx.fleet, 0, {})
    md.add(whole)
    assert np.allclose(md.surplus(state), [2000.0, -800.0])
    short = md.short(state, whole)
    assert short is not None and short.tolist() == [True, False]
    share = pod_view(PodTable.from_trace([TracePod("s", 0, 1024, 1, 500)]), ctx.fleet, 0, {})
    short = md.short(state, share)
    assert short is not None and short.tolist() == [False, False]
