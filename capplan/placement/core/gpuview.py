"""One GPU of the occupancy state as an object: ``st.gpus[i][g].mode``, ``.mig_mask``, ``.tenants``, ...

Views read (and for ``mode`` and ``mig_mask``, write) the arrays of
:class:`~capplan.placement.core.state.ClusterState`; they hold no state of their own. The scheduler's
window union and the reports use them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

from capplan.model.problem import GpuMode
from capplan.placement.core.fleet import FREE, MODE_CODE, MODE_NAME

if TYPE_CHECKING:
    from capplan.placement.core.state import ClusterState


class GpuView:
    """One GPU of a :class:`ClusterState`, read (and for ``mode`` and ``mig_mask`` written) through its arrays."""

    def __init__(self, st: ClusterState, i: int, g: int) -> None:
        self.st, self.i, self.g = st, i, g

    @property
    def fixed(self) -> GpuMode | None:
        """The GPU's preset mode, if any."""
        return self.st.nodes[self.i].mode_of(self.g)

    @property
    def mode(self) -> str | None:
        """``whole``, ``shared``, ``mig`` (or ``blocked``) while in use, else None."""
        return MODE_NAME[int(self.st.mode[self.i, self.g])]

    @mode.setter
    def mode(self, value: str | None) -> None:
        self.st.mode[self.i, self.g] = FREE if value is None else MODE_CODE[value]
        self.st.touch(self.i)
        self.st.released += 1

    @property
    def mig_mask(self) -> int:
        """Memory slices taken by MIG instances (bit mask)."""
        return int(self.st.mig_mask[self.i, self.g])

    @mig_mask.setter
    def mig_mask(self, value: int) -> None:
        self.st.mig_mask[self.i, self.g] = value
        self.st.touch(self.i)
        self.st.released += 1

    @property
    def users(self) -> int:
        """Replicas using the GPU."""
        return int(self.st.users[self.i, self.g])

    @property
    def tenants(self) -> Counter[str]:
        """Users per tenant."""
        names = {v: k for k, v in self.st.tenants.items()}
        return Counter({names[t]: c for t, c in self.st.gpu_tenants.get((self.i, self.g), Counter()).items()})

    @property
    def isolated(self) -> int:
        """Users whose workload asks for tenant isolation."""
        return int(self.st.gpu_iso[self.i, self.g])

    @property
    def mig_counts(self) -> Counter[str]:
        """MIG instances per profile name."""
        row = self.st.prof_count[self.i, self.g]
        return Counter({name: int(row[k]) for name, k in self.st.prof_index.items() if row[k]})

    @property
    def frac_used(self) -> int:
        """Share in use (milli)."""
        return int(self.st.frac[self.i, self.g])

    @property
    def mem_used(self) -> int:
        """GPU memory in use by shares (MiB)."""
        return int(self.st.gmem[self.i, self.g])


class GpuRows(Sequence[list[GpuView]]):
    """``st.gpus[i][g]``: the GPUs of node ``i`` as views."""

    def __init__(self, st: ClusterState) -> None:
        self.st = st

    def __len__(self) -> int:
        return self.st.n

    def __getitem__(self, i: int) -> list[GpuView]:  # type: ignore[override]
        return [GpuView(self.st, i, g) for g in range(int(self.st.gpu_count[i]))]
