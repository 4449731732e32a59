"""One key per constraint family across the validator, the fit, the reasons and both models."""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from capplan.model.families import FAMILIES
from capplan.model.validate_rules import RULES
from capplan.placement.core.fit import FITS
from capplan.placement.core.reasons import FAMILY_LABEL
from capplan.placement.cpsat.constraints import FAMILIES as PLACEMENT_COMPONENTS
from capplan.placement.cpsat.constraints import FAMILY_OF as PLACEMENT_FAMILY_OF
from capplan.placement.schedule.timemodel.families import FAMILIES as TIME_STEPS
from capplan.placement.schedule.timemodel.families import FAMILY_OF as TIME_FAMILY_OF


def _resolve(path: str) -> Any:
    """``package.module.Name.attr`` -> the object (the longest importable module prefix, then attributes)."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            obj = getattr(obj, name)
        return obj
    raise ModuleNotFoundError(path)


@pytest.mark.parametrize("key", sorted(FAMILIES))
def test_every_family_has_every_component(key: str) -> None:
    """A family in the table is checked by the validator, kept by the fit, named by the reasons and
    modelled by the placement and the time model; a family added to one place only fails here."""
    assert RULES.get(key) and all(callable(f) for f in RULES[key]), f"validator: no rule for {key!r}"
    assert key in FITS and callable(_resolve(FITS[key])), f"fit: no home for {key!r}"
    assert FAMILY_LABEL.get(key) == FAMILIES[key].label, f"reasons: no label for {key!r}"
    assert any(key in fams for fams in PLACEMENT_FAMILY_OF.values()), f"placement model: {key!r} not modelled"
    assert any(key in fams for fams in TIME_FAMILY_OF.values()), f"time model: {key!r} not modelled"


def test_component_tables_name_only_known_families() -> None:
    """The models' component tables cover exactly their components and name no unknown family."""
    assert set(PLACEMENT_FAMILY_OF) == set(PLACEMENT_COMPONENTS)
    assert set(TIME_FAMILY_OF) - {"data"} == set(TIME_STEPS)
    named = {f for table in (PLACEMENT_FAMILY_OF, TIME_FAMILY_OF) for fams in table.values() for f in fams}
    assert named <= set(FAMILIES), sorted(named - set(FAMILIES))
    assert set(RULES) == set(FAMILIES) and set(FITS) == set(FAMILIES)


def test_reasons_start_with_the_family_label() -> None:
    """A reason of the reason engine starts with its family's label (here: host CPU)."""
    from capplan.io.scenario import problem_from_data
    from capplan.placement import solve

    p = problem_from_data({"cluster": {"levels": ["rack", "node"], "racks": [{"name": "r1", "nodes": [
        {"name_prefix": "n", "count": 1, "gpu": "H100-SXM5-80GB", "gpus": 8, "cpu": 8, "memory_gib": 512}]}]},
        "workloads": [{"name": "hungry", "replicas": 2, "gpus": 1, "cpu": 6}]})
    plan = solve(p, "greedy", time_limit=5)
    (u,) = plan.unplaced
    assert u.reason.startswith(FAMILIES["cpu"].label + ":"), u.reason
