"""The built-in hardware catalog: required models, MIG geometry, aliases and user overrides."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from capplan.model.catalog import builtin_catalog, load_catalog
from capplan.model.errors import InputError
from capplan.model.units import UNITS_PER_GPU

REQUIRED = ["A100-SXM4-40GB", "A100-SXM4-80GB", "H100-SXM5-80GB", "H100-NVL-94GB", "H200-SXM-141GB", "B200-180GB",
            "A30-24GB", "MI300X-192GB", "L40S-48GB", "T4-16GB", "G2", "G3", "P100", "T4", "V100M16", "V100M32", "A10"]


@pytest.mark.parametrize("name", REQUIRED)
def test_required_models_present(name: str) -> None:
    """Every model the foundation issue lists resolves, by name or alias."""
    assert builtin_catalog().get(name).name


def test_h100_placements_match_mig_guide() -> None:
    """H100 80GB profiles have the starts and sizes of the MIG user guide's placement table."""
    m = builtin_catalog().get("H100-SXM5-80GB")
    table = {p.name: (p.compute_slices, p.memory_slices, p.max_count, p.starts) for p in m.profiles}
    assert table["1g.10gb"] == (1, 1, 7, (0, 1, 2, 3, 4, 5, 6))
    assert table["1g.20gb"] == (1, 2, 4, (0, 2, 4, 6))
    assert table["2g.20gb"] == (2, 2, 3, (0, 2, 4))
    assert table["3g.40gb"] == (3, 4, 2, (0, 4))
    assert table["4g.40gb"] == (4, 4, 1, (0,))
    assert table["7g.80gb"] == (7, 8, 1, (0,))


def test_a30_and_mi300x_units() -> None:
    """Demand units are compute slices over the GPU's slices: A30 2g = 1/2, MI300X CPX = 1/8."""
    cat = builtin_catalog()
    a30, mi = cat.get("A30-24GB"), cat.get("MI300X-192GB")
    assert a30.profile_units(a30.profile("2g.12gb")) == UNITS_PER_GPU // 2
    assert mi.profile_units(mi.profile("CPX")) == UNITS_PER_GPU // 8
    assert mi.homogeneous


def test_unknown_model_suggests() -> None:
    """An unknown model name raises an InputError with close suggestions."""
    with pytest.raises(InputError, match=r"did you mean .H100-SXM5-80GB."):
        builtin_catalog().get("H100-SXM5-80G", "cluster.nodes[0].gpu")


def test_unsupported_profile_lists_valid_ones() -> None:
    """Asking a model for a profile it lacks names the valid profiles."""
    with pytest.raises(InputError, match=r"valid profiles: 1g\.10gb"):
        builtin_catalog().get("H100-SXM5-80GB").profile("3g.20gb")


def test_user_catalog_overrides_and_adds(tmp_path: Path) -> None:
    """A user catalog file adds new models and replaces built-in ones of the same name."""
    f = tmp_path / "mine.yaml"
    f.write_text("models:\n  - {name: T4-16GB, vendor: nvidia, memory_gib: 16, tdp_w: 75}\n"
                 "  - {name: X1, vendor: acme, memory_gib: 64, tdp_w: 300}\n")
    cat = load_catalog([f])
    assert cat.get("T4-16GB").tdp_w == 75
    assert cat.get("X1").memory_gib == 64
    assert "H100-SXM5-80GB" in cat


def test_bad_user_catalog(tmp_path: Path) -> None:
    """A profile whose start runs past the GPU's slices is rejected with its field path."""
    f = tmp_path / "bad.yaml"
    f.write_text("models:\n  - name: X\n    partitioning: mig\n    compute_slices: 7\n    memory_slices: 8\n"
                 "    profiles: [{name: 1g.1gb, compute_slices: 1, memory_slices: 2, memory_gib: 1, max_count: 4,"
                 " starts: [0, 7]}]\n")
    with pytest.raises(InputError, match=r"models\[0\].*runs past"):
        load_catalog([f])


def test_prices_are_editable_defaults() -> None:
    """Shipped models carry a list price per GPU-hour (A30, G1-G3: none); a negative price is rejected."""
    cat = builtin_catalog()
    assert cat.get("H100-SXM5-80GB").price_per_gpu_hour == 3.99
    assert cat.get("A30-24GB").price_per_gpu_hour is None and cat.get("G1").price_per_gpu_hour is None
    assert all(m.price_per_gpu_hour is None or m.price_per_gpu_hour > 0 for m in cat.models)
    data = cat.get("T4-16GB").model_dump()
    data["price_per_gpu_hour"] = -1
    with pytest.raises(ValidationError):
        type(cat.get("T4-16GB")).model_validate(data)
