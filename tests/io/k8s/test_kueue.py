"""``capplan import kueue``, ``schedule --policy kueue`` and ``export kueue-eta`` on the fixture cluster.

The fixture (tests/data/k8s/kueue, see make_fixtures.py) at now = 2026-03-02T01:40:00Z: racks rack-1, rack-2 of
four 8 x H100 nodes, rack-3 of two 8 x A100 nodes; team-a (StrictFIFO; 16 H100 lending 8, 8 A100) and team-b
(BestEffortFIFO; 16 H100, borrowing at most 8) in cohort research. Running: train-a1 (2 x 8 H100 on rack-1, 4 h
limit, admitted 2 h ago: 2 h left), eval-a2 (4 H100, expected 3 h, admitted 1 h ago: 2 h left), train-b1 (8 H100,
--default-duration team-b=4h, admitted 30 min ago: 3 h 30 min left).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from capplan.cli.main import main
from capplan.io.k8s.eta import estimates, prometheus_text
from capplan.io.k8s.kueue import import_kueue, parse_time
from capplan.io.scenario import load_scenario
from capplan.model.catalog import load_catalog
from capplan.model.schedule import Schedule
from tests.io.k8s import upstream as U

KQ = Path(__file__).parents[2] / "data" / "k8s" / "kueue"
NOW = "2026-03-02T01:40:00Z"
FILES = ("workloads", "cluster-queues", "local-queues", "priority-classes")


def doc(name: str) -> dict[str, Any]:
    return json.loads((KQ / f"{name}.json").read_text())  # type: ignore[no-any-return]


def created(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` as a client would create it: the server-set metadata fields dropped."""
    out = dict(obj)
    out["metadata"] = {k: v for k, v in obj["metadata"].items() if k in ("name", "namespace", "labels", "annotations")}
    return out


@pytest.mark.parametrize("release", ["v0.15.8", "v0.19.2"])
def test_fixtures_pass_the_stored_crds(release: str) -> None:
    """Every Kueue object of the fixture is accepted by the API server of both releases (schema and CEL)."""
    crds = U.crds("kueue", release)
    for name in FILES:
        for it in doc(name)["items"]:
            assert U.api_server_errors(created(it), crds[it["kind"]]) == [], (name, it["metadata"]["name"])


def imported() -> Any:
    return import_kueue(doc("nodes"), doc("pods"), doc("workloads"), doc("cluster-queues"), doc("local-queues"),
                        doc("priority-classes"), [], load_catalog(), parse_time(NOW, "now"), {"team-b": 4 * 3600})


def test_import_queues_flavors_and_workloads() -> None:
    res = imported()
    p = res.problem
    assert p.now == NOW and p.cluster.levels == ("block", "rack", "node")  # levels from the TAS Topology
    qa, qb = p.queues
    assert (qa.name, qa.strategy, qa.cohort, qb.strategy) == ("team-a", "StrictFIFO", "research", "BestEffortFIFO")
    gpu = [(e.flavor, e.nominal, e.borrowing_limit, e.lending_limit)
           for e in qa.quotas if e.resource == "nvidia.com/gpu"]
    assert gpu == [("h100", 16, None, 8), ("a100", 8, None, None)]
    assert [(e.resource, e.nominal) for e in qb.quotas if e.flavor == "default-cpu"] == [("cpu", 512), ("memory", 4096)]
    flavors = {f.name: f for f in p.flavors}
    assert flavors["h100"].topology == "default" and len(flavors["h100"].nodes or ()) == 8
    assert flavors["a100"].nodes == ("a100-r3-0", "a100-r3-1") and flavors["default-cpu"].nodes is None
    w = {x.name: x for x in p.workloads}
    a3 = w["team-a/train-a3"]
    assert (a3.queue, a3.priority, a3.created, a3.duration, a3.replicas, a3.topology.required) == (
        "team-a", 1000, -2400, 7200, 2, "rack")
    assert (w["team-b/infer-b2"].duration, w["team-b/big-b3"].duration) == (2700, 10800)
    ends = {(e.workload, e.replica): e.ends_in for e in p.ends_in}
    assert ends == {("team-a/train-a1", 0): 7200, ("team-a/train-a1", 1): 7200, ("team-a/eval-a2", 0): 7200,
                    ("team-b/train-b1", 0): 12600}
    assert res.meta["kueue"]["team-a/train-a3"]["name"].startswith("job-train-a3-")


