"""MIG geometry on one GPU: where a profile may start, which start keeps the most placements free, and the
slices one GPU takes of a profile one after another.

Pure functions of a GPU's memory-slice mask, per-profile counts and preset layout (the state's caches passed
in); the per-node fits (:mod:`capplan.placement.core.fit`), the bulk MIG screens
(:mod:`capplan.placement.core.migfit`), the schedulers and the reports read them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from capplan.model.catalog import GpuModel, MigProfile
from capplan.model.plan import MigSlot

if TYPE_CHECKING:
    from capplan.placement.core.state import ClusterState


def mig_starts(st: ClusterState, model: GpuModel, i: int, gi: int, prof: MigProfile,
               mask: int | None = None, counts: list[int] | None = None) -> list[int]:
    """Starts at which ``prof`` could be created on GPU ``gi`` of node ``i`` now: a free run of memory
    slices, under the profile's count limit, the GPU's compute slices, a homogeneous model's one profile
    per GPU and a preset layout. ``mask`` and ``counts`` (the GPU's slice mask and per-profile counts)
    may be passed when the caller already read them."""
    if mask is None:
        mask = int(st.mig_mask[i, gi])
    if counts is None:
        counts = st.prof_count[i, gi].tolist()
    return free_starts(model, prof, mask, counts, st.prof_index, st.layout_slots.get((i, gi)))


def free_starts(model: GpuModel, prof: MigProfile, mask: int, counts: list[int], index: dict[str, int],
                layout: frozenset[tuple[str, int]] | None) -> list[int]:
    """:func:`mig_starts` on a GPU of ``model`` given as its slice ``mask``, per-profile ``counts`` (by
    ``index``, the state's profile index) and preset ``layout`` slots (None: none)."""
    k = index[prof.name]
    if counts[k] >= prof.max_count:
        return []
    if model.homogeneous and any(counts) and not counts[k]:
        return []
    if any(counts):
        compute = sum([x.compute_slices * counts[index[x.name]] for x in model.profiles])
        if compute + prof.compute_slices > model.compute_slices:
            return []
    return [start for start in prof.starts
            if not mask & (((1 << prof.memory_slices) - 1) << start)
            and (layout is None or (prof.name, start) in layout)]


def mig_choice(st: ClusterState, model: GpuModel, i: int, gi: int, mask: int, counts: list[int],
                prof: MigProfile) -> tuple[int, int] | None:
    """Free start for ``prof`` keeping the most valid placements; (start, placements left)."""
    layout = st.layout_slots.get((i, gi))
    best: tuple[int, int] | None = None
    for start in mig_starts(st, model, i, gi, prof, mask, counts):
        after = placements_left(model, mask | ((1 << prof.memory_slices) - 1) << start, layout, st.mig_left)
        if best is None or after > best[1]:
            best = (start, after)
    return best


def placements_left(model: GpuModel, mask: int, layout: frozenset[tuple[str, int]] | None,
                      memo: dict[tuple[str, int, frozenset[tuple[str, int]] | None], int] | None = None) -> int:
    """Valid (profile, start) placements still free on a GPU with memory-slice ``mask`` and preset ``layout``
    slots (None: none), ``memo``: the fleet's cache by model name, mask and layout."""
    key = (model.name, mask, layout)
    if memo is not None:
        hit = memo.get(key)
        if hit is not None:
            return hit
    n = 0
    for p in model.profiles:
        for st in p.starts:
            if not mask & (((1 << p.memory_slices) - 1) << st) and (layout is None or (p.name, st) in layout):
                n += 1
    if memo is not None:
        memo[key] = n
    return n


def gpu_fill(st: ClusterState, model: GpuModel, i: int, gi: int, mask: int, counts: list[int],
              prof: MigProfile) -> tuple[tuple[MigSlot, ...], int]:
    """The slots of ``prof``'s slices on GPU ``gi`` of node ``i`` (slice ``mask``, per-profile ``counts``) taken
    one after another by :func:`mig_choice` until it takes no more, and the placements left after the first
    (0 when none fits); cached per (model, profile, mask, counts, preset layout) in ``st.mig_fills``."""
    layout = st.layout_slots.get((i, gi))
    key = (model.name, prof.name, mask, tuple(counts), layout)
    hit = st.mig_fills.get(key)
    if hit is None:
        k, width = st.prof_index[prof.name], (1 << prof.memory_slices) - 1
        starts: list[int] = []
        after = 0
        cnt = list(counts)
        while (opt := mig_choice(st, model, i, gi, mask, cnt, prof)) is not None:
            after = opt[1] if not starts else after
            starts.append(opt[0])
            mask |= width << opt[0]
            cnt[k] += 1
        hit = st.mig_fills[key] = (tuple(MigSlot(profile=prof.name, start=x) for x in starts), after)
    return hit
