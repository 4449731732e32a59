"""File input and output at the edge: bounded, strict YAML/JSON loading and atomic writes.

Reading goes through :mod:`capplan.model.decode` (size, UTF-8, nesting, alias and number limits,
duplicate keys refused). Writing is atomic (a temporary file in the same folder, then a rename)
and the new file gets the permissions the umask allows (0644 under umask 022), or keeps the
mode of the file it replaces.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from capplan.model.decode import LIMITS, Limits, decode, read_text
from capplan.model.errors import InputError
from capplan.model.signals import signals_deferred

__all__ = ["LIMITS", "Limits", "check_output", "load_yaml_or_json", "write_bytes_atomic", "write_files_atomic",
           "write_text_atomic"]


def load_yaml_or_json(path: str | Path, what: str = "file") -> Any:
    """Read a YAML (or JSON, a subset of YAML) file into plain data, within :data:`LIMITS`.

    ``-`` reads standard input. Files named ``*.json`` are parsed as JSON. Raises
    :class:`InputError` for unreadable, oversized, non-UTF-8 or malformed files, naming the field
    path of a duplicate key, a non-finite or out-of-range number or too deep a nesting.
    """
    p = str(path)
    return decode(read_text(p, what), f"{what} {p}", as_json=p.endswith(".json"))


def check_output(path: str | Path, what: str = "output", directory: bool = False) -> None:
    """Check, before any work starts, that ``path`` can be written (a file, or a folder with ``directory``).

    Missing parent folders are fine (they are created on writing) as long as the nearest existing
    one is a writable folder.

    Raises
    ------
    InputError
        If ``path`` is a folder (for a file) or a file (for a folder), lies below a regular file,
        or its folder is not writable.
    """
    target = Path(path)
    if target.is_dir() and not directory:
        raise InputError("", f"{what} {target} is a folder; give a file name")
    if target.exists() and directory and not target.is_dir():
        raise InputError("", f"{what} {target} is a file; give a folder")
    if target.exists() and not os.access(target, os.W_OK):
        raise InputError("", f"{what} {target} is not writable")
    parent = target if directory and target.is_dir() else target.parent
    probe = parent
    while not probe.exists():
        if probe.is_symlink() or probe.parent == probe:
            break
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        raise InputError("", f"{what} {target}: {probe} is a file, not a folder")
    try:  # a real probe: os.access says yes to root even where nothing can be created (/proc)
        fd, tmp = tempfile.mkstemp(prefix=".capplan-probe.", dir=probe)
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        raise InputError("", f"{what} {target}: cannot write in {probe} ({exc.strerror})") from None


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically: a temporary file in the same folder, then rename.

    A reader never sees a half-written file, and on error the old file is left untouched.
    """
    write_bytes_atomic(path, text.encode("utf-8"))


def _current_umask() -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # no /proc: read it by setting it (and put it back at once)
    os.umask(mask)
    return mask


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (see :func:`write_text_atomic`).

    A new file gets mode ``0666 & ~umask``; a replaced file keeps its mode.
    """
    target = Path(path)
    try:
        mode = stat.S_IMODE(target.stat().st_mode)
    except OSError:
        mode = 0o666 & ~_current_umask()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise InputError("", f"cannot write {target}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), mode)
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise InputError("", f"cannot write {target}: {exc.strerror}") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_files_atomic(folder: str | Path, files: Mapping[str, bytes],
                       before_commit: Callable[[], None] | None = None) -> None:
    """Write several files into ``folder`` as one step: all of them, or none (the old ones stay).

    Each file goes to a temporary file in ``folder`` first; ``before_commit`` (e.g. a check for an
    interrupt) runs when all are written, and only then are they renamed, with SIGINT and SIGTERM held
    back for the few renames (:func:`~capplan.model.signals.signals_deferred`: a signal arriving then is
    taken after the last one). Any error or
    exception before that removes the temporary files and leaves every old file as it was.

    Raises
    ------
    InputError
        When the folder or a file cannot be written.
    """
    out = Path(folder)
    staged: list[tuple[str, Path]] = []
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            target = out / name
            try:
                mode = stat.S_IMODE(target.stat().st_mode)
            except OSError:
                mode = 0o666 & ~_current_umask()
            fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=out)
            staged.append((tmp, target))
            with os.fdopen(fd, "wb") as fh:
                os.fchmod(fh.fileno(), mode)
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
        if before_commit is not None:
            before_commit()
        with signals_deferred():
            for tmp, target in staged:
                os.replace(tmp, target)
    except OSError as exc:
        for tmp, _ in staged:
            Path(tmp).unlink(missing_ok=True)
        raise InputError("", f"cannot write {out}: {exc.strerror}") from None
    except BaseException:
        for tmp, _ in staged:
            Path(tmp).unlink(missing_ok=True)
        raise
