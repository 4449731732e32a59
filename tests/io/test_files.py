"""File edges: bounded reading, output checks before work starts, atomic writes that honour the umask."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from capplan.io.files import check_output, load_yaml_or_json, write_text_atomic
from capplan.model.errors import InputError


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_new_output_honours_umask(tmp_path: Path, umask_022: None) -> None:
    """A new file gets 0644 under umask 022 (readable by a dashboard), not mkstemp's 0600."""
    out = tmp_path / "sub" / "plan.json"
    write_text_atomic(out, "{}\n")
    assert stat.S_IMODE(out.stat().st_mode) == 0o644
    os.umask(0o077)
    other = tmp_path / "private.json"
    write_text_atomic(other, "{}\n")
    assert stat.S_IMODE(other.stat().st_mode) == 0o600


def test_replaced_output_keeps_its_mode(tmp_path: Path, umask_022: None) -> None:
    """Rewriting a file keeps the mode its owner gave it, and leaves no temporary file."""
    out = tmp_path / "plan.json"
    out.write_text("old")
    out.chmod(0o640)
    write_text_atomic(out, "new")
    assert out.read_text() == "new" and stat.S_IMODE(out.stat().st_mode) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["plan.json"]


def test_check_output(tmp_path: Path) -> None:
    """A folder, a path below a regular file and an unwritable place are refused; a new path is fine."""
    (tmp_path / "afile").write_text("x")
    check_output(tmp_path / "new" / "deeper" / "plan.json")
    check_output(tmp_path / "outdir", directory=True)
    for bad, needle in ((tmp_path, "is a folder"), (tmp_path / "afile" / "plan.json", "is a file"),
                        (Path("/proc/plan.json"), "cannot write")):
        with pytest.raises(InputError, match=needle):
            check_output(bad)
    with pytest.raises(InputError, match="is a file; give a folder"):
        check_output(tmp_path / "afile", directory=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]  # the probe left nothing behind


def test_invalid_utf8_names_line_and_column(tmp_path: Path) -> None:
    """Invalid UTF-8 is reported with the line and column of the bad byte."""
    f = tmp_path / "s.yaml"
    f.write_bytes(b"a: 1\nb: x\xffy\n")
    with pytest.raises(InputError, match=r"not valid UTF-8 \(byte 0xff at line 2, column 5\)"):
        load_yaml_or_json(f, "scenario")
