"""The share packing plan learned online and capplan's policy that follows it (capplan.bench.online.packed)."""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from capplan.bench.online.frag import TypicalPods
from capplan.bench.online.packed import PackedFGD, lower_quantile
from capplan.bench.online.policies import BalancedFGD, PolicyContext
from capplan.bench.online.shareplan import SharePlan, maximal_patterns, planned_holes, solve_patterns
from capplan.bench.online.sim import Fleet, PodTable, SimState, pod_view, simulate
from capplan.bench.online.table import make_policy
from capplan.io.alibaba import TraceNode, TracePod


def _brute_maximal(sizes: list[int]) -> set[tuple[int, ...]]:
    out = set()
    for k in range(1, 1000 // min(sizes) + 1):
        for combo in itertools.combinations_with_replacement(sorted(sizes, reverse=True), k):
            left = 1000 - sum(combo)
            if left >= 0 and all(s > left for s in sizes):
                out.add(combo)
    return out


@settings(max_examples=30, deadline=None)
@given(sizes=st.sets(st.integers(15, 99).map(lambda x: 10 * x), min_size=1, max_size=5))
def test_maximal_patterns_are_exactly_the_maximal_multisets(sizes: set[int]) -> None:
    """Each multiset with sum <= 1000 to which no size fits appears once, and nothing else."""
    desc = sorted(sizes, reverse=True)
    got = [tuple(s for s, k in zip(desc, row, strict=True) for _ in range(k))
           for row in maximal_patterns(desc).tolist()]
    assert len(got) == len(set(got))
    assert set(got) == _brute_maximal(desc)


def test_lp_pairs_complementary_sizes() -> None:
    """810s with 160s, 650s with 320s, 470s with 470s: the optimal fractional packing, by hand."""
    pats = dict(solve_patterns({810: 4.0, 160: 4.0, 650: 3.0, 320: 3.0, 470: 6.0}))
    assert pats == {(810, 160): 4.0, (650, 320): 3.0, (470, 470): 3.0}


def test_planned_holes_follow_the_patterns() -> None:
    """A 320 is planned on a free GPU or beside a 650 (350 free), not beside a 470 (530 free)."""
    tables = planned_holes([(650, 320), (470, 470), (320, 320, 320)])
    assert np.flatnonzero(tables[320]).tolist() == [350, 360, 680, 1000]
    assert np.flatnonzero(tables[650]).tolist() == [680, 1000]
    assert np.flatnonzero(tables[470]).tolist() == [530, 1000]


def test_plan_is_learned_on_schedule_and_skips_rare_sizes() -> None:
    """The first plan comes at the 4th share, the next at the 8th; a size seen once is not planned."""
    plan = SharePlan(first=4)
    for milli in (810, 160, 810):
        assert plan.add(milli) is None and not plan.tables
    assert plan.add(160) == {810, 160}  # 4th share: first plan, (810, 160)
    assert plan.planned(810)[1000] and plan.planned(810)[840] and plan.planned(160)[190]
    for milli in (810, 160, 470):
        assert plan.add(milli) is None
    assert plan.add(810) == set()  # 8th share: re-planned, same tables; 470 (1 of 8) is too rare
    assert not plan.planned(470).any() and plan.next == 16


def _ctx(nodes: list[TraceNode], pods: list[TracePod], seed: int = 0) -> PolicyContext:
    fleet, table = Fleet.from_trace(nodes), PodTable.from_trace(pods)
    return PolicyContext(fleet, table, TypicalPods.from_pods(fleet, table), seed)


def _share(ctx: PolicyContext, milli: int) -> object:
    return pod_view(PodTable.from_trace([TracePod("s", 1000, 1024, 1, milli)]), ctx.fleet, 0, {})


def _planned_mix() -> SharePlan:
    """A plan learned from 650s, 320s and twice as many 470s: (650, 320) and (470, 470)."""
    plan = SharePlan(first=10**9)
    for milli in [650, 320, 470, 470] * 4:
        plan.add(milli)
    plan.replan()
    return plan


def _typical() -> list[TracePod]:
    """Typical pods: mostly whole GPUs (FGD then sees a free GPU as worth keeping), a few shares."""
    return [TracePod(f"m{j}", 1000, 1024, 1, m) for j, m in enumerate([1000] * 6 + [470, 650, 320])]


def test_share_starts_a_free_gpu_instead_of_an_unplanned_mix() -> None:
    """Hand-made: a 320 takes a free GPU where FGD puts it beside a 470 (210 left); a 470 joins the 470.

    One node with 2 GPUs: GPU 0 holds a 470, GPU 1 is free. FGD keeps the free GPU for the typical
    whole-GPU pods (6 of 9): its fragmentation decrease is 7/9 x 530 - 210 = +202 milli beside the 470
    and 7/9 x 530 - (6/9 x 1210 + 1/9 x 530) = -453 on the free GPU. The plan packs (650, 320) and
    (470, 470): a 320 beside a 470 is unplanned (level 3), a 320 on a free GPU starts (650, 320)
    (level 2), a 470 beside the 470 completes (470, 470) (level 1).
    """
    nodes = [TraceNode("n", 64000, 262144, 2, "G2")]
    ctx = _ctx(nodes, _typical())
    state = SimState.empty(ctx.fleet)
    state.apply(_share(ctx, 470), 0, (0,))  # type: ignore[arg-type]
    share = _share(ctx, 320)
    balanced = BalancedFGD(ctx)
    balanced.score(state, share)  # type: ignore[arg-type]
    assert balanced.gpus(state, share, 0) == (0,)  # type: ignore[arg-type]
    packed = PackedFGD(ctx, _planned_mix())
    packed.score(state, share)  # type: ignore[arg-type]
    assert packed.gpus(state, share, 0) == (1,)  # type: ignore[arg-type]
    wide = _share(ctx, 470)
    packed.score(state, wide)  # type: ignore[arg-type]
    assert packed.gpus(state, wide, 0) == (0,)  # type: ignore[arg-type]


def test_unplanned_mix_loses_to_a_free_gpu_on_another_node() -> None:
    """A 320 opens node B's free GPU rather than joining node A's lone 470, which FGD alone prefers."""
    nodes = [TraceNode("A", 64000, 262144, 1, "G2"), TraceNode("B", 64000, 262144, 1, "G2")]
    ctx = _ctx(nodes, _typical())
    state = SimState.empty(ctx.fleet)
    state.apply(_share(ctx, 470), 0, (0,))  # type: ignore[arg-type]
    for seed in range(4):
        sctx = PolicyContext(ctx.fleet, ctx.pods, ctx.typical, seed)
        fgd = BalancedFGD(sctx).score(state, _share(ctx, 320))  # type: ignore[arg-type]
        assert fgd[0] > fgd[1]
        sc = PackedFGD(sctx, _planned_mix()).score(state, _share(ctx, 320))  # type: ignore[arg-type]
        assert sc[1] > sc[0]


def test_capplan_policy_is_packed_valid_and_deterministic() -> None:
    """``capplan`` is PackedFGD; on 400 trace-like pods it re-plans, keeps capacities and repeats exactly."""
    rng = np.random.default_rng(3)
    nodes = [TraceNode(f"g2-{i}", 96000, 393216, 8, "G2") for i in range(6)] + \
        [TraceNode(f"t4-{i}", 104000, 524288, 2, "T4") for i in range(4)]
    shapes = [(3000, 1, 810), (4000, 1, 160), (11908, 1, 470), (4000, 1, 320), (11908, 1, 650),
              (12000, 1, 1000), (8000, 0, 0), (16000, 2, 1000)]
    pods = []
    for j in range(400):
        cpu, num, milli = shapes[int(rng.integers(len(shapes)))]
        pods.append(TracePod(f"p{j:03d}", cpu, 8192, num, milli, ()))
    ctx = _ctx(nodes, pods, 7)
    runs = []
    for _ in range(2):
        policy = make_policy("capplan", ctx)
        assert isinstance(policy, PackedFGD)
        state, res = simulate(ctx.fleet, ctx.pods, np.arange(len(pods)), policy, 7)
        assert policy.plan.tables  # the plan was learned and used
        runs.append((res.nodes, res.gpus, state.gpu_left.tolist()))
        assert (state.gpu_left >= 0).all() and (state.cpu_left >= 0).all() and (state.mem_left >= 0).all()
        # Re-apply every placement: the GPUs used add up to the state (no GPU over-committed).
        again = SimState.empty(ctx.fleet)
        for k, (on, gpus) in enumerate(zip(res.nodes, res.gpus, strict=True)):
            for node, g in zip(on, gpus, strict=True):
                again.apply(pod_view(ctx.pods, ctx.fleet, k, {}), node, g)
        assert np.array_equal(again.gpu_left, state.gpu_left)
    assert runs[0] == runs[1]


def test_whole_pod_pays_for_taking_a_planned_holes_room_once_the_plan_knows_it() -> None:
    """A 14-core GPU pod on a node whose 650 share awaits a 4-core 320: 0.4 less after the plan is learned.

    Node A (20 cores) holds a 650 share (4 cores): 350 milli free on its GPU 0. The pod would leave
    A 2 cores, fewer than the 4 a 320 needs. Before the plan the room is unknown (no penalty);
    after four shares (650, 320, 650, 320) the plan pairs them and A's score drops by the weight,
    though A itself did not change (its cached score must be dropped at the re-plan).
    """
    nodes = [TraceNode("A", 20000, 262144, 2, "G2"), TraceNode("B", 64000, 262144, 2, "G2")]
    ctx = _ctx(nodes, _typical())
    policy = PackedFGD(ctx, SharePlan(first=4))
    state = SimState.empty(ctx.fleet)
    big = pod_view(PodTable.from_trace([TracePod("x", 4000, 1024, 1, 650)]), ctx.fleet, 0, {})
    state.apply(big, 0, (0,))
    policy.observe(state, 0)
    whole = pod_view(PodTable.from_trace([TracePod("w", 14000, 1024, 1, 1000)]), ctx.fleet, 0, {})
    before = policy.score(state, whole).copy()
    small = pod_view(PodTable.from_trace([TracePod("y", 4000, 1024, 1, 320)]), ctx.fleet, 0, {})
    for pod in (big, small, big, small):  # the shares arrive (scored, not placed): the 4th re-plans
        policy.score(state, pod)
    assert policy.plan.planned(320)[350] and policy.room_cpu[350] == 4000
    after = policy.score(state, whole)
    assert np.isclose(after[0], before[0] - 0.4) and after[1] == before[1]


def test_room_reads_free_memory_of_nodes_alike_otherwise() -> None:
    """Two nodes in the same CPU and GPU state but with different free memory score apart by the room."""
    nodes = [TraceNode("A", 64000, 40 * 1024, 2, "G2"), TraceNode("B", 64000, 262144, 2, "G2")]
    ctx = _ctx(nodes, _typical())
    policy = PackedFGD(ctx, SharePlan(first=4))
    state = SimState.empty(ctx.fleet)
    big = pod_view(PodTable.from_trace([TracePod("x", 4000, 1024, 1, 650)]), ctx.fleet, 0, {})
    small = pod_view(PodTable.from_trace([TracePod("y", 4000, 14 * 1024, 1, 320)]), ctx.fleet, 0, {})
    for pod in (big, small, big, small):
        policy.score(state, pod)
    for node in (0, 1):
        state.apply(big, node, (0,))
        policy.observe(state, node)
    whole = pod_view(PodTable.from_trace([TracePod("w", 8000, 30 * 1024, 1, 1000)]), ctx.fleet, 0, {})
    sc = policy.score(state, whole)  # A keeps 40 - 1 - 30 = 9 GiB < 14: the 320 could not come
    assert np.isclose(sc[1] - sc[0], 0.4)


def _pod(ctx: PolicyContext, cpu: int, mem: int, milli: int, num: int = 1) -> object:
    return pod_view(PodTable.from_trace([TracePod("p", cpu, mem, num, milli)]), ctx.fleet, 0, {})


def test_feeds_by_hand_heavy_shares_only_on_nodes_with_cpu_and_memory_per_gpu() -> None:
    """A 470 share of 12 cores and 47 GB keeps feeding shares like it on a T4 node, not on a G2 node.

    G2 (96 cores, 384 GiB, 8 GPUs), empty: after the share 84 cores and 337 GiB for 7,530 free milli,
    84,000 x 470 = 39.5M < 12,000 x 7,530 = 90.4M (CPU short). T4 (104 cores, 512 GiB, 2 GPUs):
    92,000 x 470 = 43.2M >= 12,000 x 1,530 = 18.4M and 465 GiB x 470 >= 47 GiB x 1,530. An 810 share
    of 3 cores and 5.6 GB qualifies on both (93,000 x 810 >= 3,000 x 7,190 on the G2). A node where
    the share takes the last free milli keeps feeding (nothing left to feed).
    """
    nodes = [TraceNode("g2", 96000, 384 * 1024, 8, "G2"), TraceNode("t4", 104000, 512 * 1024, 2, "T4"),
             TraceNode("v", 16000, 64 * 1024, 1, "V100M16")]
    ctx = _ctx(nodes, _typical())
    state = SimState.empty(ctx.fleet)
    rows = np.arange(3)
    heavy, light = _pod(ctx, 11908, 47104, 470), _pod(ctx, 3152, 5600, 810)
    assert PackedFGD.feeds(state, heavy, rows).tolist() == [False, True, False]  # type: ignore[arg-type]
    assert PackedFGD.feeds(state, light, rows).tolist() == [True, True, True]  # type: ignore[arg-type]
    state.gpu_left[2, 0] = 470  # the V100 node's GPU has exactly the share's milli left
    assert PackedFGD.feeds(state, heavy, rows)[2]  # type: ignore[arg-type]


def test_feeding_level_adds_its_weight_within_the_plan_level() -> None:
    """Same fleet and plan, ``share_fed`` 50 against 0: the heavy share's score moves by 50 on T4 only."""
    nodes = [TraceNode("g2", 96000, 384 * 1024, 8, "G2"), TraceNode("t4", 104000, 512 * 1024, 2, "T4")]
    ctx = _ctx(nodes, _typical())
    state = SimState.empty(ctx.fleet)
    heavy = _pod(ctx, 11908, 47104, 470)
    on = PackedFGD(ctx, _planned_mix()).score(state, heavy)  # type: ignore[arg-type]
    off = PackedFGD(ctx, _planned_mix(), share_fed=0.0).score(state, heavy)  # type: ignore[arg-type]
    assert np.allclose(on - off, [0.0, 50.0])
    assert on[1] > on[0]
    assert 200.0 <= off[0] < 301.0 and 200.0 <= on[1] < 400.0  # still level 2 (planned new), below level 1


def test_feeding_level_only_while_the_fleet_has_the_cpu_per_gpu_the_pods_ask() -> None:
    """The typical pods ask 9 cores for 7,440 GPU milli (1.21 CPU milli per GPU milli); the fleet has 200 cores
    for 10,000 milli (20 per milli): the level applies. With a CPU-only pod of 600 cores the pods ask 81.9 per
    milli, more than the fleet has: the heavy share's score is as with ``share_fed`` 0. On the first fleet
    the level stops once free CPU per free milli falls below 1.21: 12,000 CPU milli for 10,000 free milli."""
    nodes = [TraceNode("g2", 96000, 384 * 1024, 8, "G2"), TraceNode("t4", 104000, 512 * 1024, 2, "T4")]
    plenty = _ctx(nodes, _typical())
    scarce = _ctx(nodes, [*_typical(), TracePod("cpu", 600000, 1024, 0, 0)])
    state = SimState.empty(plenty.fleet)
    heavy = _pod(plenty, 11908, 47104, 470)
    on, off = PackedFGD(scarce, _planned_mix()), PackedFGD(scarce, _planned_mix(), share_fed=0.0)
    assert np.allclose(on.score(state, heavy), off.score(state, heavy))  # type: ignore[arg-type]
    assert not on.fed_on
    policy = PackedFGD(plenty, _planned_mix())
    assert policy.feeding(state)
    state.cpu_left[:] = [6000, 6000]  # 12,000 < 1.21 x 10,000 = 12,097
    assert not policy.feeding(state)
    state.cpu_left[:] = [6100, 6000]
    assert policy.feeding(state)
    state.mem_left[:] = [0, 0]  # memory alike
    assert not policy.feeding(state)


def test_room_is_the_lower_quartile_of_what_a_size_asked() -> None:
    """320s asked 4, 1, 4, 4 and 8 cores: the room beside a 650 is 4 cores (the least would be 1)."""
    nodes = [TraceNode("A", 64000, 262144, 2, "G2")]
    ctx = _ctx(nodes, _typical())
    state = SimState.empty(ctx.fleet)
    for quantile, want in ((0.25, 4000), (0.0, 1000)):
        policy = PackedFGD(ctx, SharePlan(first=8), room_quantile=quantile)
        for cpu in (4000, 1000, 4000, 4000, 8000):
            policy.score(state, _pod(ctx, cpu, 2048, 320))  # type: ignore[arg-type]
        for _ in range(3):
            policy.score(state, _pod(ctx, 4000, 2048, 650))  # type: ignore[arg-type]
        assert policy.plan.planned(320)[350]  # the 8th share re-planned: (650, 320) is used
        assert policy.room_cpu[350] == want and policy.room_mem[350] == 2048


@settings(max_examples=50, deadline=None)
@given(values=st.lists(st.integers(0, 20), min_size=1, max_size=40), q=st.floats(0.0, 1.0))
def test_lower_quantile_matches_numpy(values: list[int], q: float) -> None:
    """The counted quantile equals numpy's ``method="lower"`` on the same values."""
    assert lower_quantile(Counter(values), q) == int(np.quantile(values, q, method="lower"))