def run_cli(tmp_path: Path, *extra: str) -> tuple[Path, Path]:
    scen, sched = tmp_path / "kq.yaml", tmp_path / "kueue.json"
    args = ["import", "kueue", "--nodes", str(KQ / "nodes.json"), "--pods", str(KQ / "pods.json"),
            *(x for f in FILES for x in (f"--{f}", str(KQ / f"{f}.json"))), "--now", NOW,
            "--default-duration", "team-b=4h", "-o", str(scen)]
    assert main(args) == 0
    assert main(["schedule", str(scen), "--policy", "kueue", "--horizon", "2d", "-q", "-o", str(sched), *extra]) == 0
    return scen, sched


def test_kueue_schedule_and_estimates(tmp_path: Path) -> None:
    """Hand-worked: at 0 team-a uses 20 H100 (16 + 4; 12 of them from the cohort pool of 8 + 16 = 24) and
    team-b 8 (+ infer-b2's 4, admitted at once: it fits its quota and the pool). train-a3 (16, rack) would
    take the pool to 36: it waits until train-a1 and eval-a2 end at 2 h (03:40); tune-a4 waits behind it
    (StrictFIFO). big-b3 (24) fits team-b's 16 + 8 once train-b1 ends at 3 h 30, but the pool then holds
    train-a3's 16 - 8 kept = 8, with big-b3's 24: 32 > 24; it starts when train-a3 ends at 4 h (05:40)."""
    scen, sched_path = run_cli(tmp_path)
    p = load_scenario(scen)
    s = Schedule.from_data(json.loads(sched_path.read_text()))
    meta = json.loads((tmp_path / "kq.k8s.json").read_text())
    rows = {r.name.split("-")[1]: r for r in estimates(p, s, meta["kueue"])}
    assert {k: (r.wait_s, r.position, r.cluster_queue) for k, r in rows.items()} == {
        "train": (7200, 1, "team-a"), "tune": (7200, 2, "team-a"), "infer": (0, 2, "team-b"),
        "big": (14400, 1, "team-b")}
    assert rows["train"].reason.startswith("quota: team-a has 20 GPUs (h100) in use and its cohort research")
    assert rows["train"].reason.endswith("until 03:40 UTC")
    assert rows["tune"].reason == "queue: behind team-a/train-a3 in StrictFIFO ClusterQueue team-a until 03:40 UTC"
    assert rows["big"].reason.endswith("until 05:40 UTC") and rows["infer"].reason == "starts now"


@pytest.mark.parametrize("release", ["v0.15.8", "v0.19.2"])
def test_patches_apply_to_the_workloads(tmp_path: Path, release: str) -> None:
    """Each patch names a fixture Workload; the Workload with the patch's annotations merged is still valid."""
    scen, sched = run_cli(tmp_path)
    out = tmp_path / "eta.json"
    assert main(["export", "kueue-eta", str(scen), str(sched), "-o", str(out)]) == 0
    patches = json.loads(out.read_text())
    assert patches["kind"] == "List" and len(patches["items"]) == 4
    live = {(w["metadata"]["namespace"], w["metadata"]["name"]): w for w in doc("workloads")["items"]}
    crd = U.crds("kueue", release)["Workload"]
    for patch in patches["items"]:
        assert set(patch) == {"apiVersion", "kind", "metadata"} and set(patch["metadata"]) == {
            "name", "namespace", "annotations"}
        merged = copy.deepcopy(live[(patch["metadata"]["namespace"], patch["metadata"]["name"])])
        merged["apiVersion"] = patch["apiVersion"]
        merged["metadata"].setdefault("annotations", {}).update(patch["metadata"]["annotations"])
        assert U.api_server_errors(created(merged), crd) == []
        ann = patch["metadata"]["annotations"]
        assert parse_time(ann["capplan.io/estimated-start"], "x") >= parse_time(NOW, "now")


