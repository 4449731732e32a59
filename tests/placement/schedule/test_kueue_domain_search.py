"""The Kueue simulation's domain search for gangs with a required level gives the greedy placer's own answer.

:class:`capplan.placement.schedule.kueue._DomainPlacer` tries only the domains that may hold the gang, in the
order of the whole GPUs its placement would leave; on random occupancies of a rack fleet (two GPU models, so
that ``within`` restricts the nodes) it must return exactly what :meth:`GreedyPlacer.place_in_one_domain`
returns, and leave the state as that does.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capplan.io.scenario import problem_from_data
from capplan.placement.core.state import ClusterState
from capplan.placement.greedy import GreedyPlacer
from capplan.placement.schedule.kueue import _DomainPlacer

MODELS = ("H100-SXM5-80GB", "A100-SXM4-80GB")


def fleet(busy: list[int], gpus: int, replicas: int, cpu: int, required: str) -> Any:
    """Four racks of four 8-GPU nodes (racks r0, r1 of one model, r2, r3 of the other); node k runs a filler
    holding ``busy[k]`` GPUs; the gang G asks ``replicas`` x ``gpus`` GPUs and ``cpu`` cores in one ``required``."""
    racks = [{"name": f"r{r}", "nodes": [{"name_prefix": f"r{r}n", "count": 4, "gpu": MODELS[r // 2], "gpus": 8,
                                          "cpu": 64, "memory_gib": 512}]} for r in range(4)]
    fillers = [{"name": f"F{k}", "gpus": b, "cpu": 8} for k, b in enumerate(busy) if b]
    running = [{"workload": f"F{k}", "replica": 0, "node": f"r{k // 4}n{k % 4 + 1}", "gpus": list(range(b))}
               for k, b in enumerate(busy) if b]
    gang = {"name": "G", "kind": "training", "replicas": replicas, "gpus": gpus, "cpu": cpu,
            "topology": {"required": required}}
    return problem_from_data({"cluster": {"levels": ["rack", "node"], "racks": racks},
                              "workloads": [*fillers, gang], "running": running})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(busy=st.lists(st.sampled_from([0, 0, 1, 2, 4, 6, 8]), min_size=16, max_size=16),
       gpus=st.sampled_from([1, 2, 4, 8]), replicas=st.integers(1, 5), cpu=st.sampled_from([1, 20, 40]),
       required=st.sampled_from(["rack", "node"]), model=st.sampled_from([None, *MODELS]),
       all_or_nothing=st.booleans())
def test_same_domain_as_the_greedy_placer(busy: list[int], gpus: int, replicas: int, cpu: int, required: str,
                                          model: str | None, all_or_nothing: bool) -> None:
    p = fleet(busy, gpus, replicas, cpu, required)
    w = p.workload("G")
    results = []
    for placer_cls in (GreedyPlacer, _DomainPlacer):
        state = ClusterState.with_assignments(p, p.running)
        within = None if model is None else state.model_nodes[model]
        placed = placer_cls(p, state).place_in_one_domain(w, replicas, required, None, all_or_nothing, within)
        results.append((placed, state.free_whole.copy(), state.cpu.copy()))
    (a, free_a, cpu_a), (b, free_b, cpu_b) = results
    assert a == b
    assert np.array_equal(free_a, free_b) and np.array_equal(cpu_a, cpu_b)
