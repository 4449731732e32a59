"""What-if overlays (``base:`` plus edits): hand-worked merges, the files a cache must hash, clear errors."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from capplan.io.overlay import load_scenario_data, merge
from capplan.io.scenario import load_scenario
from capplan.model.errors import InputError
from tests.conftest import EXAMPLES


def test_merge_rules() -> None:
    """Mappings merge key by key, null removes, named lists merge by name, other values replace."""
    base = {"a": {"x": 1, "y": 2}, "l": [1, 2], "w": [{"name": "p", "n": 1, "k": "v"}, {"name": "q", "n": 2}],
            "g": [{"name_prefix": "r2n", "count": 4}]}
    edit = {"a": {"y": 3, "x": None}, "l": [9], "w": [{"name": "q", "n": 5}, {"name": "p", "remove": True},
                                                       {"name": "z", "n": 0}],
            "g": [{"name_prefix": "r2n", "count": 6}]}
    assert merge(base, edit, "") == {"a": {"y": 3}, "l": [9], "w": [{"name": "q", "n": 5}, {"name": "z", "n": 0}],
                                     "g": [{"name_prefix": "r2n", "count": 6}]}
    assert base["w"][0] == {"name": "p", "n": 1, "k": "v"}  # the base is not changed


def test_overlay_chain_and_files(tmp_path: Path) -> None:
    """An overlay of an overlay resolves both; the files listed are the overlay's and every base's."""
    shutil.copy(EXAMPLES / "mixed-fleet.yaml", tmp_path / "live.yaml")
    (tmp_path / "what").mkdir()
    (tmp_path / "what" / "a.yaml").write_text("base: ../live.yaml\nworkloads:\n  - {name: etl, replicas: 1}\n")
    (tmp_path / "what" / "b.yaml").write_text("base: a.yaml\nworkloads:\n  - {name: notebooks, remove: true}\n")
    data, files = load_scenario_data(tmp_path / "what" / "b.yaml")
    assert [f.resolve() for f in files] == [(tmp_path / p).resolve() for p in ("what/b.yaml", "what/a.yaml",
                                                                              "live.yaml")]
    p = load_scenario(tmp_path / "what" / "b.yaml")
    assert [(w.name, w.replicas) for w in p.workloads] == [("pretrain", 2), ("chat-api", 6), ("etl", 1)]
    assert "base" not in data


@pytest.mark.parametrize(("text", "path", "needle"), [
    ("base: nope.yaml\n", "base", "does not exist"),
    ("base: [x]\n", "base", "a string"),
    ("base: self.yaml\n", "base", "cycle"),
    ("base: live.yaml\nworkloads:\n  - {name: ghost, remove: true}\n", "workloads[0].name", "no item of that name"),
    ("base: live.yaml\nworkloads:\n  - {name: etl, remove: yes please}\n", "workloads[0].remove", "true or false"),
])
def test_overlay_errors(tmp_path: Path, text: str, path: str, needle: str) -> None:
    """A bad overlay is refused with the field path in the overlay and the fix."""
    shutil.copy(EXAMPLES / "mixed-fleet.yaml", tmp_path / "live.yaml")
    (tmp_path / "self.yaml").write_text(text)
    with pytest.raises(InputError) as ei:
        load_scenario(tmp_path / "self.yaml")
    assert ei.value.path == path and needle in ei.value.message, (ei.value.path, ei.value.message)
