"""Generate the adversarial input corpus of issue 18 into a folder.

Usage: ``python tests/data/hostile/make_corpus.py OUT_DIR`` writes a folder per case with its
input files, and ``OUT_DIR/cases.json``: for each case the ``capplan`` arguments (paths relative to
the case's folder), the text the single error line must contain (the field, or the file, it is about)
and the output it must leave alone. ``tests/test_hostile.py`` builds the corpus in a temporary
folder and runs every case under a memory limit. Each case is derived from one small valid
input by a single hostile change, so the error it provokes is the one being tested.
"""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

SCENARIO: dict[str, Any] = {
    "cluster": {
        "levels": ["rack", "node"],
        "racks": [{"name": "r1", "power_kw": 50, "nodes": [
            {"name": "n1", "gpu": "H100-SXM5-80GB", "gpus": 8, "cpu": 64, "memory_gib": 512},
            {"name_prefix": "a", "count": 2, "gpu": "A100-SXM4-80GB", "gpus": 8, "cpu": 64, "memory_gib": 512},
        ]}],
    },
    "workloads": [
        {"name": "train", "kind": "training", "gpus": 8, "replicas": 1, "cpu": 8},
        {"name": "serve", "mig": "3g.40gb", "replicas": 2, "cpu": 2, "memory_gib": 8, "gpu_memory_gib": 20},
    ],
}

PLAN: dict[str, Any] = {"format_version": 1, "status": "feasible", "strategy": "greedy", "objective": [1.0],
                        "bound": [1.0], "priorities": [0], "assignments": []}

PLANNING = """\
name: lab
horizon: {start: 2027-01, periods: 6}
sites:
  - {name: site-1, power_kw: 400, rack_units: 400}
tiers:
  - {name: prod, kind: guaranteed}
classes:
  - {name: training, tier: prod, models: {H100-SXM5: 1.0}}
options:
  purchases:
    - {model: H100-SXM5, lead_time: 2, unit_cost: 25000, sites: [site-1]}
  reserved:
    - {model: H100-SXM5, term_periods: 3, price_per_gpu_hour: 2.5}
scenarios:
  - {name: base, probability: 1.0, demand: {training: 40}}
"""

NODES_CSV = "sn,cpu_milli,memory_mib,gpu,model\nnode-1,64000,262144,2,P100\n"
PODS_CSV = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\npod-1,1000,1024,1,1000\n"