def test_prometheus_exposition_parses(tmp_path: Path) -> None:
    parser = pytest.importorskip("prometheus_client.parser")
    scen, sched = run_cli(tmp_path)
    out = tmp_path / "eta.prom"
    assert main(["export", "kueue-eta", str(scen), str(sched), "-o", str(out), "--format", "prometheus"]) == 0
    fams = {f.name: f for f in parser.text_string_to_metric_families(out.read_text())}
    assert set(fams) == {"capplan_workload_estimated_start_timestamp_seconds",
                         "capplan_workload_estimated_wait_seconds"}
    waits = {s.labels["name"].split("-")[1]: s.value for s in fams["capplan_workload_estimated_wait_seconds"].samples}
    assert waits == {"train": 7200, "tune": 7200, "infer": 0, "big": 14400}
    start = fams["capplan_workload_estimated_start_timestamp_seconds"]
    assert start.type == "gauge" and {s.labels["cluster_queue"] for s in start.samples} == {"team-a", "team-b"}


def test_prometheus_escapes_and_infinite_wait() -> None:
    from capplan.io.k8s.eta import Estimate

    parser = pytest.importorskip("prometheus_client.parser")
    text = prometheus_text([Estimate(namespace='a"b', name="w\\1", cluster_queue="q", position=1, start=None,
                                     wait_s=None, reason="no room")])
    (fam,) = [f for f in parser.text_string_to_metric_families(text) if f.samples]
    assert fam.samples[0].labels == {"namespace": 'a"b', "name": "w\\1", "cluster_queue": "q"}
    assert fam.samples[0].value == float("inf")


def test_bad_now_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["import", "kueue", "--nodes", str(KQ / "nodes.json"), "--workloads", str(KQ / "workloads.json"),
            "--cluster-queues", str(KQ / "cluster-queues.json"), "--now", "yesterday", "-o", str(tmp_path / "x.yaml")]
    assert main(args) == 2
    assert "--now" in capsys.readouterr().err and not (tmp_path / "x.yaml").exists()


def test_duration_spread_gives_expected_times(tmp_path: Path) -> None:
    """``--duration-spread team-b=0.5``: team-b's run times are believed up to a lognormal error of sigma 0.5,
    team-a's are exact (unchanged). Pending: infer-b2 2700 x exp(-0.125) = 2382.7, big-b3 10800 x 0.882497 =
    9531.0. Running train-b1 (4 h, admitted 30 min ago): a = (log(1800 / 14400) + 0.25) / 0.5 = -3.659, so
    survival hardly matters: E[D | D > 1800] = 12708.0 x Phi(4.159) / Phi(3.659) = 12709.4, 10909 s left."""
    scen = tmp_path / "kq.yaml"
    args = ["import", "kueue", "--nodes", str(KQ / "nodes.json"), "--pods", str(KQ / "pods.json"),
            *(x for f in FILES for x in (f"--{f}", str(KQ / f"{f}.json"))), "--now", NOW,
            "--default-duration", "team-b=4h", "--duration-spread", "team-b=0.5", "-o", str(scen)]
    assert main(args) == 0
    p = load_scenario(scen)
    w = {x.name: x for x in p.workloads}
    assert (w["team-a/train-a3"].duration, w["team-b/infer-b2"].duration, w["team-b/big-b3"].duration) == (
        7200, 2383, 9531)
    ends = {(e.workload, e.replica): e.ends_in for e in p.ends_in}
    assert ends[("team-a/train-a1", 0)] == 7200 and ends[("team-a/eval-a2", 0)] == 7200
    assert abs(ends[("team-b/train-b1", 0)] - 10909) <= 2


