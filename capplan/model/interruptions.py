"""The scenario's ``interruptions:`` settings, and the goodput of a gang of a problem under them.

The formula lives in :mod:`capplan.model.goodput`; this module ties it to a problem: the failure
rate of a GPU model, a gang's size in nodes and its spare count (``spares: auto`` resolved).
"""

from __future__ import annotations

import math
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field, field_validator

from capplan.model.goodput import GoodputResult, Interruptible, auto_spares, evaluate
from capplan.model.timing import parse_seconds
from capplan.model.units import Float, Frozen, Name

if TYPE_CHECKING:
    from capplan.model.problem import Problem, Workload

DEFAULT_NODE_REPAIR_S = 72 * 3600
DEFAULT_RESTART_S = 15 * 60
DEFAULT_RESTART_WITHOUT_SPARE_S = 4 * 3600
#: Longest expected wall time of a gang (a goodput near 0 would give an unbounded one): about 34,000 years.
MAX_WALL_S = 2**40


class Interruptions(Frozen):
    """How often GPUs fail and what a failure costs (top-level ``interruptions:`` of a scenario).

    Attributes
    ----------
    gpu_failure_rate
        Interruptions per GPU-hour (every model).
    models
        Per-model overrides of the rate (canonical catalog names).
    node_repair, restart, restart_without_spare
        Seconds a failed node is out; the restart when a free spare takes its place; the restart
        when no spare is free.
    """

    gpu_failure_rate: Float = Field(gt=0, le=1)
    models: dict[Name, Float] = Field(default_factory=dict)
    node_repair: int = Field(default=DEFAULT_NODE_REPAIR_S, gt=0)
    restart: int = Field(default=DEFAULT_RESTART_S, ge=0)
    restart_without_spare: int = Field(default=DEFAULT_RESTART_WITHOUT_SPARE_S, ge=0)

    #: Fields given in seconds or as ``90s``/``15m``/``2h``/``3d``.
    TIME_FIELDS: ClassVar[tuple[str, ...]] = ("node_repair", "restart", "restart_without_spare")

    @field_validator(*TIME_FIELDS, mode="before")
    @classmethod
    def _seconds(cls, v: Any) -> Any:
        return parse_seconds(v)

    @field_validator("models")
    @classmethod
    def _rates(cls, v: dict[str, float]) -> dict[str, float]:
        for name, rate in v.items():
            if not 0 < rate <= 1:
                raise ValueError(f"the rate of {name} must be in (0, 1] interruptions per GPU-hour, got {rate}")
        return v

    def rate(self, model: str | None) -> float:
        """Interruptions per GPU-hour of a GPU of ``model``."""
        return self.models.get(model, self.gpu_failure_rate) if model else self.gpu_failure_rate


def interruptible(p: Problem, w: Workload, gpus: int, nodes: int, model: str | None) -> Interruptible:
    """The goodput inputs of gang ``w`` on ``nodes`` nodes holding ``gpus`` GPUs of ``model``."""
    it = p.interruptions
    assert it is not None and w.checkpoint is not None, "a gang with checkpoint in a problem with interruptions"
    return Interruptible(gpus=gpus, nodes=nodes, rate_per_gpu_hour=it.rate(model), checkpoint=w.checkpoint,
                         node_repair=it.node_repair, restart=it.restart,
                         restart_without_spare=it.restart_without_spare,
                         interval=None if w.checkpoint_interval is None else float(w.checkpoint_interval))


def wanted_spares(p: Problem, w: Workload, gpus: int, nodes: int, model: str | None) -> int:
    """The spare nodes ``w`` asks for on ``nodes`` nodes (``auto`` resolved); 0 without checkpoint."""
    if w.checkpoint is None or p.interruptions is None:
        return 0
    if w.spares == "auto":
        return auto_spares(interruptible(p, w, gpus, nodes, model))
    return w.spares


def gang_goodput(p: Problem, w: Workload, gpus: int, nodes: int, model: str | None, spares: int) -> GoodputResult:
    """The goodput of gang ``w`` placed on ``nodes`` nodes (``gpus`` GPUs of ``model``) with ``spares`` spares."""
    return evaluate(interruptible(p, w, gpus, nodes, model), spares)


def worst_rate_model(p: Problem, w: Workload) -> str | None:
    """The GPU model ``w`` may use in the cluster with the highest failure rate (for estimates made
    before placement, such as the expected run time of ``capplan schedule``)."""
    it = p.interruptions
    present = sorted({n.gpu_model for n in p.cluster.nodes if n.gpu_model and p.can_host(w, n) is not None})
    if it is None or not present:
        return None
    return max(present, key=lambda m: (it.rate(m), m))


def expected_duration(p: Problem, w: Workload) -> int | None:
    """The expected wall time of ``w`` (``duration / u``, whole seconds rounded up) with no spare held.

    The goodput is that of the gang's GPUs on the allowed model of the cluster that fails most often.

    ``capplan schedule`` holds no spare nodes, so a restart takes ``restart_without_spare``. The
    workload's own ``duration`` for work without ``checkpoint``.
    """
    if w.duration is None or w.checkpoint is None or p.interruptions is None or w.gpus is None:
        return w.duration
    res = gang_goodput(p, w, w.gpus * w.replicas, 1, worst_rate_model(p, w), 0)
    return min(MAX_WALL_S, math.ceil(w.duration / max(res.goodput, 1e-12) - 1e-9))


def expected_goodput(p: Problem, w: Workload) -> float | None:
    """The goodput ``capplan schedule`` assumes for ``w`` (no spare held), None without checkpoint."""
    if w.checkpoint is None or p.interruptions is None or w.gpus is None:
        return None
    return gang_goodput(p, w, w.gpus * w.replicas, 1, worst_rate_model(p, w), 0).goodput


def with_expected_durations(p: Problem) -> Problem:
    """The problem the time engine schedules: each gang with ``checkpoint`` runs for its expected wall time.

    Those gangs become plain gangs (``checkpoint``, ``checkpoint_interval`` and ``spares`` cleared) whose
    ``duration`` is :func:`expected_duration`, so the function is idempotent. The deadline stays: a gang
    whose expected run cannot end by it is left unscheduled. ``p`` itself when nothing changes.
    """
    if p.interruptions is None or all(w.checkpoint is None or w.duration is None for w in p.workloads):
        return p
    plain = {"checkpoint": None, "checkpoint_interval": None, "spares": 0}
    workloads = tuple(w.model_copy(update={**plain, "duration": expected_duration(p, w)})
                      if w.checkpoint is not None and w.duration is not None else w for w in p.workloads)
    # Not validated again: an expected run may end after the deadline (that gang stays unscheduled), which a
    # scenario may not say. Everything else is the validated problem's; its memos are dropped.
    timed = p.model_copy(update={"workloads": workloads})
    for name, attr in vars(type(p)).items():
        if isinstance(attr, cached_property):
            timed.__dict__.pop(name, None)
    return timed
