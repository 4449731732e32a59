"""SolverSettings check themselves when built: each bad field is an InputError naming it."""

from __future__ import annotations

from typing import Any

import pytest

from capplan.model.errors import InputError
from capplan.reserve.solver import SolverSettings


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("time_limit", 0),
        ("time_limit", -5.0),
        ("time_limit", float("inf")),
        ("time_limit", float("nan")),
        ("time_limit", "60"),
        ("threads", 0),
        ("threads", 1.5),
        ("threads", True),
        ("gap", -1e-3),
        ("gap", 1.0),
        ("gap", float("nan")),
        ("method", "benders"),
        ("backend", "gurobi"),
    ],
)
def test_bad_field_is_named(field: str, value: Any) -> None:
    """Building settings with one bad field raises InputError whose path is that field."""
    with pytest.raises(InputError) as exc:
        SolverSettings(**{field: value})
    assert exc.value.path == field


def test_method_typo_gets_a_suggestion() -> None:
    """A misspelt method names the closest known one."""
    with pytest.raises(InputError, match="decomposition"):
        SolverSettings(method="decompositon")


def test_good_settings_keep_their_values() -> None:
    """Valid settings are built unchanged (edge values included)."""
    s = SolverSettings(time_limit=0.25, threads=4, gap=0.0, backend="cbc", method="extensive")
    assert (s.time_limit, s.threads, s.gap, s.backend, s.method) == (0.25, 4, 0.0, "cbc", "extensive")
    assert SolverSettings() == SolverSettings(60.0, 1, 1e-4, "highs", "auto")
