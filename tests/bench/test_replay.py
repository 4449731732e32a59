"""The replay protocol: hand-worked waits per policy, trace selection, determinism, CLI errors."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from capplan.bench.replay.protocol import REPLAY_POLICIES, load_replay, replay_metrics, run_replay, wait_cdf
from capplan.cli.main import main
from capplan.io.alibaba import TraceNode, TracePod
from capplan.model.errors import InputError

NODE = TraceNode("n0", 16000, 65536, 2, "T4")


def pod(name: str, gpus: int, arrive: int, run: int, milli: int = 1000) -> TracePod:
    """A pod created at ``arrive``, scheduled then in the trace, deleted ``run`` seconds later."""
    return TracePod(name, 1000, 1024, gpus, milli if gpus else 0, creation_time=arrive, deletion_time=arrive + run,
                    scheduled_time=arrive)


# One node with 2 GPUs.  A (1 GPU, 0-100) runs; B (2 GPUs, arrives 10, 80 s) waits for both GPUs;
# C (1 GPU, arrives 20, 30 s) fits beside A at once; D (1 GPU, arrives 30, 120 s) fits when C ends at 50.
# An end-of-trace marker pod (E) far later keeps A..D from counting as still running at the end.
TRACE = [pod("A", 1, 0, 100), pod("B", 2, 10, 80), pod("C", 1, 20, 30), pod("D", 1, 30, 120),
         pod("E", 0, 10_000, 10)]


def waits(policy: str, every: float = 25, trace: list[TracePod] = TRACE, nodes: list[TraceNode] | None = None,
          seed: int = 0) -> list[int]:
    tr = load_replay(nodes or [NODE], trace)
    run = run_replay(tr, policy, seed, replan_every=every)
    return [int(x) for x in run.start - tr.arrival]


def test_fifo_does_not_block_behind_the_head() -> None:
    # kube-scheduler: B does not fit and is set aside; C starts at 20 (beside A), D at 50 when C ends,
    # so B needs both GPUs free: A ends at 100 but D holds one until 170. B waits 160.
    for policy in ("fifo-bestfit", "fifo-fgd"):
        assert waits(policy) == [0, 160, 0, 20, 0], policy


def test_easy_backfills_only_what_does_not_delay_the_head() -> None:
    # B is the head, reserved at 100 (A's known end) on n0. C ends at 50 <= 100: it backfills at 20.
    # D (ends 170 > 100 on the reserved node, where B needs both GPUs) must not start at 50; B starts at
    # 100 (wait 90), then D when B ends at 180 (wait 150).
    assert waits("easy-backfill") == [0, 90, 0, 150, 0]


def test_easy_backfills_on_another_node_past_the_reservation() -> None:
    # A second node with one GPU, held by Z until 40 (best fit puts Z there and A on n0). B's reservation
    # is on n0 at 100 (n1 can never host 2 GPUs). D ends at 160, past it, but when Z ends at 40 it may run
    # on n1, another node: it starts at 40 (wait 10) while B still starts at 100.
    other = TraceNode("n1", 16000, 65536, 1, "T4")
    trace = [pod("Z", 1, 0, 40), *TRACE]
    assert waits("easy-backfill", trace=trace, nodes=[NODE, other]) == [0, 0, 90, 0, 10, 0]


def test_capplan_keeps_the_planned_slot() -> None:
    # Re-plans every 25 s. t=0: A planned at 0. t=20: C starts by the fallback (nothing planned).
    # t=25: B planned at 100 (A's end) on both GPUs. t=30: D would end at 150, after B's planned start,
    # and B reserves both GPUs: it waits. t=50: re-plan of B and D (C ended): B at 100 then D at 180
    # (demand-weighted wait 2 x 50 + 130 = 230 s, against 2 x 120 = 240 s with D first; the engine's
    # most-work order finds it). t=100: the same again. Waits 90 and 150 (kube FIFO: 160 for B).
    assert waits("capplan-exact") == [0, 90, 0, 150, 0]


def test_capplan_fallback_uses_reserved_room_that_frees_in_time() -> None:
    # F (1 GPU, 20 s) arrives at 60, between re-plans: B is planned at 100 on both GPUs, but F ends at 80,
    # before that, so the fallback starts it at once on the free GPU; B and D keep their planned starts.
    trace = [*TRACE[:4], pod("F", 1, 60, 20), TRACE[4]]
    assert waits("capplan-exact", trace=trace) == [0, 90, 0, 150, 0, 0]


def test_selection_rules() -> None:
    never = TracePod("P", 1000, 1024, 1, 1000, creation_time=5, deletion_time=50)  # never scheduled
    late = TracePod("L", 1000, 1024, 1, 1000, creation_time=7, deletion_time=None, scheduled_time=9)
    huge = pod("H", 8, 3, 10)  # needs 8 GPUs: no node has them
    tr = load_replay([NODE], [*TRACE, never, late, huge])
    # censored: L (no deletion_time) and E (deleted at the last timestamp, 10,010 s)
    assert tr.counts == {"pods_in_file": 8, "excluded_never_scheduled": 1, "excluded_never_fits": 1,
                         "censored": 2, "pods_replayed": 6}
    assert [p.name for p in tr.trace_pods] == ["A", "B", "C", "D", "E", "L"]
    assert tr.duration[-1] == 10_010 - 9  # still running: until the trace end
    with pytest.raises(InputError, match="scheduled_time"):
        load_replay([NODE], [TracePod("x", 1000, 1024, 1, 1000)])


def test_metrics_by_shape_and_cdf() -> None:
    tr = load_replay([NODE], TRACE)
    m = replay_metrics(tr, run_replay(tr, "easy-backfill", 0))
    assert m["max_wait_s"] == 150 and m["waiting_over_1h"] == 0
    assert m["by_shape"]["multi-gpu"]["mean_wait_s"] == 90
    assert m["by_shape"]["whole-gpu"]["pods"] == 3
    cdf = wait_cdf(np.array([0, 0, 10, 100]))
    assert cdf[0] == (0.0, 0.5) and cdf[-1][1] == 1.0


def test_same_seed_same_replay() -> None:
    rng = np.random.default_rng(3)
    shapes = [(0, 0), (1, 300), (1, 1000), (2, 1000)]
    trace = []
    for k in range(30):
        gpus, milli = shapes[int(rng.integers(len(shapes)))]
        trace.append(pod(f"p{k}", gpus, int(rng.integers(0, 2000)), int(rng.integers(5, 600)), milli=milli))
    nodes = [NODE, TraceNode("n1", 8000, 32768, 1, "T4")]
    for policy in ("fifo-fgd", "capplan-noisy"):  # the ones with state (FGD caches) or randomness (estimates)
        a = waits(policy, every=100, trace=trace, nodes=nodes, seed=7)
        assert a == waits(policy, every=100, trace=trace, nodes=nodes, seed=7), policy
        assert min(a) >= 0 and max(a) > 0, policy
    # with exact run times neither the fallback nor early starts ever take a planned pod's room
    tr = load_replay(nodes, trace)
    for seed in range(3):
        run = run_replay(tr, "capplan-exact", seed, replan_every=100)
        assert run.metrics["overdue_retries"] == 0 and run.metrics["planned_starts"] > 0, seed


def _csvs(tmp: Path) -> tuple[Path, Path]:
    nodes, pods = tmp / "nodes.csv", tmp / "pods.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\nn0,16000,65536,2,T4\n")
    rows = ["name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
            "scheduled_time"]
    rows += [f"{p.name},{p.cpu_milli},{p.memory_mib},{p.num_gpu},{p.gpu_milli},,LS,Running,{p.creation_time},"
             f"{p.deletion_time},{p.scheduled_time}" for p in TRACE]
    pods.write_text("\n".join(rows) + "\n")
    return nodes, pods


def test_cli_replay_writes_tables_and_plots(tmp_path: Path) -> None:
    nodes, pods = _csvs(tmp_path)
    out = tmp_path / "out"
    code = main(["bench", "alibaba", "--nodes", str(nodes), "--pods", str(pods), "--protocol", "replay",
                 "--replan-every", "25s", "-q", "-o", str(out)])
    assert code == 0
    with open(out / "replay.csv", newline="") as fh:
        rows = {r["policy"]: r for r in csv.DictReader(fh)}
    assert set(rows) == set(REPLAY_POLICIES)
    assert rows["easy-backfill"]["max_wait_s"] == "150" and rows["fifo-bestfit"]["max_wait_s"] == "160"
    for name in ("replay_by_shape.csv", "replay_allocation.csv", "wait_cdf.png", "allocation_time.png",
                 "summary.md"):
        assert (out / name).stat().st_size > 0, name
    assert "Replay protocol" in (out / "summary.md").read_text()


@pytest.mark.parametrize(("flag", "value", "needle"), [
    ("--replan-every", "0", "--replan-every"), ("--replan-every", "soon", "--replan-every"),
    ("--fleet-fraction", "0", "--fleet-fraction"), ("--fleet-fraction", "1.5", "--fleet-fraction"),
    ("--noise-sigma", "-1", "--noise-sigma"), ("--policies", "fifo", "--policies")])
def test_cli_bad_input_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, value: str,
                               needle: str) -> None:
    nodes, pods = _csvs(tmp_path)
    out = tmp_path / "out"
    code = main(["bench", "alibaba", "--nodes", str(nodes), "--pods", str(pods), "--protocol", "replay",
                 flag, value, "-q", "-o", str(out)])
    assert code == 2
    err = capsys.readouterr().err
    assert needle in err and "error:" in err
    assert not (out / "replay.csv").exists()


def test_cli_refuses_runs_made_with_other_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nodes, pods = _csvs(tmp_path)
    out = tmp_path / "out"
    base = ["bench", "alibaba", "--nodes", str(nodes), "--pods", str(pods), "--protocol", "replay",
            "--policies", "easy-backfill", "-q", "-o", str(out)]
    assert main(base) == 0
    assert main(base) == 0  # same options: the finished run is reused
    assert main([*base, "--replan-every", "5m"]) == 2
    assert "other options" in capsys.readouterr().err


def test_cli_fleet_seed_keeps_one_fleet_across_seeds(tmp_path: Path) -> None:
    # Two nodes, half of them kept: without --fleet-seed each run seed draws its own node; with it every
    # seed replays on the node drawn with the fleet seed.
    nodes, pods = _csvs(tmp_path)
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\nn0,16000,65536,2,T4\nn1,16000,65536,4,T4\n")
    base = ["bench", "alibaba", "--nodes", str(nodes), "--pods", str(pods), "--protocol", "replay",
            "--policies", "fifo-bestfit", "--fleet-fraction", "0.5", "--seeds", "0-5", "-q"]

    def gpus(out: Path) -> dict[str, tuple[str, str]]:
        with open(out / "replay.csv", newline="") as fh:
            return {r["seed"]: (r["gpus"], r["fleet_seed"]) for r in csv.DictReader(fh)}

    assert main([*base, "-o", str(tmp_path / "a")]) == 0
    drawn = gpus(tmp_path / "a")
    assert {g for g, _ in drawn.values()} == {"2", "4"}  # the seeds draw both nodes
    assert all(fs == s for s, (_, fs) in drawn.items())
    assert main([*base, "--fleet-seed", "3", "-o", str(tmp_path / "b")]) == 0
    fixed = gpus(tmp_path / "b")
    assert set(fixed.values()) == {(drawn["3"][0], "3")}


def estimated_waits(trace: list[TracePod], nodes: list[TraceNode], estimates: list[int], every: float = 25,
                    seed: int = 0) -> tuple[list[int], dict[str, int]]:
    tr = load_replay(nodes, trace)
    run = run_replay(tr, "capplan-noisy", seed, replan_every=every, estimates=np.array(estimates))
    return [int(x) for x in run.start - tr.arrival], run.metrics


def test_capplan_starts_a_planned_pod_when_room_frees_before_its_estimate() -> None:
    # One node with 2 GPUs, re-plans every 25 s. A (2 GPUs, 0-40, believed 100) starts at 0; B (2 GPUs,
    # arrives 10, 50 s) waits. t=25: B planned at 100 (A's believed end). A ends at 40: B fits now beside
    # the (empty) rest of the plan and starts at once (wait 30), not at the next re-plan (50, wait 40).
    trace = [pod("A", 2, 0, 40), pod("B", 2, 10, 50), pod("E", 0, 10_000, 10)]
    w, m = estimated_waits(trace, [NODE], [100, 50, 10])
    assert w == [0, 30, 0]
    assert m["early_starts"] == 1 and m["slipped_pods"] == 0


def test_capplan_overdue_pod_takes_room_elsewhere() -> None:
    # Two nodes with 2 GPUs. A (2 GPUs, 0-100, believed 30) and Z (2 GPUs, 0-40) start at 0 on one node
    # each. B (2 GPUs, arrives 10, 50 s) is planned at t=25 on A's node at 30 (A's believed end); A runs
    # on, so B is overdue; when Z ends at 40 B starts on Z's node (wait 30) instead of waiting for the
    # re-plan at 50 (wait 40).
    other = TraceNode("n1", 16000, 65536, 2, "T4")
    trace = [pod("A", 2, 0, 100), pod("Z", 2, 0, 40), pod("B", 2, 10, 50), pod("E", 0, 10_000, 10)]
    for seed in range(3):  # whichever node A lands on
        w, m = estimated_waits(trace, [NODE, other], [30, 40, 50, 10], seed=seed)
        assert w == [0, 0, 30, 0], seed
        assert m["early_starts"] == 1 and m["overdue_retries"] >= 1, seed
        assert (m["slipped_pods"], m["max_slip_s"]) == (1, 10), seed  # first planned at 30, started at 40


def test_capplan_room_freed_early_goes_to_the_planned_pod_first() -> None:
    # As in the first case, plus C (1 GPU, 100 s) arriving at 40 when A ends: B (planned at the last
    # re-plan) gets the two GPUs first; C then waits for B (a newcomer does not jump the planned queue).
    trace = [pod("A", 2, 0, 40), pod("B", 2, 10, 50), pod("C", 1, 40, 100), pod("E", 0, 10_000, 10)]
    w, _ = estimated_waits(trace, [NODE], [100, 50, 100, 10])
    assert w[:2] == [0, 30] and w[2] == 50
