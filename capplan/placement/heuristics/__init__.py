"""Vectorised placement heuristics for fleets: best fit and fragmentation gradient (FGD).

* :mod:`~capplan.placement.core.state`: the array occupancy (:class:`ClusterState`).
* :mod:`~capplan.placement.heuristics.score`: scorers (:class:`BestFit`, :class:`Fgd`) and the shape mix.
* :mod:`~capplan.placement.heuristics.choose`: feasibility and choice for one replica.
* :mod:`~capplan.placement.heuristics.placer`: gangs, topology domains and batch order.
* :mod:`~capplan.placement.heuristics.run`: the ``heuristic`` strategy.
"""

from capplan.placement.heuristics.placer import FleetPlacer, batch_order
from capplan.placement.heuristics.run import place, plan_heuristic
from capplan.placement.heuristics.score import BestFit, Fgd, ShapeMix

__all__ = [
           "BestFit",
           "Fgd",
           "FleetPlacer",
           "ShapeMix",
           "batch_order",
           "place",
           "plan_heuristic",
]
