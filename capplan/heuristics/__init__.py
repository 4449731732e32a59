"""Vectorised placement heuristics for fleets: best fit and fragmentation gradient (FGD).

* :mod:`~capplan.heuristics.fleet`: the array occupancy (:class:`FleetState`).
* :mod:`~capplan.heuristics.score`: scorers (:class:`BestFit`, :class:`Fgd`) and the shape mix.
* :mod:`~capplan.heuristics.choose`: feasibility and choice for one replica.
* :mod:`~capplan.heuristics.placer`: gangs, topology domains and batch order.
* :mod:`~capplan.heuristics.run`: the ``heuristic`` strategy.
"""

from capplan.heuristics.fleet import Choice, FleetState
from capplan.heuristics.placer import FleetPlacer, batch_order
from capplan.heuristics.run import place, plan_heuristic
from capplan.heuristics.score import BestFit, Fgd, ShapeMix

__all__ = ["BestFit", "Choice", "Fgd", "FleetPlacer", "FleetState", "ShapeMix", "batch_order", "place",
           "plan_heuristic"]
