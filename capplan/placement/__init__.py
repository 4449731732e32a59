"""The placement engine: :func:`solve` with its strategy table, settings and the online scheduler.

``STRATEGIES``, ``register``, ``choose_strategy`` and ``OnlineScheduler`` are loaded on first use
(PEP 562), so importing this package does not load OR-Tools or NumPy-heavy strategies.
"""

from __future__ import annotations

import importlib
from typing import Any

from capplan.placement.core.options import PlanOptions, Strategy
from capplan.placement.planner import solve

_LAZY = {
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
