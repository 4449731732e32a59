"""Online scheduling: one workload at a time, no lookahead, valid and deterministic."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from capplan.bench.online.frag import TypicalPods
from capplan.bench.online.policies import BalancedFGD, FGDPolicy, PolicyContext, cpu_per_gpu
from capplan.bench.online.sim import Fleet, PodTable, SimState, pod_view, simulate
from capplan.bench.online.table import make_policy
from capplan.io.alibaba import TraceNode, TracePod, trace_data
from capplan.io.scenario import load_scenario, problem_from_data
from capplan.model.plan import Assignment, Plan, Unplaced
from capplan.model.validate import check_plan
from capplan.placement.core.summary import make_plan
from capplan.placement.online import OnlineScheduler

EXAMPLES = Path(__file__).parents[2] / "models" / "examples"


def _run(score: str) -> tuple[list, list]:  # type: ignore[type-arg]
    p = load_scenario(EXAMPLES / "mig-inference.yaml")
    sched = OnlineScheduler(p.replace(workloads=p.workloads, running=()), score=score)  # type: ignore[arg-type]
    placed, failed = [], []
    for w in p.workloads:
        got = sched.schedule(w)
        if got is None:
            failed.append(w.name)
        else:
            placed += got
    return placed, failed


def test_online_result_is_a_valid_plan() -> None:
    """Everything scheduled online forms a plan the independent validator accepts."""
    p = load_scenario(EXAMPLES / "mig-inference.yaml")
    for score in ("fgd", "bestfit"):
        placed, _ = _run(score)
        placed_keys = {a.key for a in placed}
        unplaced = [Unplaced(workload=w.name, replicas=tuple(r for r in range(w.replicas)
                                                              if (w.name, r) not in placed_keys), reason="online")
                    for w in p.workloads if any((w.name, r) not in placed_keys for r in range(w.replicas))]
        plan: Plan = make_plan(p, "online", placed, unplaced)
        assert check_plan(p, plan) == []


def test_online_is_deterministic_and_counts_gpus() -> None:
    """The same arrival order gives the same placements; allocated GPUs add up."""
    a, _ = _run("fgd")
    b, _ = _run("fgd")
    assert a == b and a


# --- capplan's policy in the benchmark simulator (capplan.bench.online.policies.BalancedFGD) ---

MODELS = ("T4", "G2")


def _ctx(nodes: list[TraceNode], pods: list[TracePod], seed: int = 0) -> PolicyContext:
    fleet, table = Fleet.from_trace(nodes), PodTable.from_trace(pods)
    return PolicyContext(fleet, table, TypicalPods.from_pods(fleet, table), seed)


def _as_plan(nodes: list[TraceNode], pods: list[TracePod], res: object) -> tuple[object, Plan]:
    """The simulated placements (pods in arrival order) as a Plan for the loaded Problem."""
    ordered = [dataclasses.replace(p, name=f"w{k}") for k, p in enumerate(pods)]
    problem = problem_from_data(trace_data(nodes, ordered, "t"))
    asg, missing = [], []
    for k, p in enumerate(ordered):
        share = p.num_gpu == 1 and p.gpu_milli < 1000
        for node, gpus in zip(res.nodes[k], res.gpus[k], strict=True):  # type: ignore[attr-defined]
            asg.append(Assignment(workload=p.name, replica=0, node=nodes[node].name, gpus=tuple(gpus),
                                  fraction=p.gpu_milli / 1000 if share else None))
        if not res.nodes[k]:  # type: ignore[attr-defined]
            missing.append(Unplaced(workload=p.name, replicas=(0,), reason="did not fit on arrival"))
    return problem, make_plan(problem, "online", asg, missing)


@st.composite
def _instances(draw: st.DrawFn) -> tuple[list[TraceNode], list[TracePod]]:
    nodes = [TraceNode(f"n{i}", draw(st.integers(2, 32)) * 1000, draw(st.integers(8, 64)) * 1024,
                       draw(st.sampled_from([0, 1, 2, 4, 8])), draw(st.sampled_from(MODELS)))
             for i in range(draw(st.integers(1, 6)))]
    pods = []
    for j in range(draw(st.integers(1, 30))):
        kind = draw(st.integers(0, 2))
        num = 0 if kind == 0 else 1 if kind == 1 else draw(st.sampled_from([1, 2, 4, 8]))
        milli = 0 if num == 0 else draw(st.integers(1, 999)) if kind == 1 else 1000
        spec = tuple(draw(st.lists(st.sampled_from(MODELS), max_size=1))) if num else ()
        pods.append(TracePod(f"p{j}", draw(st.integers(1, 12)) * 1000, draw(st.integers(0, 16)) * 1024,
                             num, milli, spec))
    return nodes, pods


@settings(max_examples=30, deadline=None)
@given(inst=_instances(), seed=st.integers(0, 3))
def test_bench_policy_placements_pass_the_validator(inst: tuple[list[TraceNode], list[TracePod]],
                                                    seed: int) -> None:
    """Every placement of the capplan policy in the online simulator passes the independent validator."""
    nodes, pods = inst
    ctx = _ctx(nodes, pods, seed)
    policy = make_policy("capplan", ctx)
    assert isinstance(policy, BalancedFGD)
    state, res = simulate(ctx.fleet, ctx.pods, np.arange(len(pods)), policy, seed)
    problem, plan = _as_plan(nodes, pods, res)
    assert check_plan(problem, plan) == []  # type: ignore[arg-type]
    assert (state.gpu_left >= 0).all() and (state.cpu_left >= 0).all() and (state.mem_left >= 0).all()


def test_bench_policy_on_a_trace_subset_is_valid_and_deterministic() -> None:
    """On 300 pods of the bundled-format trace sample, the policy places pods validly and repeatably."""
    rng = np.random.default_rng(5)
    nodes = [TraceNode(f"g2-{i}", 96000, 393216, 8, "G2") for i in range(6)] + \
        [TraceNode(f"t4-{i}", 104000, 524288, 2, "T4") for i in range(6)]
    shapes = [(12000, 1, 1000), (3000, 1, 810), (11908, 1, 470), (4000, 1, 320), (24000, 1, 1000),
              (8000, 0, 0), (64000, 8, 1000), (16000, 2, 1000)]
    pods = []
    for j in range(300):
        cpu, num, milli = shapes[int(rng.integers(len(shapes)))]
        pods.append(TracePod(f"p{j:03d}", cpu, 8192, num, milli, ()))
    ctx = _ctx(nodes, pods, 42)
    runs = [simulate(ctx.fleet, ctx.pods, np.arange(len(pods)), make_policy("capplan", ctx), 42)[1]
            for _ in range(2)]
    assert runs[0].nodes == runs[1].nodes and runs[0].gpus == runs[1].gpus
    assert sum(1 for n in runs[0].nodes if n) > 50
    problem, plan = _as_plan(nodes, pods, runs[0])
    assert check_plan(problem, plan) == []  # type: ignore[arg-type]


def test_usable_gpu_loss() -> None:
    """The loss counts GPUs a placement strands by taking CPU, beyond the pod's own GPUs."""
    nodes = [TraceNode("poor", 24000, 65536, 4, "G2"), TraceNode("rich", 200000, 65536, 4, "G2")]
    pods = [TracePod("a", 12000, 1024, 1, 1000, ()), TracePod("b", 12000, 1024, 1, 1000, ())]
    ctx = _ctx(nodes, pods)
    assert cpu_per_gpu(ctx) == 12.0  # 12,000 milli-CPU per 1,000 milli-GPU
    policy = BalancedFGD(ctx)
    state = SimState.empty(ctx.fleet)
    heavy = pod_view(PodTable.from_trace([TracePod("h", 24000, 1024, 1, 1000, ())]), ctx.fleet, 0, {})
    light = pod_view(PodTable.from_trace([TracePod("l", 0, 1024, 1, 1000, ())]), ctx.fleet, 0, {})
    # poor: usable min(4, 2) = 2 -> min(3, 0) = 0, one GPU is the pod's: one more lost. rich: none lost.
    assert policy.loss(state, heavy, np.array([0, 1])).tolist() == [1.0, 0.0]
    # A CPU-free pod on the CPU-poor node uses a GPU that had no CPU anyway: a gain.
    assert policy.loss(state, light, np.array([0, 1])).tolist() == [-1.0, 0.0]


