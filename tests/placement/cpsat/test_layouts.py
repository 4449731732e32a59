"""MIG layouts as multisets: maximal enumeration and realisation as concrete starts."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from capplan.model.catalog import builtin_catalog
from capplan.model.checks import check_layout
from capplan.model.plan import MigSlot
from capplan.placement.cpsat.layouts import enumerate_multisets, realize

H100 = builtin_catalog().get("H100-SXM5-80GB")
MI300X = builtin_catalog().get("MI300X-192GB")


def _profiles(*names: str) -> tuple:  # type: ignore[type-arg]
    return tuple(p for p in H100.profiles if p.name in names)


def test_h100_three_g_and_one_g() -> None:
    """With 3g.40gb and 1g.10gb the maximal H100 multisets are the known ones."""
    prof = _profiles("1g.10gb", "3g.40gb")
    assert set(enumerate_multisets(H100, prof)) == {(0, 2), (4, 1), (7, 0)}


def test_homogeneous_model_never_mixes() -> None:
    """MI300X partitions are one mode per GPU: every maximal multiset uses one profile."""
    for lay in enumerate_multisets(MI300X, MI300X.profiles):
        assert sum(1 for c in lay if c) == 1


def test_base_and_preset_layout_respected() -> None:
    """With 3g.40gb running at start 4 only slots 0-3 remain; a preset layout restricts starts."""
    prof = _profiles("1g.10gb", "3g.40gb")
    base = (MigSlot(profile="3g.40gb", start=4),)
    assert set(enumerate_multisets(H100, prof, base)) == {(4, 0), (0, 1)}
    preset = frozenset({MigSlot(profile="1g.10gb", start=0), MigSlot(profile="3g.40gb", start=4)})
    assert set(enumerate_multisets(H100, prof, (), preset)) == {(1, 1)}


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_every_sub_multiset_of_a_maximal_layout_is_realisable(data: st.DataObject) -> None:
    """Any sub-multiset of an enumerated layout realises as a valid concrete layout."""
    prof = H100.profiles
    lays = enumerate_multisets(H100, prof)
    lay = data.draw(st.sampled_from(lays))
    sub = [data.draw(st.integers(0, c)) for c in lay]
    slots = realize(H100, {p.name: c for p, c in zip(prof, sub, strict=True) if c})
    assert slots is not None and len(slots) == sum(sub)
    check_layout(H100, tuple(slots), "test")  # raises on overlap, bad start or count
