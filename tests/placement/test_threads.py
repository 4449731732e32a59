"""The library from a thread pool, from a cold interpreter (``benchmarks/concurrency.py`` does the work).

Eight threads released at one barrier make their first ``solve()``/``schedule()``/reservation calls at
once, while another thread writes numbered lines to file descriptor 1. Before the fix, 6 of 6 cold starts
failed: the HiGHS banner was silenced by pointing fd 1 at ``/dev/null`` around each solver construction
(the host lost lines, or all its later output), and the package ``__init__`` re-exports raced
(``ImportError: cannot import name 'place'``, ``_DeadlockError``).
"""

from __future__ import annotations

from benchmarks.concurrency import trial


def test_concurrent_cold_start_matches_serial_and_keeps_stdout() -> None:
    r = trial(timeout=240)
    assert r["findings"] == []
