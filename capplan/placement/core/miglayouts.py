"""Valid MIG layouts of one GPU: which multisets of instances fit together, and at which starts.

A layout is a set of (profile, start) placements whose memory-slice intervals do not overlap,
with at most ``max_count`` instances of each profile, at most the model's compute slices in all,
and one profile only on a ``homogeneous`` model (the rules of ``capplan/model/validate.py``).
Layouts with the same instance counts are interchangeable for packing, so one placement per
count vector is kept, and only *maximal* count vectors (no other valid vector holds at least as
many of every profile): every valid GPU is a subset of one of them.

Used by the bound (:mod:`capplan.placement.core.bound`: a MIG GPU is one of these patterns) and by
the heuristic's MIG packer (:mod:`capplan.placement.heuristics.migpack`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from capplan.model.catalog import GpuModel

#: Most distinct placement sets explored per model (catalog GPUs have at most a few thousand).
_MAX_STATES = 200_000


@dataclass(frozen=True)
class Layout:
    """One maximal MIG layout of a GPU model.

    Attributes
    ----------
    counts
        Instances per profile, in the order of ``model.profiles``.
    slots
        The placements, as (profile index, start) pairs sorted by start.
    """

    counts: tuple[int, ...]
    slots: tuple[tuple[int, int], ...]


def _mask(model: GpuModel, pi: int, start: int) -> int:
    return ((1 << model.profiles[pi].memory_slices) - 1) << start


@cache
def mig_layouts(model: GpuModel) -> tuple[Layout, ...]:
    """Maximal valid layouts of ``model`` (empty when it has no profiles).

    Parameters
    ----------
    model
        A catalog GPU model with MIG profiles or compute partitions.

    Returns
    -------
    tuple of Layout
        Sorted by count vector, largest first; deterministic.
    """
    profs = model.profiles
    if not profs:
        return ()
    places = [(pi, s, _mask(model, pi, s), pr.compute_slices) for pi, pr in enumerate(profs) for s in pr.starts]
    places.sort(key=lambda x: (x[1], x[0]))
    cap = model.compute_slices or max(pr.compute_slices for pr in profs)
    best: dict[tuple[int, ...], tuple[tuple[int, int], ...]] = {}
    seen = 0
    stack: list[tuple[int, int, int, tuple[int, ...], tuple[tuple[int, int], ...]]] = [
        (0, 0, 0, (0,) * len(profs), ())]
    while stack:
        k, mask, compute, counts, slots = stack.pop()
        seen += 1
        if counts not in best:
            best[counts] = slots
        if seen > _MAX_STATES:
            break
        for j in range(k, len(places)):
            pi, s, m, c = places[j]
            if mask & m or compute + c > cap or counts[pi] >= profs[pi].max_count:
                continue
            if model.homogeneous and any(x and i != pi for i, x in enumerate(counts)):
                continue
            nc = (*counts[:pi], counts[pi] + 1, *counts[pi + 1:])
            stack.append((j + 1, mask | m, compute + c, nc, (*slots, (pi, s))))
    vecs = sorted(best, reverse=True)
    maximal = [v for v in vecs
               if not any(u != v and all(a >= b for a, b in zip(u, v, strict=True)) for u in vecs)]
    return tuple(Layout(counts=v, slots=tuple(sorted(best[v], key=lambda x: (x[1], x[0])))) for v in maximal)


def most_alone(model: GpuModel, pi: int) -> int:
    """Most instances of profile ``pi`` that fit on one GPU of ``model`` without other profiles."""
    return max((lay.counts[pi] for lay in mig_layouts(model)), default=0)
