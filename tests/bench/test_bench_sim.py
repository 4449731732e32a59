"""Online simulator, FGD fragmentation, protocols and the bench CLI (small inputs only)."""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from capplan.bench.metrics import bin_records
from capplan.bench.online.frag import FragModel, TypicalPods
from capplan.bench.online.policies import PolicyContext
from capplan.bench.online.sim import Fleet, PodTable, SimState, simulate
from capplan.bench.online.table import POLICIES, make_policy
from capplan.bench.protocols import online_order, run_online, seeds_from
from capplan.cli.main import main
from capplan.io.alibaba import TraceNode, TracePod, trace_data
from capplan.io.scenario import problem_from_data
from capplan.model.errors import InputError
from capplan.model.plan import Assignment, Plan, Unplaced
from capplan.model.validate import check_plan
from capplan.placement.core.summary import make_plan

MODELS = ("T4", "G2", "P100")
ONLINE = [p for p in POLICIES if p != "capplan"]


@st.composite
def instances(draw: st.DrawFn) -> tuple[list[TraceNode], list[TracePod]]:
    n = draw(st.integers(1, 5))
    nodes = [TraceNode(f"n{i}", draw(st.integers(2, 16)) * 1000, draw(st.integers(4, 64)) * 1024,
                       draw(st.sampled_from([0, 1, 2, 4, 8])), draw(st.sampled_from(MODELS))) for i in range(n)]
    pods = []
    for j in range(draw(st.integers(1, 25))):
        kind = draw(st.integers(0, 2))
        num = 0 if kind == 0 else 1 if kind == 1 else draw(st.sampled_from([1, 2, 4, 8]))
        milli = 0 if num == 0 else draw(st.integers(1, 999)) if kind == 1 else 1000
        spec = tuple(draw(st.lists(st.sampled_from(MODELS), max_size=2, unique=True))) if num else ()
        cpu, mem = draw(st.integers(1, 8)) * 1000, draw(st.integers(0, 16)) * 1024
        pods.append(TracePod(f"p{j}", cpu, mem, num, milli, spec))
    return nodes, pods


def _plan(nodes: list[TraceNode], pods: list[TracePod], order: np.ndarray, res: object) -> tuple[object, Plan]:
    ordered = [dataclasses.replace(pods[int(i)], name=f"w{k}") for k, i in enumerate(order)]
    problem = problem_from_data(trace_data(nodes, ordered, "t"))
    asg = []
    for k, p in enumerate(ordered):
        for node, gpus in zip(res.nodes[k], res.gpus[k], strict=True):  # type: ignore[attr-defined]
            share = p.num_gpu == 1 and p.gpu_milli < 1000
            asg.append(Assignment(workload=p.name, replica=0, node=nodes[node].name, gpus=tuple(gpus),
                                  fraction=p.gpu_milli / 1000 if share else None))
    missing = [Unplaced(workload=p.name, replicas=(0,), reason="did not fit on arrival")
               for k, p in enumerate(ordered) if not res.nodes[k]]  # type: ignore[attr-defined]
    return problem, make_plan(problem, "bench", asg, missing)


@settings(max_examples=25, deadline=None)
@given(inst=instances(), policy=st.sampled_from(ONLINE), seed=st.integers(0, 5))
def test_simulator_never_overallocates(inst: tuple[list[TraceNode], list[TracePod]], policy: str, seed: int) -> None:
    """Every online placement, as a Plan for the loaded Problem, passes the independent validator."""
    nodes, pods = inst
    fleet, table = Fleet.from_trace(nodes), PodTable.from_trace(pods)
    order = np.arange(len(pods))
    ctx = PolicyContext(fleet, table, TypicalPods.from_pods(fleet, table), seed)
    state, res = simulate(fleet, table, order, make_policy(policy, ctx), seed)
    problem, plan = _plan(nodes, pods, order, res)
    assert check_plan(problem, plan) == []  # type: ignore[arg-type]
    assert (state.gpu_left >= 0).all() and (state.cpu_left >= 0).all() and (state.mem_left >= 0).all()