def _k8s_nodes() -> dict[str, Any]:
    alloc = {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8"}
    return {"apiVersion": "v1", "kind": "List", "items": [{
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "gpu-0", "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                                                 "nvidia.com/gpu.count": "8"}},
        "status": {"capacity": dict(alloc), "allocatable": dict(alloc)}}]}


def _bomb(levels: int = 9, width: int = 10) -> str:
    """A billion-laughs list: ``width ** levels`` values once its aliases are expanded."""
    parts = [f"&l0 [{', '.join(['lol'] * width)}]"]
    parts += [f"&l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, levels)]
    return "[" + ", ".join(parts) + "]"


def _deep(depth: int = 100_000) -> str:
    return "[" * depth + "]" * depth


def _scenario(change: Callable[[dict[str, Any]], None]) -> str:
    data = copy.deepcopy(SCENARIO)
    change(data)
    return yaml.safe_dump(data, sort_keys=False)


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """A change that sets one field, addressed like ``workloads.0.replicas``."""
    def change(data: dict[str, Any]) -> None:
        *head, last = path.split(".")
        node: Any = data
        for part in head:
            node = node[int(part)] if part.isdigit() else node[part]
        node[int(last) if last.isdigit() else last] = value
    return change


NODE0 = "cluster.racks.0.nodes.0"
GROUP = "cluster.racks.0.nodes.1"
YAML_HEAD = "cluster:\n  levels: [node]\n  nodes:\n"


def cases() -> list[dict[str, Any]]:
    """Every case: name, files to write, command (with ``{out}`` for the output), expected text."""
    c: list[dict[str, Any]] = []

    def plan(name: str, text: str | bytes, expect: str, ext: str = "yaml", extra: tuple[str, ...] = ()) -> None:
        c.append({"name": name, "files": {f"{name}.{ext}": text}, "output": "plan.json",
                  "argv": ["plan", f"{name}.{ext}", "--strategy", "greedy", *extra, "-o", "{out}"],
                  "expect": expect})

    # 1. limits: nothing is expanded before it is checked
    plan("group-count-1e9", _scenario(_set(f"{GROUP}.count", 10**9)), "cluster.racks[0].nodes[1].count")
    plan("replicas-1e9", _scenario(_set("workloads.0.replicas", 10**9)), "workloads[0].replicas")
    plan("gpus-1e9", _scenario(_set(f"{NODE0}.gpus", 10**9)), "nodes[0].gpus")
    plan("total-replicas", _scenario(lambda d: d.update(workloads=[
        {"name": f"w{i}", "cpu": 1, "replicas": 1_000_000} for i in range(3)])), "workloads[2].replicas")
    plan("alias-bomb-name", YAML_HEAD + f"  - {{name: {_bomb()}, cpu: 1, memory_gib: 1}}\n",
         "cluster.nodes[0].name")
    plan("alias-bomb-cpu", YAML_HEAD + f"  - {{name: n1, cpu: {_bomb()}, memory_gib: 1}}\n",
         "cluster.nodes[0].cpu")
    plan("deep-yaml", "description: " + _deep() + "\n", "description[0]")
    plan("deep-json", '{"description": ' + _deep() + "}", "nested deeper than the limit", ext="json")
    plan("huge-file", b"# " + b"x" * (64 * 1024 * 1024) + b"\n", "larger than the limit")
    # 2. strict types
    plan("duplicate-key", yaml.safe_dump(SCENARIO, sort_keys=False) + "workloads: []\n", "workloads: duplicate key")
    plan("name-null", _scenario(_set(f"{NODE0}.name", None)), "nodes[0].name")
    plan("name-list", _scenario(_set(f"{NODE0}.name", [1, 2])), "nodes[0].name")
    plan("replicas-string", _scenario(_set("workloads.1.replicas", "3")), "workloads[1].replicas")
    plan("preemptible-yes", _scenario(_set("workloads.1.preemptible", "yes")), "workloads[1].preemptible")
    plan("workload-name-empty", _scenario(_set("workloads.1.name", "")), "workloads[1].name")
    plan("node-cpu-nan", _scenario(_set(f"{NODE0}.cpu", float("nan"))), "nodes[0].cpu")
    plan("rack-power-inf", _scenario(_set("cluster.racks.0.power_kw", float("inf"))), "racks[0].power_kw")
    plan("workload-cpu-inf", _scenario(_set("workloads.0.cpu", float("-inf"))), "workloads[0].cpu")
    plan("gpu-memory-nan", _scenario(_set("workloads.1.gpu_memory_gib", float("nan"))), "workloads[1].gpu_memory_gib")
    plan("migration-cost-1e30", _scenario(_set("workloads.1.migration_cost", 10**30)), "workloads[1].migration_cost")
    plan("python-tag", "cluster: !!python/object/apply:os.system ['true']\n", "unsupported YAML tag")
    plan("empty-file", "", "got an empty file")
    plan("not-a-mapping", "- just\n- a list\n", "got a list")
    # 3. decoding of every input path
    plan("scenario-utf8", yaml.safe_dump(SCENARIO).replace("train", "tr\udcffn").encode("utf-8", "surrogateescape"),
         "not valid UTF-8")
    c.append({"name": "catalog-utf8", "files": {"ok.yaml": yaml.safe_dump(SCENARIO), "cat.yaml": b"models: \xff\n"},
              "argv": ["plan", "ok.yaml", "--catalog", "cat.yaml", "-o", "{out}"], "output": "plan.json",
              "expect": "catalog file cat.yaml is not valid UTF-8"})
    for name, nodes, pods, expect in (
        ("trace-1e400", NODES_CSV.replace("64000", "1e400"), PODS_CSV, "cpu_milli"),
        ("trace-utf8", NODES_CSV.encode() + b"node-\xfe,1,1,0,\n", PODS_CSV, "not valid UTF-8"),
    ):
        c.append({"name": name, "files": {f"{name}-nodes.csv": nodes, f"{name}-pods.csv": pods},
                  "argv": ["import", "alibaba", f"{name}-nodes.csv", f"{name}-pods.csv", "-o", "{out}"],
                  "output": "scenario.yaml", "expect": expect})
    k8s_gpus, k8s_cpu = _k8s_nodes(), _k8s_nodes()
    k8s_gpus["items"][0]["status"]["allocatable"]["nvidia.com/gpu"] = "1000000000"
    k8s_gpus["items"][0]["metadata"]["labels"]["nvidia.com/gpu.count"] = "1000000000"
    k8s_cpu["items"][0]["status"]["allocatable"]["cpu"] = "1e400"
    for name, doc, expect in (("k8s-gpus-1e9", json.dumps(k8s_gpus), "nvidia.com/gpu.count"),
                              ("k8s-cpu-1e400", json.dumps(k8s_cpu), "allocatable.cpu"),
                              ("k8s-utf8", json.dumps(_k8s_nodes()).encode().replace(b"gpu-0", b"gpu-\xc3"),
                               "not valid UTF-8"),
                              ("k8s-deep", '{"items": ' + _deep() + "}", "nested deeper than the limit")):
        c.append({"name": name, "files": {f"{name}.json": doc},
                  "argv": ["import", "kubernetes", "--nodes", f"{name}.json", "-o", "{out}"],
                  "output": "scenario.yaml", "expect": expect})
    for name, doc, expect in (
        ("plan-nan-objective", json.dumps(PLAN).replace("[1.0]", "[NaN]", 1), "objective[0]"),
        ("plan-utf8", json.dumps(PLAN).encode().replace(b"greedy", b"gr\xffedy"), "not valid UTF-8"),
        ("plan-deep", '{"metrics": {"x": ' + _deep(200) + "}}", "metrics.x[0]"),
        ("plan-not-object", "[]", "a plan is a JSON object"),
    ):
        c.append({"name": name, "files": {"ok.yaml": yaml.safe_dump(SCENARIO), f"{name}.json": doc},
                  "argv": ["validate", "ok.yaml", f"{name}.json"], "output": None, "expect": expect})
    for name, text, expect in (
        ("planning-misspelled", PLANNING.replace("term_periods", "term_period"), "did you mean 'term_periods'"),
        ("planning-nan-demand", PLANNING.replace("training: 40", "training: .nan"), "demand.training"),
        ("planning-unknown-class", PLANNING.replace("training: 40", "trainng: 40"), "did you mean 'training'"),
        ("planning-utf8", PLANNING.encode().replace(b"lab", b"l\xe9b"), "not valid UTF-8"),
        ("planning-empty", "# nothing here\n", "got an empty file"),
    ):
        c.append({"name": name, "files": {f"{name}.yaml": text}, "output": "reserve-out/",
                  "argv": ["reserve", f"{name}.yaml", "-o", "{out}"], "expect": expect})
    # output paths refused before the solve starts
    c.append({"name": "output-is-folder", "files": {"ok.yaml": yaml.safe_dump(SCENARIO)}, "output": "folder/",
              "argv": ["plan", "ok.yaml", "-o", "{out}"], "expect": "is a folder"})
    c.append({"name": "output-below-file", "files": {"ok.yaml": yaml.safe_dump(SCENARIO), "afile": "x"},
              "output": None, "argv": ["plan", "ok.yaml", "-o", "afile/plan.json"], "expect": "is a file"})
    c.append({"name": "output-unwritable", "files": {"ok.yaml": yaml.safe_dump(SCENARIO)}, "output": None,
              "argv": ["plan", "ok.yaml", "-o", "/proc/capplan-plan.json"], "expect": "cannot write in /proc"})
    # options
    for name, argv, expect in (("time-limit-inf", ["--time-limit", "inf"], "--time-limit"),
                               ("time-limit-nan", ["--time-limit", "nan"], "--time-limit"),
                               ("workers-0", ["--workers", "0"], "--workers"),
                               ("seed-1e20", ["--seed", "100000000000000000000"], "--seed")):
        c.append({"name": name, "files": {"ok.yaml": yaml.safe_dump(SCENARIO)}, "output": "plan.json",
                  "argv": ["plan", "ok.yaml", *argv, "-o", "{out}"], "expect": expect})
    return c


def write(out: Path) -> list[dict[str, Any]]:
    """Write the corpus into ``out``, one folder per case; return the cases (also in ``out/cases.json``)."""
    out.mkdir(parents=True, exist_ok=True)
    listed = []
    for case in cases():
        (out / case["name"]).mkdir(exist_ok=True)
        for name, content in case.pop("files").items():
            data = content if isinstance(content, bytes) else content.encode("utf-8")
            (out / case["name"] / name).write_bytes(data)
        listed.append(case)
    (out / "cases.json").write_text(json.dumps(listed, indent=1) + "\n", encoding="utf-8")
    return listed


if __name__ == "__main__":
    print(f"{len(write(Path(sys.argv[1])))} cases in {sys.argv[1]}")
