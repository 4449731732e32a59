"""Signals held back for a short step that must not be cut in half (renaming a set of outputs, shutting a
process pool down): :func:`signals_deferred`.

Blocking a signal with ``pthread_sigmask`` is not enough in a process with threads (HiGHS's, a process
pool's manager thread): the kernel hands the signal to another thread and Python still runs its handler in
the main thread at the next instruction. So the Python-level handlers are swapped for one that records the
signal, and the first recorded one is handed to the previous handler when the step is over.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType


@contextlib.contextmanager
def signals_deferred(signums: tuple[int, ...] = (signal.SIGINT, signal.SIGTERM)) -> Iterator[None]:
    """Run the ``with`` body with ``signums`` recorded instead of handled, then handle the first one.

    Outside the main thread (where handlers cannot be set) the body runs as it is.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []

    def record(signum: int, frame: FrameType | None) -> None:
        pending.append(signum)

    old = {s: signal.signal(s, record) for s in signums}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
        if pending:
            first = pending[0]
            handler = old[first]
            if callable(handler):
                handler(first, None)
            elif handler == signal.SIG_DFL:
                signal.raise_signal(first)
