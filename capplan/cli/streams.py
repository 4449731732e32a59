"""Unix manners for the standard streams: a reader that closes early is not a bug.

``capplan schema | head -1`` closes capplan's stdout after one line; a log reader may close
stderr while a plan is still being written. Python ignores SIGPIPE, so the next write raises
``BrokenPipeError``. The rules (docs/cli.md):

- stdout closed by its reader: the command stops quietly with exit 141 (128 + SIGPIPE, what a
  shell reports for a process that SIGPIPE ended), no traceback, no "internal error";
- stderr closed: diagnostics are dropped from then on and the command finishes its work with its
  own exit code (the plan written with ``-o`` is still written, atomically).
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator
from typing import TextIO, cast

#: Exit code of a command whose stdout reader went away (128 + SIGPIPE).
EXIT_PIPE = 141


class QuietStream(io.TextIOBase):
    """A text stream that turns EPIPE on its target into silence (the rest of the output is dropped)."""

    def __init__(self, inner: TextIO) -> None:
        super().__init__()
        self.inner = inner
        self.broken = False

    def write(self, s: str) -> int:
        """Write ``s``; after the reader went away, drop it."""
        if not self.broken:
            try:
                self.inner.write(s)
            except BrokenPipeError:
                self._gone()
        return len(s)

    def flush(self) -> None:
        """Flush the target, ignoring a reader that went away."""
        if not self.broken:
            try:
                self.inner.flush()
            except BrokenPipeError:
                self._gone()

    def isatty(self) -> bool:
        """Whether the target is a terminal (False once it went away)."""
        return not self.broken and self.inner.isatty()

    def fileno(self) -> int:
        """The target's file descriptor."""
        return self.inner.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        """The target's encoding."""
        return getattr(self.inner, "encoding", "utf-8") or "utf-8"

    def _gone(self) -> None:
        self.broken = True
        silence(self.inner)


def silence(stream: TextIO) -> None:
    """Point ``stream``'s file descriptor at /dev/null, so that buffered text and later writes
    (the interpreter's final flush, a solver's C-level log) do not fail again."""
    with contextlib.suppress(OSError, ValueError, io.UnsupportedOperation):
        fd = stream.fileno()
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)


@contextlib.contextmanager
def quiet_stderr() -> Iterator[QuietStream]:
    """Within the block, ``sys.stderr`` drops what its reader no longer reads."""
    previous = sys.stderr
    wrapper = QuietStream(previous)
    sys.stderr = cast(TextIO, wrapper)
    try:
        yield wrapper
    finally:
        if sys.stderr is cast(TextIO, wrapper):
            sys.stderr = previous


def is_broken_pipe(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) is EPIPE on a standard stream's reader."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, BrokenPipeError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def stdout_gone() -> int:
    """The reader of stdout went away: silence it and return :data:`EXIT_PIPE`."""
    silence(sys.stdout)
    return EXIT_PIPE
