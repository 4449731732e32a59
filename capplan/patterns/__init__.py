"""Node-pattern packing (column generation over patterns of whole nodes) for fleets of many identical nodes.

* :mod:`~capplan.patterns.shapes`: replicas grouped into shapes, nodes into node types.
* :mod:`~capplan.patterns.pricing`: the best pattern for a node type (dynamic programming).
* :mod:`~capplan.patterns.master`: the master LP (column generation) and the integer master.
* :mod:`~capplan.patterns.strategy`: the ``patterns`` strategy.
"""

from capplan.patterns.strategy import plan_patterns, suits

__all__ = ["plan_patterns", "suits"]
