"""The replica table: most replicas per reachable total value, checked against brute force."""

from __future__ import annotations

from itertools import product

from hypothesis import given, settings
from hypothesis import strategies as st

from capplan.placement.cpsat.index import build_index
from capplan.placement.cpsat.model import PlacementModel
from capplan.placement.cpsat.objective import build_stages
from capplan.placement.cpsat.tiebreak import knapsack_table, replica_table

from .conftest import ONE_WORKER, node, scenario

Range = tuple[int, int, int, bool]


def _brute(ranges: list[Range], free: int) -> dict[int, int]:
    """Total value -> most replicas, by enumerating every count of every workload."""
    choices = [[lo, hi] if gang else list(range(lo, hi + 1)) for _, lo, hi, gang in ranges]
    out: dict[int, int] = {}
    for counts in product(*choices):
        total = sum(c * v for c, (v, _, _, _) in zip(counts, ranges, strict=True))
        out[total] = max(out.get(total, -1), sum(counts) + free)
    return out


_range = st.tuples(st.sampled_from([500, 1000, 2100, 3000, 3500, 7000, 14000, 56000]),
                   st.integers(0, 2), st.integers(0, 4), st.booleans()).map(
    lambda t: (t[0], 0, t[2], True) if t[3] else (t[0], t[1], t[1] + t[2], False))


@settings(max_examples=150, deadline=None)
@given(st.lists(_range, min_size=1, max_size=4), st.integers(0, 3), st.integers(0, 80000))
def test_table_is_exact_and_tighten_is_a_valid_bound(ranges: list[Range], free: int, cap: int) -> None:
    per_unit = sum(hi for _, _, hi, _ in ranges) + free + 1
    table = knapsack_table(ranges, free, per_unit)
    assert table is not None
    brute = _brute(ranges, free)
    for total, reps in brute.items():
        assert total % table.step == 0 and table.best[total // table.step] == reps
    assert int((table.best >= 0).sum()) == len(brute)
    # any bound on the units (cap) and replicas: the tightened bound still holds every combination under it
    bound = cap * per_unit + per_unit - 1
    under = [u * per_unit + r for u, r in brute.items() if u <= cap]
    assert table.tighten(bound) == (max(under) if under else -1)
    assert table.tighten(bound) <= bound


def test_values_that_cannot_make_up_a_total_lower_the_units_and_the_replicas() -> None:
    """small-2's priority 10: 8 x 8 GPUs, a gang of 4 x 8, 2 x 2 GPUs, 6 x 0.5 GPU and 23 CPU pods.

    83 GPUs are only 6 x 8 + 32 + 6 x 0.5 (39 replicas with the CPU pods), although an LP
    allows a 40th; 7.5 GPUs cannot be made up at all (7 = 6 x 0.5 + 2 x 2, with 31 replicas).
    """
    gpu = 7000
    ranges: list[Range] = [(8 * gpu, 0, 8, False), (8 * gpu, 0, 4, True), (2 * gpu, 0, 2, False),
                           (gpu // 2, 0, 6, False)]
    per_unit = 44
    table = knapsack_table(ranges, 23, per_unit)
    assert table is not None
    assert table.tighten(83 * gpu * per_unit + 40) == 83 * gpu * per_unit + 39
    assert table.tighten(int(7.5 * gpu) * per_unit + 43) == 7 * gpu * per_unit + 31


def test_model_table_limits_each_workload_by_its_candidates() -> None:
    """A workload whose replicas exceed what its nodes take counts only what fits; a gang that cannot fit counts 0."""
    p = scenario([node("n1", gpus=4, cpu=64)],
                 [{"name": "big", "gpus": 4, "replicas": 3, "priority": 5, "cpu": 1},
                  {"name": "gang", "kind": "training", "gpus": 4, "replicas": 2, "priority": 5, "cpu": 1},
                  {"name": "cpu", "replicas": 2, "priority": 5, "cpu": 1}])
    pm = PlacementModel(build_index(p, ONE_WORKER))
    stage = next(s for s in build_stages(pm) if s.priority == 5)
    table = replica_table(pm, 5, stage.per_unit)
    assert table is not None
    # at most one "big" on the single 4-GPU node (its count variable's bound), the gang never (2 x 4 > 4)
    assert table.tighten(10**9) == 4 * 7000 // table.step * table.step * stage.per_unit + 1 + 2