def test_pod_fails_for_good_and_gang_rolls_back() -> None:
    """A pod that does not fit fails; a gang that only partly fits leaves no trace."""
    nodes = [TraceNode("a", 16000, 65536, 8, "G2"), TraceNode("b", 16000, 65536, 8, "G2")]
    pods = [TracePod("g", 1000, 1024, 8, 1000), TracePod("x", 1000, 1024, 1, 1000)]
    fleet = Fleet.from_trace(nodes)
    table = PodTable.from_trace(pods, replicas=[3, 1])
    ctx = PolicyContext(fleet, table, TypicalPods.from_pods(fleet, table), 0)
    state, res = simulate(fleet, table, np.array([0, 1]), make_policy("bestfit", ctx), 0)
    assert res.nodes[0] == () and len(res.nodes[1]) == 1 and state.used_milli == 1000


def test_fgd_prefers_filling_a_partly_used_gpu() -> None:
    """FGD puts a share where it leaves the least fragment (the GPU whose rest it fills)."""
    nodes = [TraceNode("a", 64000, 262144, 2, "T4"), TraceNode("b", 64000, 262144, 2, "T4")]
    pods = [TracePod(f"s{i}", 1000, 1024, 1, 500) for i in range(4)]
    fleet, table = Fleet.from_trace(nodes), PodTable.from_trace(pods)
    ctx = PolicyContext(fleet, table, TypicalPods.from_pods(fleet, table), 0)
    state, _ = simulate(fleet, table, np.array([0, 1]), make_policy("fgd", ctx), 0)
    assert sorted(state.gpu_left.ravel().tolist()) == [0, 1000, 1000, 1000]


def test_frag_model_matches_definition() -> None:
    """Cached fragmentation equals the definition computed node by node."""
    nodes = [TraceNode("a", 8000, 65536, 4, "T4"), TraceNode("b", 2000, 65536, 2, "G2")]
    pods = [TracePod("p", 4000, 1024, 1, 600, ("T4",)), TracePod("q", 1000, 1024, 2, 1000), TracePod("c", 1, 1, 0, 0)]
    fleet, table = Fleet.from_trace(nodes), PodTable.from_trace(pods)
    typ = TypicalPods.from_pods(fleet, table, threshold=1.0)
    state = SimState.empty(fleet)
    state.gpu_left[0, :4] = [300, 700, 1000, 0]
    model = FragModel(typ, state)
    # a: p fits (GPUs 700, 1000 >= 600; cpu ok) -> fragment 300; q fits (one free GPU? no: needs 2) -> all 2000;
    # c (CPU shape) -> all 2000. b: p no access -> 2000; q needs cpu 1000 <= 2000 and 2 free GPUs -> 0; c -> 2000.
    want = [(300 + 2000 + 2000) / 3, (2000 + 0 + 2000) / 3]
    assert np.allclose(model.node_frag(state), want)


def test_binning_follows_published_analysis() -> None:
    """Records bin by rounded arrived %, bins average, empty bins borrow their neighbours."""
    rows = bin_records([100, 400, 1600], [100, 300, 500], 1000)
    got = {r.arrived_pct: r.allocation_pct for r in rows}
    assert got[10] == 10.0 and got[40] == 30.0
    assert 41 in got and got[41] == 30.0 and 39 in got and 38 not in got


def test_online_order_inflates_to_tune_ratio() -> None:
    """Arrival order is a seed-shuffle of all pods followed by draws up to 130% of capacity."""
    pods = PodTable.from_trace([TracePod(f"p{i}", 0, 0, 1, 1000) for i in range(10)])
    order = online_order(pods, 10_000, seed=3)
    assert sorted(order[:10].tolist()) == list(range(10)) and len(order) == 13
    assert online_order(pods, 10_000, seed=3).tolist() == order.tolist()


def test_seeds_parse() -> None:
    """Seed ranges and lists parse; garbage is an InputError."""
    assert seeds_from("42-44,7") == [42, 43, 44, 7]
    with pytest.raises(InputError):
        seeds_from("a-b")


