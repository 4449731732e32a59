"""Vectorised placement heuristics for fleets: best fit and fragmentation gradient (FGD).

* :mod:`~capplan.placement.core.state`: the array occupancy (:class:`ClusterState`).
* :mod:`~capplan.placement.heuristics.score`: scorers (:class:`BestFit`, :class:`Fgd`) and the shape mix.
* :mod:`~capplan.placement.heuristics.choose`: feasibility and choice for one replica.
* :mod:`~capplan.placement.heuristics.placer`: gangs, topology domains and batch order.
* :mod:`~capplan.placement.heuristics.run`: the ``heuristic`` strategy.

The names below are loaded on first use (PEP 562): a package ``__init__`` that imports its own
submodules, which import each other, can deadlock (or see a half-initialised module) when two
threads import them at once, as the first ``solve()`` calls of a thread pool do.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from capplan.placement.heuristics.placer import FleetPlacer, batch_order
    from capplan.placement.heuristics.run import place, plan_heuristic
    from capplan.placement.heuristics.score import BestFit, Fgd, ShapeMix

_HOME = {"FleetPlacer": "placer", "batch_order": "placer", "place": "run", "plan_heuristic": "run",
         "BestFit": "score", "Fgd": "score", "ShapeMix": "score"}

__all__ = ["BestFit", "Fgd", "FleetPlacer", "ShapeMix", "batch_order", "place", "plan_heuristic"]


def __getattr__(name: str) -> Any:
    if name in _HOME:
        return getattr(import_module(f"{__name__}.{_HOME[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
