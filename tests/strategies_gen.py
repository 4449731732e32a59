"""Hypothesis strategies generating random small but rich placement scenarios."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

MODELS = {"H100-SXM5-80GB": ["1g.10gb", "2g.20gb", "3g.40gb", "7g.80gb"], "A100-SXM4-80GB": ["1g.10gb", "3g.40gb"],
          "A30-24GB": ["1g.6gb", "2g.12gb"], "T4-16GB": [], "MI300X-192GB": ["CPX", "QPX", "DPX"]}


@st.composite
def node_entry(draw: st.DrawFn, name: str) -> dict[str, Any]:
    """A node: a GPU model (or CPU-only), GPU count, CPU, memory, maybe preset GPU modes."""
    model = draw(st.sampled_from([*MODELS, None]))
    e: dict[str, Any] = {"name": name, "cpu": draw(st.sampled_from([8, 32, 64])),
                         "memory_gib": draw(st.sampled_from([64, 256, 1024]))}
    if model:
        gpus = draw(st.sampled_from([1, 2, 4, 8]))
        e.update(gpu=model, gpus=gpus)
        if draw(st.booleans()) and gpus > 1:
            mode = draw(st.sampled_from(["whole", "shared"] + (["mig"] if MODELS[model] else [])))
            e["gpu_modes"] = [{"gpus": [0], "mode": mode}]
    return e


@st.composite
def workload_entry(draw: st.DrawFn, name: str, levels: list[str]) -> dict[str, Any]:
    """A workload with a random demand kind, size, gang/topology, tenant, isolation, priority and SLA."""
    kind = draw(st.sampled_from(["gpus", "mig", "fraction", "cpu"]))
    w: dict[str, Any] = {"name": name, "replicas": draw(st.integers(1, 4)),
                         "cpu": draw(st.sampled_from([0, 1, 4, 16])),
                         "memory_gib": draw(st.sampled_from([0, 8, 64])),
                         "priority": draw(st.sampled_from([0, 10, 100])),
                         "tenant": draw(st.sampled_from(["a", "b"])),
                         "isolation": draw(st.sampled_from(["none", "none", "tenant", "node"]))}
    if kind == "gpus":
        w["gpus"] = draw(st.sampled_from([1, 2, 4, 8]))
        if draw(st.booleans()):
            w["kind"] = "training"
    elif kind == "mig":
        model = draw(st.sampled_from([m for m in MODELS if MODELS[m]]))
        w["mig"] = draw(st.sampled_from([*MODELS[model], "auto"]))
        if w["mig"] == "auto":
            w["gpu_memory_gib"] = draw(st.sampled_from([5, 10, 30]))
        else:
            w["gpu_models"] = [model]
    elif kind == "fraction":
        w.update(kind="shared", gpu_fraction=draw(st.sampled_from([0.1, 0.25, 0.5, 0.7])),
                 gpu_memory_gib=draw(st.sampled_from([0, 4, 12])))
    if w["cpu"] == 0 and w["memory_gib"] == 0:
        w["cpu"] = 1
    if len(levels) > 1 and draw(st.integers(0, 3)) == 0:
        w["topology"] = {draw(st.sampled_from(["required", "preferred"])): draw(st.sampled_from(levels))}
    if draw(st.integers(0, 4)) == 0:
        w["sla"] = "guaranteed"
    if draw(st.booleans()):
        w["preemptible"] = True
    return w


@st.composite
def scenario_data(draw: st.DrawFn) -> dict[str, Any]:
    """A whole scenario: 1-3 racks of 1-3 nodes (maybe power-capped), 1-6 workloads."""
    racks = []
    k = 0
    for r in range(draw(st.integers(1, 3))):
        nodes = []
        for _ in range(draw(st.integers(1, 3))):
            k += 1
            nodes.append(draw(node_entry(f"n{k}")))
        rack: dict[str, Any] = {"name": f"r{r}", "nodes": nodes}
        if draw(st.integers(0, 3)) == 0:
            rack["power_kw"] = draw(st.sampled_from([1, 3, 10]))
        racks.append(rack)
    levels = ["rack", "node"]
    workloads = [draw(workload_entry(f"w{i}", levels)) for i in range(draw(st.integers(1, 6)))]
    return {"cluster": {"name": "h", "levels": levels, "racks": racks}, "workloads": workloads}


@st.composite
def quota_section(draw: st.DrawFn, data: dict[str, Any]) -> dict[str, Any]:
    """Kueue quotas for ``data``: 1-3 ClusterQueues (maybe in a cohort, with borrowing and lending limits) over
    a flavor of the first rack's nodes and one of every node, each workload in a queue or in none."""
    first = [n["name"] for n in data["cluster"]["racks"][0]["nodes"]]
    flavors = [{"name": "first", "nodes": first}, {"name": "all"}]
    queues = []
    for q in range(draw(st.integers(1, 3))):
        cohort = draw(st.sampled_from([None, "c"]))
        entries = []
        for flavor in draw(st.sampled_from([["first"], ["all"], ["first", "all"]])):
            for res, sizes in (("nvidia.com/gpu", [0, 1, 4, 8, 16]), ("cpu", [4, 16, 64]), ("memory", [64, 512])):
                e: dict[str, Any] = {"flavor": flavor, "resource": res, "nominal": draw(st.sampled_from(sizes))}
                if cohort and draw(st.booleans()):
                    e["borrowing_limit"] = draw(st.sampled_from([0, 4]))
                if cohort and draw(st.booleans()):
                    e["lending_limit"] = min(e["nominal"], draw(st.sampled_from([0, 2])))
                entries.append(e)
            entries.append({"flavor": flavor, "resource": "amd.com/gpu", "nominal": draw(st.sampled_from([0, 8]))})
        queues.append({"name": f"q{q}", "strategy": draw(st.sampled_from(["StrictFIFO", "BestEffortFIFO"])),
                       "quotas": entries, **({"cohort": cohort} if cohort else {})})
    for w in data["workloads"]:
        queue = draw(st.sampled_from([None, *(q["name"] for q in queues)]))
        if queue:
            w["queue"] = queue
            w["created"] = -draw(st.integers(0, 3)) * 600
    return {"flavors": flavors, "queues": queues}
