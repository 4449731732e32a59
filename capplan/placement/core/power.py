"""Power budgets over topology domains: how many replicas a rack or block can still feed.

A gang with a required rack or block is tried in the domains its estimate says can hold it
(:meth:`capplan.placement.greedy.GreedyPlacer.place_in_one_domain`). Under binding power budgets
CPU, memory and free GPUs say that almost every domain can, and each failed trial costs a placement
and its undo; :func:`domain_room` adds the budgets of every power domain over a topology domain.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from capplan.model.problem import Workload

if TYPE_CHECKING:
    from capplan.placement.core.state import ClusterState

#: Per power column: the pair of each node, and each pair's topology domain, power domain and least TDP.
Pairs = list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]


def domain_room(st: ClusterState, w: Workload, idx: np.ndarray, room: np.ndarray, ids: np.ndarray,
                count: int) -> np.ndarray:
    """Upper bound on the replicas of ``w`` each topology domain can still take, power budgets included.

    Parameters
    ----------
    st
        The occupancy.
    w
        The workload.
    idx, room
        Candidate nodes and an upper bound on the replicas each can take on its own (CPU, memory, GPUs).
    ids, count
        Topology domain id per node of the fleet and the number of domains.

    Returns
    -------
    numpy.ndarray
        Per domain, at most the sum of ``room`` over its nodes; for whole GPUs also at most what each
        power domain over them can feed: every replica turns ``w.gpus`` idle GPUs on, so the nodes of a
        topology domain under one power domain take at most its headroom over the cheapest node's draw.
    """
    dom = ids[idx]
    cost = (w.gpus or 0) * st.tdp[idx]
    if not cost.any():
        return np.bincount(dom, weights=room, minlength=count).astype(np.int64)
    room = np.where(cost > 0, np.minimum(room, np.maximum(st.power_headroom(idx), 0) // np.maximum(cost, 1)),
                    room).astype(np.int64)
    out = np.bincount(dom, weights=room, minlength=count).astype(np.int64)
    fed = cost > 0
    free = np.bincount(dom[~fed], weights=room[~fed], minlength=count).astype(np.int64)  # no draw
    assert w.gpus is not None
    for pair, pair_dom, pair_pow, pair_tdp in _pairs(st, ids):
        held = np.bincount(pair[idx[fed]], weights=room[fed], minlength=pair_dom.size).astype(np.int64)
        fed_cap = np.minimum(held, np.maximum(st.power_free[pair_pow], 0) // (w.gpus * pair_tdp))
        out = np.minimum(out, free + np.bincount(pair_dom, weights=fed_cap, minlength=count).astype(np.int64))
    return out


def _pairs(st: ClusterState, ids: np.ndarray) -> Pairs:
    """Per power column, the (topology domain of ``ids``, power domain) pairs: the pair of each node, and each
    pair's topology domain, power domain and least TDP over its nodes that draw power (cached on the state;
    the least TDP over all of a pair's nodes keeps :func:`domain_room` an upper bound for any subset)."""
    hit = st.power_pairs.get(id(ids))
    if hit is not None and hit[0] is ids:
        return hit[1]
    npow = st.power_free.size
    big = np.int64(1) << 40
    out = []
    for col in st.node_dom.T:
        keys, pair = np.unique(ids * npow + col, return_inverse=True)
        tdp = np.full(keys.size, big, dtype=np.int64)
        np.minimum.at(tdp, pair, np.where(st.tdp > 0, st.tdp, big))
        out.append((pair.astype(np.int64), keys // npow, keys % npow, np.maximum(tdp, 1)))
    st.power_pairs[id(ids)] = (ids, out)
    return out
