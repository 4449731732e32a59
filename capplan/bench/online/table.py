"""The online policies by name: the table the protocols, the CLI and the benchmarks pick from.

The table lives apart from :mod:`capplan.bench.online.policies` because one of its members,
capplan's own :class:`~capplan.bench.online.packed.PackedFGD`, subclasses a policy there.
"""

from __future__ import annotations

from collections.abc import Callable

from capplan.bench.online.packed import PackedFGD
from capplan.bench.online.policies import (
    AllocatedPolicy,
    BalancedFGD,
    BestFitPolicy,
    DotProductPolicy,
    FGDPolicy,
    FirstFitPolicy,
    GpuClusteringPolicy,
    GpuPackingPolicy,
    PolicyContext,
    RandomPolicy,
)
from capplan.bench.online.sim import Policy
from capplan.model.errors import InputError

POLICIES: dict[str, Callable[[PolicyContext], Policy]] = {
    "random": RandomPolicy,
    "firstfit": FirstFitPolicy,
    "leastallocated": lambda c: AllocatedPolicy(c, most=False),
    "mostallocated": lambda c: AllocatedPolicy(c, most=True),
    "bestfit": BestFitPolicy,
    "dotprod": DotProductPolicy,
    "gpupacking": GpuPackingPolicy,
    "gpuclustering": GpuClusteringPolicy,
    "fgd": FGDPolicy,
    "capplan": PackedFGD,
    "capplan-balanced": BalancedFGD,
}
ALIASES = {"spread": "leastallocated", "binpack": "mostallocated", "dotproduct": "dotprod", "best-fit": "bestfit"}
# Names used by the FGD authors' published results, for the reproduction plots.
PUBLISHED_NAMES = {"random": "01-Random", "dotprod": "02-DotProd", "gpuclustering": "03-GpuClustering",
                   "gpupacking": "04-GpuPacking", "bestfit": "05-BestFit", "fgd": "06-FGD"}


def canonical(name: str) -> str:
    """The registered name of a policy (aliases resolved), or InputError naming the choices."""
    key = ALIASES.get(name.strip().lower(), name.strip().lower())
    if key not in POLICIES:
        raise InputError("--policies", f"unknown policy {name!r}; choose from {', '.join(POLICIES)}")
    return key


def make_policy(name: str, ctx: PolicyContext) -> Policy:
    """A fresh policy instance for one run."""
    return POLICIES[canonical(name)](ctx)
