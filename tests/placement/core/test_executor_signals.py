"""Ctrl-C while the local executor shuts its pool down: the shutdown finishes, then the interrupt is raised."""

from __future__ import annotations

import multiprocessing
import os
import signal
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import pytest

from capplan.placement.core.executor import LocalExecutor


def test_sigint_during_shutdown_finishes_it_then_interrupts(monkeypatch: pytest.MonkeyPatch) -> None:
    """A SIGINT that lands in ``shutdown()`` (a sweep interrupted near its end) used to cut it short: the pool's
    manager thread stayed blocked and the process hung at exit after printing "interrupted". Now the shutdown
    completes (no worker left) and the KeyboardInterrupt comes after it."""
    real = ProcessPoolExecutor.shutdown

    def interrupted_shutdown(self: ProcessPoolExecutor, *a: Any, **k: Any) -> None:
        os.kill(os.getpid(), signal.SIGINT)
        real(self, *a, **k)

    monkeypatch.setattr(ProcessPoolExecutor, "shutdown", interrupted_shutdown)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            list(LocalExecutor(2).map(abs, [-1, -2, -3]))
    finally:
        signal.signal(signal.SIGINT, previous)
    assert multiprocessing.active_children() == []
