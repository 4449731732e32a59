"""Progress events in user units, and a heartbeat that repeats the last one during long silences.

Every strategy reports through ``PlanOptions.progress``, a callback receiving dicts with these keys
(all optional but ``stage`` and ``elapsed``):

``stage``
    What runs (``greedy``, ``heuristic``, ``lns``, ``cpsat priority 100``, ...).
``elapsed``
    Seconds since the solve started.
``objective``, ``bound``
    Placed GPU demand in GPUs: a list per priority (highest first, like ``Plan.objective``), or one
    number for the priority named by ``priority``.
``priority``
    The priority ``objective`` and ``bound`` speak of, when they are single numbers.
``gap``
    Relative gap (0.05 = 5%) at the first priority below its bound.
``guaranteed``, ``guaranteed_total``
    Guaranteed replicas placed, and how many there are.
``message``
    Free text (``still working``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from capplan.model.plan import Plan

Progress = Callable[[dict[str, Any]], None]
HEARTBEAT_SECONDS = 2.0


def plan_event(stage: str, t0: float, plan: Plan) -> dict[str, Any]:
    """The progress event of a whole plan: objective and bound per priority (GPUs) and the gap."""
    return {"stage": stage, "elapsed": round(time.perf_counter() - t0, 3), "objective": list(plan.objective),
            "bound": list(plan.bound), "gap": plan.gap}


class Heartbeat:
    """A progress callback that forwards events and repeats the last one after ``every`` seconds of silence.

    Use as a context manager around a solve; the repeated event carries the current ``elapsed`` and
    ``message: still working``, so a long proof or search is never silent for more than ``every`` s.
    """

    def __init__(self, fn: Progress, stage: str, every: float = HEARTBEAT_SECONDS) -> None:
        self.fn, self.every = fn, every
        self.t0 = time.perf_counter()
        self.last: dict[str, Any] = {"stage": stage}
        self.last_t = self.t0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="capplan-progress", daemon=True)

    def __call__(self, event: dict[str, Any]) -> None:
        with self._lock:
            self.last = dict(event)
            self.last_t = time.perf_counter()
            self.fn(event)

    def _beat(self) -> None:
        while not self._stop.wait(min(0.25, self.every / 4)):
            with self._lock:
                now = time.perf_counter()
                if now - self.last_t < self.every:
                    continue
                event = {**self.last, "elapsed": round(now - self.t0, 3), "message": "still working"}
                self.last_t = now
                self.fn(event)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
