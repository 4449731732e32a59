"""The online policies' score caches (per pod shape and node version) and capplan's hand-worked preference."""

from __future__ import annotations

import copy

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from capplan.bench.online.frag import TypicalPods
from capplan.bench.online.packed import PackedFGD, typical_shares
from capplan.bench.online.policies import BalancedFGD, FGDPolicy, PolicyContext
from capplan.bench.online.shareplan import SharePlan
from capplan.bench.online.sim import Fleet, FloatArr, Pod, PodTable, SimState, pod_view, simulate
from capplan.bench.online.table import make_policy
from capplan.io.alibaba import TraceNode, TracePod

MODELS = ("T4", "G2")


def _ctx(nodes: list[TraceNode], pods: list[TracePod], seed: int = 0, replicas: list[int] | None = None,
         threshold: float = 0.95) -> PolicyContext:
    fleet, table = Fleet.from_trace(nodes), PodTable.from_trace(pods, replicas=replicas)
    return PolicyContext(fleet, table, TypicalPods.from_pods(fleet, table, threshold=threshold), seed)


def _make(name: str, ctx: PolicyContext) -> PackedFGD | FGDPolicy:
    if name == "capplan-early":  # capplan re-planning from the 2nd share on: plans change during the run
        return PackedFGD(ctx, SharePlan(first=2, prior=typical_shares(ctx)))
    policy = make_policy(name, ctx)
    assert isinstance(policy, FGDPolicy)
    return policy


def _fresh(name: str, ctx: PolicyContext, inner: PackedFGD | FGDPolicy) -> PackedFGD | FGDPolicy:
    """A policy without cached scores; for capplan with the learned plan (no re-plan) of ``inner``."""
    fresh = _make(name, ctx)
    if isinstance(inner, PackedFGD) and isinstance(fresh, PackedFGD):
        fresh.plan = copy.deepcopy(inner.plan)
        fresh.plan.next = 10**9
        fresh.asked_cpu, fresh.asked_mem = copy.deepcopy(inner.asked_cpu), copy.deepcopy(inner.asked_mem)
        fresh.room_cpu, fresh.room_mem = inner.room_cpu.copy(), inner.room_mem.copy()
    return fresh


class Checked:
    """Delegates to a cached policy and checks every answer against a policy built fresh on the state."""

    def __init__(self, name: str, ctx: PolicyContext) -> None:
        self.name, self.ctx = name, ctx
        self.inner = _make(name, ctx)
        self.calls = 0

    def score(self, state: SimState, pod: Pod) -> FloatArr:
        # the demand per model seen before this pod: both policies count the pod once when scoring it
        models = copy.deepcopy(self.inner.models) if isinstance(self.inner, PackedFGD) else None
        got = self.inner.score(state, pod).copy()
        fresh = _fresh(self.name, self.ctx, self.inner)
        if models is not None and isinstance(fresh, PackedFGD):
            fresh.models = models
        want = fresh.score(state, pod)
        ok = state.feasible(pod)
        assert np.array_equal(got[ok], want[ok]) and (got[~ok] == -1).all()
        if pod.shares:
            for node in np.flatnonzero(ok):
                assert self.inner.gpus(state, pod, int(node)) == fresh.gpus(state, pod, int(node))
        self.calls += 1
        return got

    def gpus(self, state: SimState, pod: Pod, node: int) -> tuple[int, ...]:
        return self.inner.gpus(state, pod, node)

    def observe(self, state: SimState, node: int) -> None:
        self.inner.observe(state, node)


@st.composite
def instances(draw: st.DrawFn) -> tuple[list[TraceNode], list[TracePod], list[int]]:
    n = draw(st.integers(1, 6))
    nodes = [TraceNode(f"n{i}", draw(st.integers(2, 32)) * 1000, draw(st.integers(4, 64)) * 1024,
                       draw(st.sampled_from([1, 2, 4, 8])), draw(st.sampled_from(MODELS))) for i in range(n)]
    # Few distinct shapes, so the cache is hit; some repeat after other nodes changed.
    shapes = draw(st.lists(st.tuples(st.integers(0, 8), st.sampled_from([0, 1, 1, 2]), st.sampled_from(
        [250, 500, 810, 1000]), st.sampled_from([(), ("T4",)])), min_size=1, max_size=4))
    pods, replicas = [], []
    for j in range(draw(st.integers(1, 30))):
        cpu, num, milli, spec = shapes[draw(st.integers(0, len(shapes) - 1))]
        milli = 0 if num == 0 else 1000 if num > 1 else milli
        pods.append(TracePod(f"p{j}", cpu * 1000, 1024, num, milli, spec if num else ()))
        replicas.append(draw(st.sampled_from([1, 1, 1, 3])))  # gangs: partial placement rolls back
    return nodes, pods, replicas


