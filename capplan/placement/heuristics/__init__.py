"""Vectorised placement heuristics for fleets: best fit and fragmentation gradient (FGD).

* :mod:`~capplan.placement.heuristics.fleet`: the array occupancy (:class:`FleetState`).
* :mod:`~capplan.placement.heuristics.score`: scorers (:class:`BestFit`, :class:`Fgd`) and the shape mix.
* :mod:`~capplan.placement.heuristics.choose`: feasibility and choice for one replica.
* :mod:`~capplan.placement.heuristics.placer`: gangs, topology domains and batch order.
* :mod:`~capplan.placement.heuristics.run`: the ``heuristic`` strategy.
"""

from capplan.placement.heuristics.fleet import Choice, FleetState
from capplan.placement.heuristics.placer import FleetPlacer, batch_order
from capplan.placement.heuristics.run import place, plan_heuristic
from capplan.placement.heuristics.score import BestFit, Fgd, ShapeMix

__all__ = ["BestFit", "Choice", "Fgd", "FleetPlacer", "FleetState", "ShapeMix", "batch_order", "place",
           "plan_heuristic"]
