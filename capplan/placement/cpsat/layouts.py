"""MIG layouts as multisets: enumeration of the maximal ones and realisation as concrete starts.

A GPU in MIG mode is modelled by *which multiset of instances* it offers, not by start indices:
dropping instances from a valid layout keeps it valid, so a GPU can host a set of instances iff
that set is contained in one of the *maximal* valid multisets. Enumeration is restricted to the
profiles that some eligible workload asks for, which keeps the list short (a handful to a few
dozen multisets per GPU model). Pure Python; no solver imports.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from capplan.model.catalog import GpuModel, MigProfile
from capplan.model.plan import MigSlot

Multiset = tuple[int, ...]  # count per profile, in the order of the profile list given


def _mask(p: MigProfile, start: int) -> int:
    return ((1 << p.memory_slices) - 1) << start


def _placements(
    model: GpuModel, profiles: Sequence[MigProfile], allowed: frozenset[MigSlot] | None
) -> list[tuple[int, int]]:
    """(profile position, start) pairs that may be used, larger instances first."""
    out = [
        (i, s)
        for i, p in enumerate(profiles)
        for s in p.starts
        if allowed is None or MigSlot(profile=p.name, start=s) in allowed
    ]
    return sorted(out, key=lambda x: (-profiles[x[0]].memory_slices, x[1], x[0]))


def _ok_to_add(
    model: GpuModel,
    profiles: Sequence[MigProfile],
    counts: list[int],
    base_counts: dict[str, int],
    compute: int,
    i: int,
) -> bool:
    p = profiles[i]
    if counts[i] + 1 + base_counts.get(p.name, 0) > p.max_count:
        return False
    if compute + p.compute_slices > model.compute_slices:
        return False
    if model.homogeneous:
        names = {profiles[j].name for j, c in enumerate(counts) if c} | set(base_counts)
        if names and names != {p.name}:
            return False
    return True


def enumerate_multisets(
    model: GpuModel,
    profiles: tuple[MigProfile, ...],
    base: tuple[MigSlot, ...] = (),
    allowed: frozenset[MigSlot] | None = None,
) -> list[Multiset]:
    """Maximal multisets of new instances (of ``profiles``) a GPU can add on top of ``base``.

    Parameters
    ----------
    model
        The GPU model.
    profiles
        Profiles of interest, in a fixed order (the multiset positions).
    base
        Instances already on the GPU (kept running work).
    allowed
        A preset layout: only these (profile, start) slots may be used; None allows all.
    """
    return list(_enumerate_cached(model, profiles, base, allowed))


@lru_cache(maxsize=4096)
def _enumerate_cached(
    model: GpuModel,
    profiles: tuple[MigProfile, ...],
    base: tuple[MigSlot, ...],
    allowed: frozenset[MigSlot] | None,
) -> tuple[Multiset, ...]:
    by_name = {p.name: p for p in model.profiles}
    base_mask = 0
    base_compute = 0
    for s in base:
        bp = by_name[s.profile]
        base_mask |= _mask(bp, s.start)
        base_compute += bp.compute_slices
    base_counts: dict[str, int] = {}
    for s in base:
        base_counts[s.profile] = base_counts.get(s.profile, 0) + 1
    places = [(i, s) for i, s in _placements(model, profiles, allowed) if not base_mask & _mask(profiles[i], s)]
    found: set[Multiset] = set()
    counts = [0] * len(profiles)

    def dfs(pos: int, mask: int, compute: int) -> None:
        extended = False
        for k in range(pos, len(places)):
            i, s = places[k]
            m = _mask(profiles[i], s)
            if mask & m or not _ok_to_add(model, profiles, counts, base_counts, compute, i):
                continue
            extended = True
            counts[i] += 1
            dfs(k + 1, mask | m, compute + profiles[i].compute_slices)
            counts[i] -= 1
        if not extended:
            found.add(tuple(counts))

    dfs(0, base_mask, base_compute)
    return tuple(sorted(_maximal(found), reverse=True))


def _maximal(sets: set[Multiset]) -> list[Multiset]:
    def dominated(a: Multiset) -> bool:
        return any(b != a and all(x <= y for x, y in zip(a, b, strict=True)) for b in sets)

    return [a for a in sets if any(a) and not dominated(a)]


def realize(
    model: GpuModel,
    want: dict[str, int],
    base: tuple[MigSlot, ...] = (),
    allowed: frozenset[MigSlot] | None = None,
) -> list[MigSlot] | None:
    """Concrete starts for ``want`` (profile name -> count) on a GPU holding ``base``; None if impossible."""
    by_name = {p.name: p for p in model.profiles}
    items = sorted(
        (by_name[n] for n, c in want.items() for _ in range(c)),
        key=lambda p: (-p.memory_slices, -p.compute_slices, p.name),
    )
    mask = 0
    for s in base:
        mask |= _mask(by_name[s.profile], s.start)
    out: list[MigSlot] = []

    def dfs(k: int, mask: int) -> bool:
        if k == len(items):
            return True
        p = items[k]
        prev = out[-1].start if out and out[-1].profile == p.name else -1
        for s in p.starts:
            if s <= prev and items[k - 1].name == p.name:
                continue  # identical instances in increasing start order
            slot = MigSlot(profile=p.name, start=s)
            if mask & _mask(p, s) or (allowed is not None and slot not in allowed):
                continue
            out.append(slot)
            if dfs(k + 1, mask | _mask(p, s)):
                return True
            out.pop()
        return False

    return list(out) if dfs(0, mask) else None
