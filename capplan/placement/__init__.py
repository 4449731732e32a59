"""The placement engine: :func:`solve` with its strategy table, settings and the online scheduler.

Every name is loaded on first use (PEP 562), so importing this package does not load OR-Tools or
NumPy-heavy strategies, and no package ``__init__`` imports its own submodules: that, with
submodules importing each other, deadlocks or sees half-initialised modules when threads of a pool
make their first ``solve()`` calls at once (``tests/placement/test_threads.py``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from capplan.placement.core.options import PlanOptions, Strategy
    from capplan.placement.online import OnlineScheduler
    from capplan.placement.planner import solve
    from capplan.placement.strategies import STRATEGIES, choose_strategy, register

_LAZY = {
    "PlanOptions": "capplan.placement.core.options",
    "Strategy": "capplan.placement.core.options",
    "solve": "capplan.placement.planner",
    "STRATEGIES": "capplan.placement.strategies",
    "register": "capplan.placement.strategies",
    "choose_strategy": "capplan.placement.strategies",
    "OnlineScheduler": "capplan.placement.online",
}

__all__ = ["STRATEGIES", "OnlineScheduler", "PlanOptions", "Strategy", "choose_strategy", "register", "solve"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'capplan.placement' has no attribute {name!r}")