def test_run_online_rows_and_final() -> None:
    """An online run yields per-bin rows and end metrics consistent with each other."""
    nodes = [TraceNode(f"n{i}", 32000, 131072, 4, "T4") for i in range(3)]
    pods = [TracePod(f"p{i}", 2000, 4096, 1, [1000, 500, 250][i % 3]) for i in range(20)]
    run = run_online(Fleet.from_trace(nodes), PodTable.from_trace(pods), "fgd", 1)
    assert run.rows and run.rows[-1].arrived_pct <= 130
    assert run.final["allocation_pct"] <= 100 and run.final["failed_pods"] >= 0


def test_bench_cli_resumes(tmp_path: Path) -> None:
    """`capplan bench alibaba` writes runs.csv, summary and plots, and skips finished runs."""
    nodes = tmp_path / "n.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\n" + "".join(f"n{i},32000,131072,4,T4\n" for i in range(4)))
    pods = tmp_path / "p.csv"
    pods.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\n" +
                    "".join(f"p{i},2000,4096,1,{[1000, 500, 300][i % 3]}\n" for i in range(30)))
    out = tmp_path / "out"
    args = ["bench", "alibaba", "--nodes", str(nodes), "--pods", str(pods), "--policies", "bestfit,fgd",
            "--seeds", "1-2", "-q", "-o", str(out)]
    assert main(args) == 0
    header = (out / "runs.csv").read_text().splitlines()[0].split(",")
    assert {"policy", "seed", "arrived_pct", "allocation_pct", "unallocated_gpus", "fragmentation_pct",
            "seconds"} <= set(header)
    assert (out / "allocation.png").stat().st_size > 0 and (out / "summary.md").is_file()
    with open(out / "runs.csv", newline="") as fh:
        online = list(csv.DictReader(fh))
    assert all(r["mig_compute_pct"] == "" and r["gangs_placed"] == "" for r in online)  # not applicable online
    marker = out / "runs" / "online-fgd-1.json"
    data = json.loads(marker.read_text())
    data["final"]["seconds"] = 12345.0
    marker.write_text(json.dumps(data))
    assert main(args) == 0  # resumed: the finished run is not redone
    assert json.loads(marker.read_text())["final"]["seconds"] == 12345.0


def test_bench_cli_bad_policy(tmp_path: Path) -> None:
    """An unknown policy is bad input (exit 2)."""
    nodes = tmp_path / "n.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\nn0,32000,131072,4,T4\n")
    pods = tmp_path / "p.csv"
    pods.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,1024,1,1000\n")
    assert main(["bench", "alibaba", "--nodes", str(nodes), "--pods", str(pods), "--policies", "nope",
                 "-o", str(tmp_path / "o")]) == 2


def test_bench_batch_protocol(tmp_path: Path) -> None:
    """The batch protocol plans the same pods with a capplan strategy and reports the bound."""
    nodes = tmp_path / "n.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\n" + "".join(f"n{i},32000,131072,2,T4\n" for i in range(2)))
    pods = tmp_path / "p.csv"
    pods.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\n" +
                    "".join(f"p{i},1000,1024,1,{[1000, 500][i % 2]}\n" for i in range(6)))
    out = tmp_path / "o"
    assert main(["bench", "alibaba", "--nodes", str(nodes), "--pods", str(pods), "--protocol", "batch",
                 "--policies", "greedy", "--seeds", "1", "-q", "-o", str(out)]) == 0
    with open(out / "runs.csv", newline="") as fh:
        rows = list(csv.reader(fh))
    header, row = rows[0], dict(zip(rows[0], rows[1], strict=True))
    assert header[-6:] == ["bound_pct", "mig_compute_pct", "mig_memory_pct", "gangs_total", "gangs_placed",
                           "gang_spread_mean"]
    assert row["protocol"] == "batch" and float(row["bound_pct"]) >= float(row["allocation_pct"])
    assert row["mig_compute_pct"] == "" and row["gangs_total"] == "0" and row["gang_spread_mean"] == ""
    assert "gangs placed/total" in (out / "summary.md").read_text()