def test_cpu_heavy_pod_goes_where_cpu_is_plenty() -> None:
    """Among nodes FGD scores equally, a CPU-heavy GPU pod avoids stranding a CPU-poor node's GPUs."""
    nodes = [TraceNode("poor", 24000, 65536, 4, "G2"), TraceNode("rich", 200000, 65536, 4, "G2")]
    # Typical pods ask 1 or 13 cores per GPU (7 on average): both still fit on either node after the pod.
    mix = [TracePod(f"m{j}", 1000 if j % 2 else 13000, 1024, 1, 1000, ()) for j in range(4)]
    ctx = _ctx(nodes, mix)
    heavy = pod_view(PodTable.from_trace([TracePod("h", 10000, 1024, 1, 1000, ())]), ctx.fleet, 0, {})
    for seed in range(4):
        policy = BalancedFGD(dataclasses.replace(ctx, seed=seed))
        state = SimState.empty(ctx.fleet)
        fgd = FGDPolicy(dataclasses.replace(ctx, seed=seed)).score(state, heavy)
        assert fgd[0] == fgd[1]  # FGD alone ties: the seed-shuffled order would decide
        sc = policy.score(state, heavy)
        assert sc[1] > sc[0]


def test_cpu_only_pod_keeps_cpu_for_idle_gpus() -> None:
    """A CPU-only pod goes to the node whose GPUs are all taken, not to one whose idle GPUs need the CPU."""
    nodes = [TraceNode("idle", 48000, 65536, 4, "G2"), TraceNode("full", 48000, 65536, 4, "G2")]
    mix = [TracePod(f"m{j}", 12000, 1024, 1, 1000, ()) for j in range(3)] + [TracePod("c", 8000, 1024, 0, 0, ())]
    ctx = _ctx(nodes, mix)
    cpu_pod = pod_view(PodTable.from_trace([TracePod("c", 8000, 1024, 0, 0, ())]), ctx.fleet, 0, {})
    four = pod_view(PodTable.from_trace([TracePod("f", 4000, 1024, 4, 1000, ())]), ctx.fleet, 0, {})
    for seed in range(4):
        policy = BalancedFGD(dataclasses.replace(ctx, seed=seed))
        state = SimState.empty(ctx.fleet)
        state.apply(four, 1, (0, 1, 2, 3))  # "full": no idle GPU left, 44 cores free
        policy.observe(state, 1)
        sc = policy.score(state, cpu_pod)
        assert sc[1] > sc[0]