@settings(max_examples=40, deadline=None)
@given(inst=instances(), name=st.sampled_from(["fgd", "capplan", "capplan-early"]), seed=st.integers(0, 3))
def test_cached_scores_equal_fresh_scores(inst: tuple[list[TraceNode], list[TracePod], list[int]], name: str,
                                          seed: int) -> None:
    """At every arrival (gang rollbacks included) the cached scores and GPU choices equal a fresh computation."""
    nodes, pods, replicas = inst
    ctx = _ctx(nodes, pods, seed, replicas)
    checked = Checked(name, ctx)
    _, res = simulate(ctx.fleet, ctx.pods, np.arange(len(pods)), checked, seed)
    assert checked.calls >= sum(1 for n in res.nodes if n)


def test_policy_built_for_an_empty_cluster_follows_a_prefilled_state() -> None:
    """A policy constructed up front (start-up work on an empty cluster) scores a prefilled state correctly."""
    nodes = [TraceNode("a", 32000, 65536, 4, "G2"), TraceNode("b", 32000, 65536, 4, "G2")]
    pods = [TracePod("s", 4000, 1024, 1, 500), TracePod("w", 8000, 1024, 1, 1000)]
    ctx = _ctx(nodes, pods)
    early = make_policy("capplan", ctx)  # built before the state below exists
    state = SimState.empty(ctx.fleet)
    share = pod_view(ctx.pods, ctx.fleet, 0, {})
    state.apply(share, 0, (0,))
    whole = pod_view(ctx.pods, ctx.fleet, 1, {})
    assert np.array_equal(early.score(state, share), make_policy("capplan", ctx).score(state, share))
    assert np.array_equal(early.score(state, whole), make_policy("capplan", ctx).score(state, whole))


def test_capplan_keeps_a_typical_pod_placeable() -> None:
    """Hand-worked: a 20-core 1-GPU pod goes where a typical 12-core 1-GPU pod still fits afterwards.

    Typical pods: one shape, 12 cores and 1 GPU (12 cores per GPU). Node A has 2 GPUs and 24
    cores, node B 2 GPUs and 40 cores. On A the pod leaves 1 GPU with 4 cores: the typical pod no
    longer fits, so that GPU becomes fragment (FGD decrease -1000 milli: ``trunc(100 sigmoid(-1))``
    = 26) and A's CPU-backed GPUs drop from 2 to 1/3, 2/3 of a GPU beyond the pod's own (rounded to
    a half: loss 0.5, bonus 0.4 x (1 - 2.5 / 4) = 0.15). On B 1 GPU with 20 cores stays usable: FGD
    50 (no change), loss 0 (bonus 0.2).
    """
    nodes = [TraceNode("A", 24000, 65536, 2, "G2"), TraceNode("B", 40000, 65536, 2, "G2")]
    mix = [TracePod(f"t{j}", 12000, 1024, 1, 1000) for j in range(3)]
    ctx = _ctx(nodes, mix, threshold=1.0)
    pod = pod_view(PodTable.from_trace([TracePod("x", 20000, 1024, 1, 1000)]), ctx.fleet, 0, {})
    policy = BalancedFGD(ctx)
    assert np.allclose(policy.score(SimState.empty(ctx.fleet), pod), [26.15, 50.2])
    for seed in range(4):  # whatever the tie-break order, B wins, and three typical pods still fit (on A: two)
        table = PodTable.from_trace([TracePod("x", 20000, 1024, 1, 1000)] +
                                    [TracePod(f"t{j}", 12000, 1024, 1, 1000) for j in range(3)])
        ctx2 = PolicyContext(ctx.fleet, table, ctx.typical, seed)
        _, res = simulate(ctx.fleet, table, np.arange(4), BalancedFGD(ctx2), seed)
        assert res.nodes[0] == (1,) and all(res.nodes[1:])
    fgd = FGDPolicy(ctx).score(SimState.empty(ctx.fleet), pod)
    assert fgd.tolist() == [26.0, 50.0]
