"""Node-pattern packing (column generation over patterns of whole nodes) for fleets of many identical nodes.

* :mod:`~capplan.placement.patterns.shapes`: replicas grouped into shapes, nodes into node types.
* :mod:`~capplan.placement.patterns.pricing`: the best pattern for a node type (dynamic programming).
* :mod:`~capplan.placement.patterns.master`: the master LP (column generation) and the integer master.
* :mod:`~capplan.placement.patterns.strategy`: the ``patterns`` strategy.
"""

from capplan.placement.patterns.strategy import plan_patterns, suits

__all__ = ["plan_patterns", "suits"]