@pytest.mark.parametrize("bad", ["-1", "x", "team-b=", "9"])
def test_bad_duration_spread_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: str) -> None:
    args = ["import", "kueue", "--nodes", str(KQ / "nodes.json"), "--workloads", str(KQ / "workloads.json"),
            "--cluster-queues", str(KQ / "cluster-queues.json"), "--now", NOW, "--duration-spread", bad,
            "-o", str(tmp_path / "x.yaml")]
    assert main(args) == 2
    assert "--duration-spread" in capsys.readouterr().err and not (tmp_path / "x.yaml").exists()


def test_running_replicas_carry_how_long_they_ran() -> None:
    """Admitted Workloads' replicas get ``elapsed`` (now - admission) beside ``ends_in``; the scenario file keeps
    it (written and read back)."""
    from capplan.io.scenario import problem_from_data, problem_to_data

    p = imported().problem
    el = {(e.workload, e.replica): e.elapsed for e in p.ends_in}
    assert all(v is not None and v >= 0 for v in el.values())
    assert {e.workload: e.ends_in + (e.elapsed or 0) for e in p.ends_in}["team-a/train-a1"] == 7200 + el[
        ("team-a/train-a1", 0)]
    back = problem_from_data(problem_to_data(p))
    assert {(e.workload, e.replica): e.elapsed for e in back.ends_in} == el


def test_sampled_estimates_at_zero_spread_are_the_simulation(tmp_path: Path) -> None:
    """``--samples`` with no spread draws every run time as believed: each median start is the single
    simulation's start, and export kueue-eta gives the same waits as without samples."""
    scen, sched_path = run_cli(tmp_path, "--samples", "3")
    p = load_scenario(scen)
    s = Schedule.from_data(json.loads(sched_path.read_text()))
    assert s.metrics["kueue_eta"]["samples"] == 3
    meta = json.loads((tmp_path / "kq.k8s.json").read_text())
    rows = {r.name.split("-")[1]: r.wait_s for r in estimates(p, s, meta["kueue"])}
    assert rows == {"train": 7200, "tune": 7200, "infer": 0, "big": 14400}


def test_sampled_estimates_under_a_spread_are_seeded_medians(tmp_path: Path) -> None:
    """With a spread the medians move off the believed-time simulation; the same seed gives the same estimates,
    and the estimates the export writes are the medians."""
    scen, first = run_cli(tmp_path, "--samples", "5", "--duration-spread", "0.5", "--seed", "7")
    again = tmp_path / "again.json"
    assert main(["schedule", str(scen), "--policy", "kueue", "--horizon", "2d", "-q", "-o", str(again),
                 "--samples", "5", "--duration-spread", "0.5", "--seed", "7"]) == 0
    a, b = (json.loads(x.read_text())["metrics"]["kueue_eta_s"] for x in (first, again))
    assert a == b
    p = load_scenario(scen)
    s = Schedule.from_data(json.loads(first.read_text()))
    meta = json.loads((tmp_path / "kq.k8s.json").read_text())
    est = {r.name.split("-")[1]: r.wait_s for r in estimates(p, s, meta["kueue"])}
    names = {w.name.split("/")[1].split("-")[1]: w.name for w in p.workloads if w.name in a}
    assert all(est[k] == a[names[k]] for k in est if k in names)
    assert est != {"train": 7200, "tune": 7200, "infer": 0, "big": 14400}  # the spread moves them


@pytest.mark.parametrize("extra", [["--samples", "3"], ["--duration-spread", "0.5"],
                                   ["--policy", "kueue", "--duration-spread", "9", "--samples", "2"]])
def test_sampling_flags_need_the_kueue_policy_and_each_other(tmp_path: Path, extra: list[str]) -> None:
    scen, _ = run_cli(tmp_path)
    out = tmp_path / "x.json"
    assert main(["schedule", str(scen), "--horizon", "2d", "-q", "-o", str(out), *extra]) == 2
    assert not out.exists()
