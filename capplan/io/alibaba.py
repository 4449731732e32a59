"""Loader for the Alibaba GPU cluster trace v2023 ("openb") and every variant file of that family.

Node files have ``sn, cpu_milli, memory_mib, gpu, model``. Pod files have at least
``cpu_milli, memory_mib, num_gpu, gpu_milli`` (the ``multigpu*`` variants have only five columns,
``name`` among them); ``gpu_spec`` (``A|B``: allowed models), ``qos``, ``pod_phase`` and the
timestamps are optional (``creation_time`` reads as 0 when absent or empty, ``deletion_time`` and
``scheduled_time`` as None). Columns are matched by name, so any order works.

Semantics, exactly as in the trace: a pod's GPUs are all on one node; a pod with
``gpu_milli < 1000`` (and ``num_gpu == 1``) time-shares one GPU; ``gpu_spec`` lists the
accepted GPU models (empty: any). Each pod becomes one workload named after the pod with one
replica: ``shared`` with ``gpu_fraction`` for GPU-sharing pods, ``gpus: num_gpu`` for whole-GPU
pods, CPU-only otherwise. The trace has no topology: levels are ``[node]``.
"""

from __future__ import annotations

import csv
import io
import math
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from capplan.io.scenario import problem_from_data
from capplan.model.catalog import Catalog, load_catalog
from capplan.model.decode import LIMITS, read_text
from capplan.model.errors import InputError
from capplan.model.problem import Problem
from capplan.model.units import MIB_PER_GIB, MILLI

NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_REQUIRED = ("cpu_milli", "memory_mib", "num_gpu", "gpu_milli")


@dataclass(frozen=True)
class TraceNode:
    """One node row: id, CPU (milli), memory (MiB), GPU count and model ('' for CPU-only)."""

    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    model: str


@dataclass(frozen=True)
class TracePod:
    """One pod row: GPUs requested, milli-GPU per GPU, CPU, memory and accepted models."""

    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int
    gpu_spec: tuple[str, ...] = ()
    qos: str = ""
    creation_time: int = 0
    # Left out of repr (and so of the synthetic suites' digests, which predate them): None when absent.
    deletion_time: int | None = field(default=None, repr=False)
    scheduled_time: int | None = field(default=None, repr=False)

    @property
    def gpu_demand_milli(self) -> int:
        """Total GPU demand in milli-GPU (``num_gpu * gpu_milli``)."""
        return self.num_gpu * self.gpu_milli


def _rows(path: str | Path, required: tuple[str, ...], what: str,
          most: int) -> Iterator[tuple[int, dict[str, str]]]:
    text = read_text(path, f"{what} file")
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        cols = reader.fieldnames or []
        missing = [c for c in required if c not in cols]
        if missing:
            raise InputError(f"{path}:1", f"{what} file lacks column(s) {missing}; found {cols}")
        for i, row in enumerate(reader, start=2):
            if i - 1 > most:
                raise InputError(f"{path}:{i}", f"more than {most} {what} rows, over the limit "
                                                "(see docs/formats.md, Limits)")
            yield i, row
    except csv.Error as exc:
        raise InputError(f"{path}:{reader.line_num}", f"not a valid CSV {what} file: {exc}") from None


def _text(row: dict[str, str], key: str, where: str, default: str = "") -> str:
    """A cell as text, stripped; NUL and other control characters are refused with the row and column
    (they would end up in workload and node names that YAML, HTML and kubectl cannot carry faithfully)."""
    raw = (row.get(key) or default).strip()
    bad = next((c for c in raw if unicodedata.category(c) == "Cc"), None)
    if bad is not None:
        raise InputError(f"{where}.{key}", f"{raw!r} holds the control character U+{ord(bad):04X}; "
                                           "names and labels take printable characters only")
    return raw


def _int(row: dict[str, str], key: str, where: str, default: int | None = None) -> int:
    raw = (row.get(key) or "").strip()
    if raw == "" and default is not None:
        return default
    try:
        number = float(raw)
        if not math.isfinite(number) or abs(number) > LIMITS.magnitude:
            raise InputError(f"{where}.{key}", f"{raw} is not a finite number within ±{LIMITS.magnitude:g}")
        val = int(number)
    except ValueError:
        raise InputError(f"{where}.{key}", f"expected a whole number, got {raw!r}") from None
    if val < 0:
        raise InputError(f"{where}.{key}", f"must not be negative, got {val}")
    return val


