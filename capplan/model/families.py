"""The constraint families: one key per rule a plan or schedule must keep, shared by every component.

A family is one key across the independent validator (``capplan.model.validate_rules.RULES``), the
per-node fit of the constructive planners (``capplan.placement.core.fit.FITS``), the reason engine
(which starts every reason with the family's :attr:`Family.label`), the placement model
(``capplan.placement.cpsat.constraints.FAMILY_OF``) and the time model
(``capplan.placement.schedule.timemodel.families.FAMILY_OF``). ``tests/model/test_families.py`` checks
that every key of :data:`FAMILIES` has each of them; docs/contributing.md says how to add one.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Family:
    """One constraint family: the label a reason starts with, and what it means when it blocks.

    ``blocked`` is said of the occupied cluster (the reason engine: "... on N of M eligible nodes");
    ``structural`` of the empty one (``capplan explain``: the family alone rules the workload out).
    """

    key: str
    label: str
    blocked: str
    structural: str


def _f(key: str, label: str, blocked: str, structural: str) -> tuple[str, Family]:
    return key, Family(key, label, blocked, structural)


#: Every constraint family, in the order the reason engine checks a node.
FAMILIES: dict[str, Family] = dict([
    _f("model", "GPU model", "no eligible node offers an allowed GPU model",
       "no node offers an allowed GPU model with enough GPU memory"),
    _f("taint", "taint", "every eligible node has a NoSchedule/NoExecute taint it does not tolerate",
       "every node that could host it has a NoSchedule/NoExecute taint it does not tolerate"),
    _f("quota", "quota", "the ClusterQueue's quota (or its cohort's) is in use",
       "no flavor of its ClusterQueue has quota for it on a node that could host it"),
    _f("cpu", "host CPU", "not enough free CPU", "host CPU of the eligible nodes is too small"),
    _f("memory", "host memory", "not enough free host memory", "host memory of the eligible nodes is too small"),
    _f("gpu", "GPU capacity", "no free GPU capacity of the right kind",
       "not enough GPUs of the right mode on one node"),
    _f("mig", "MIG geometry", "no free MIG placement of the right profile",
       "the GPUs cannot be partitioned into enough {what} instances"),
    _f("fraction", "GPU shares", "no GPU with enough free share or GPU memory",
       "GPU shares or GPU memory of the eligible GPUs do not add up"),
    _f("isolation", "isolation", "isolation: the GPUs or nodes with room host another tenant",
       "every GPU or node with room would be shared with another tenant"),
    _f("power", "power", "power budget exhausted where GPUs are free",
       "the power budget of its domain cannot feed the GPUs it needs"),
    _f("topology", "topology", "no domain of the required level has room for the whole workload",
       "the required {lvl} domain is too small"),
    _f("one_model", "one GPU model per gang", "no single GPU model has room for the whole gang",
       "no single GPU model has room for the whole gang (set mixed_models: true to allow mixing)"),
    _f("gang", "gang", "the gang's replicas do not all fit at once",
       "the gang's replicas cannot all be placed at once"),
])


def family(key: str) -> Family:
    """The family of ``key`` (KeyError for an unknown key: a programming error, not bad input)."""
    return FAMILIES[key]
