"""The fleet heuristics' names for the one occupancy state of :mod:`capplan.placement.core.state`.

``FleetState`` is :class:`~capplan.placement.core.state.ClusterState` and ``Choice`` is
:class:`~capplan.placement.core.state.Placement` (plain re-exports, not a second implementation).
Build a state with the problem's running replicas applied by
``ClusterState.with_assignments(p, p.running)``.
"""

from capplan.placement.core.state import FREE, MIG, SHARED, WHOLE
from capplan.placement.core.state import ClusterState as FleetState
from capplan.placement.core.state import Placement as Choice

__all__ = ["FREE", "MIG", "SHARED", "WHOLE", "Choice", "FleetState"]