def _opt_int(row: dict[str, str], key: str, where: str) -> int | None:
    """A whole number, or None when the column is absent or the cell empty (a time never reached)."""
    return None if not (row.get(key) or "").strip() else _int(row, key, where)


def read_nodes(path: str | Path) -> list[TraceNode]:
    """Read a node CSV of the trace."""
    out = []
    for line, row in _rows(path, NODE_COLUMNS, "node", LIMITS.nodes):
        where = f"{path}:{line}"
        name = _text(row, "sn", where)
        if not name:
            raise InputError(f"{where}.sn", "every node needs its id (sn)")
        out.append(TraceNode(name=name, cpu_milli=_int(row, "cpu_milli", where),
                             memory_mib=_int(row, "memory_mib", where), gpus=_int(row, "gpu", where, 0),
                             model=_text(row, "model", where)))
    if not out:
        raise InputError(str(path), "the node file has no rows")
    return out


def read_pods(path: str | Path) -> list[TracePod]:
    """Read a pod CSV of the trace (any variant: default, cpu*, gpushare*, gpuspec*, multigpu*)."""
    out = []
    for line, row in _rows(path, POD_REQUIRED, "pod", LIMITS.total_replicas):
        where = f"{path}:{line}"
        num_gpu, gpu_milli = _int(row, "num_gpu", where), _int(row, "gpu_milli", where)
        if num_gpu == 0:
            gpu_milli = 0
        elif gpu_milli == 0 or gpu_milli > MILLI or (gpu_milli < MILLI and num_gpu > 1):
            raise InputError(f"{where}.gpu_milli", f"{gpu_milli} is not a valid per-GPU share for {num_gpu} GPU(s)")
        spec = tuple(s.strip() for s in _text(row, "gpu_spec", where).split("|") if s.strip())
        out.append(TracePod(name=_text(row, "name", where, f"pod-{line - 1:05d}"),
                            cpu_milli=_int(row, "cpu_milli", where), memory_mib=_int(row, "memory_mib", where),
                            num_gpu=num_gpu, gpu_milli=gpu_milli, gpu_spec=spec, qos=_text(row, "qos", where),
                            creation_time=_int(row, "creation_time", where, 0),
                            deletion_time=_opt_int(row, "deletion_time", where),
                            scheduled_time=_opt_int(row, "scheduled_time", where)))
    return out


def _num(x: float) -> float | int:
    return int(x) if float(x).is_integer() else x


def pod_workload(pod: TracePod) -> dict[str, Any]:
    """The scenario workload entry for one pod."""
    w: dict[str, Any] = {"name": pod.name, "kind": "inference", "replicas": 1,
                         "cpu": _num(pod.cpu_milli / MILLI), "memory_gib": _num(pod.memory_mib / MIB_PER_GIB)}
    if pod.num_gpu and pod.gpu_milli < MILLI:
        w.update(kind="shared", gpu_fraction=pod.gpu_milli / MILLI)
    elif pod.num_gpu:
        w["gpus"] = pod.num_gpu
    if pod.gpu_spec and pod.num_gpu:
        w["gpu_models"] = list(pod.gpu_spec)
    return w


def trace_data(nodes: list[TraceNode], pods: list[TracePod], name: str = "alibaba") -> dict[str, Any]:
    """Scenario data (the YAML mapping) for trace nodes and pods."""
    node_entries = []
    for n in nodes:
        e: dict[str, Any] = {"name": n.name, "cpu": _num(n.cpu_milli / MILLI),
                             "memory_gib": _num(n.memory_mib / MIB_PER_GIB)}
        if n.gpus and n.model:
            e.update(gpu=n.model, gpus=n.gpus)
        node_entries.append(e)
    return {"cluster": {"name": name, "levels": ["node"], "nodes": node_entries},
            "workloads": [pod_workload(p) for p in pods]}


def load_alibaba(nodes_csv: str | Path, pods_csv: str | Path, catalog: Catalog | None = None) -> Problem:
    """Load a node file and a pod file of the trace family into a validated :class:`Problem`."""
    nodes, pods = read_nodes(nodes_csv), read_pods(pods_csv)
    name = Path(pods_csv).stem
    return problem_from_data(trace_data(nodes, pods, name), catalog or load_catalog())
