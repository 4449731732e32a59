"""Node-pattern packing (column generation over patterns of whole nodes) for fleets of many identical nodes.

* :mod:`~capplan.placement.patterns.shapes`: replicas grouped into shapes, nodes into node types.
* :mod:`~capplan.placement.patterns.pricing`: the best pattern for a node type (dynamic programming).
* :mod:`~capplan.placement.patterns.master`: the master LP (column generation) and the integer master.
* :mod:`~capplan.placement.patterns.strategy`: the ``patterns`` strategy.

``plan_patterns`` and ``suits`` are loaded on first use (PEP 562; see :mod:`capplan.placement.heuristics`
for why a package does not import its own submodules).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from capplan.placement.patterns.strategy import plan_patterns, suits

__all__ = ["plan_patterns", "suits"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(import_module(f"{__name__}.strategy"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
