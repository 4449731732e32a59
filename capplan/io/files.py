"""File input and output at the edge: safe YAML/JSON loading and atomic writes."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import yaml

from capplan.model.errors import InputError


def load_yaml_or_json(path: str | Path, what: str = "file") -> Any:
    """Read a YAML (or JSON, a subset of YAML) file with the safe loader.

    ``-`` reads standard input. Raises :class:`InputError` for unreadable or malformed files.
    """
    p = str(path)
    try:
        if p == "-":
            import sys

            text = sys.stdin.read()
        else:
            text = Path(p).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError("", f"{what} {p} does not exist") from None
    except OSError as exc:
        raise InputError("", f"cannot read {what} {p}: {exc.strerror}") from None
    try:
        if p.endswith(".json"):
            return json.loads(text)
        return yaml.safe_load(text)
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        raise InputError("", f"{what} {p} is not valid YAML/JSON: {exc}") from None


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically: a temporary file in the same folder, then rename.

    A reader never sees a half-written file, and on error the old file is left untouched.
    """
    write_bytes_atomic(path, text.encode("utf-8"))


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (see :func:`write_text_atomic`)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
