"""The JSON Schema of the scenario file format, for editors' YAML language servers and CI.

Put ``# yaml-language-server: $schema=scenario.schema.json`` at the top of a scenario (after
``capplan schema scenario > scenario.schema.json``) and an editor completes and checks fields as
they are typed. The schema is the file format, not the planner's internal model: nodes carry
``gpu``, ``cpu`` and ``memory_gib`` (or ``name_prefix`` with ``count``), domains nest under the
plural of each level, times may be written ``90s``/``15m``/``2h``/``3d``. The loader stays the
judge (cross-field rules, the catalog, limits); the schema catches misspelt fields and wrong types.
"""

from __future__ import annotations

import copy
from typing import Any

from capplan.model.interruptions import Interruptions
from capplan.model.plan import Assignment
from capplan.model.problem import Taint, Workload
from capplan.model.quota import ClusterQueue, Flavor

_TIME = {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "string", "pattern": r"^\s*\d+(\.\d+)?\s*[smhd]?\s*$"}]}
_NUMBER = {"type": "number", "minimum": 0}
_NAME = {"type": "string", "minLength": 1}
_REMOVE = {"type": "boolean", "description": "in a what-if overlay: drop the base's item of this name"}


def _node() -> dict[str, Any]:
    mode = {"type": "object", "additionalProperties": False,
            "properties": {"gpus": {"anyOf": [{"const": "all"}, {"type": "array", "items": {"type": "integer"}}]},
                           "mode": {"enum": ["whole", "mig", "shared"]},
                           "layout": {"type": "array", "items": {
                               "type": "object", "additionalProperties": False, "required": ["profile", "start"],
                               "properties": {"profile": {"type": "string"}, "start": {"type": "integer"}}}}}}
    return {"type": "object", "additionalProperties": False,
            "description": "A node (`name`), or `count` identical nodes named `name_prefix` 1..count.",
            "properties": {"name": _NAME, "name_prefix": _NAME, "count": {"type": "integer", "minimum": 1},
                           "gpu": {"type": "string", "description": "GPU model or alias (`capplan catalog`)"},
                           "gpus": {"type": "integer", "minimum": 0}, "cpu": _NUMBER, "memory_gib": _NUMBER,
                           "gpu_modes": {"type": "array", "items": mode}, "mig_strategy": {"enum": ["mixed", "single"]},
                           "taints": {"type": "array", "items": {"$ref": "#/$defs/Taint"}},
                           "remove": _REMOVE},
            "oneOf": [{"required": ["name"]}, {"required": ["name_prefix", "count"]}]}


def _workload() -> dict[str, Any]:
    schema = Workload.model_json_schema()
    for key in Workload.TIME_FIELDS:
        schema["properties"][key] = {**_TIME, "description": "seconds, or 90s, 15m, 2h, 3d"}
    schema["properties"]["created"] = {"anyOf": [{"type": "integer"}, {"type": "string", "pattern":
                                       r"^\s*-?\s*\d+(\.\d+)?\s*[smhd]?\s*$"}],
                                       "description": "seconds from time 0 (negative: before), or -2h, 15m, ..."}
    schema["properties"]["remove"] = _REMOVE
    return schema


def scenario_json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a scenario file (docs/formats.md)."""
    workload = _workload()
    defs: dict[str, Any] = workload.pop("$defs", {})
    defs["workload"] = workload
    defs["node"] = _node()
    defs["Taint"] = Taint.model_json_schema()
    running = copy.deepcopy(Assignment.model_json_schema())
    defs.update(running.pop("$defs", {}))
    running["properties"]["ends_in"] = {**_TIME, "description": "remaining run time of a running replica"}
    running["properties"]["elapsed"] = {**_TIME, "description": "how long it has run (with ends_in; a run-time "
                                                                "spread conditions on it)"}
    defs["running"] = running
    interruptions = Interruptions.model_json_schema()
    for key in Interruptions.TIME_FIELDS:
        interruptions["properties"][key] = {**_TIME, "description": "seconds, or 90s, 15m, 2h, 3d"}
    defs["interruptions"] = interruptions
    for model in (Flavor, ClusterQueue):
        sub = copy.deepcopy(model.model_json_schema())
        defs.update(sub.pop("$defs", {}))
        defs[model.__name__] = sub
    quotas = {"type": "object", "additionalProperties": False,
              "properties": {"flavors": {"type": "array", "items": {"$ref": "#/$defs/Flavor"}},
                             "queues": {"type": "array", "items": {"$ref": "#/$defs/ClusterQueue"}}}}
    # A domain holds `name`, an optional `power_kw`, and its children under a plural key (racks:, nodes:, ...).
    defs["domain"] = {"type": "object", "required": ["name"],
                      "properties": {"name": _NAME, "power_kw": _NUMBER, "nodes": {"type": "array",
                                                                                    "items": {"$ref": "#/$defs/node"}}},
                      "additionalProperties": {"type": "array", "items": {"$ref": "#/$defs/domain"}}}
    cluster = {"type": "object",
               "properties": {"name": _NAME, "levels": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                              "nodes": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
               "additionalProperties": {"type": "array", "items": {"$ref": "#/$defs/domain"}}}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "capplan scenario",
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "base": {"type": "string", "description": "a what-if overlay: the scenario these fields edit"},
            "name": {"type": "string"}, "description": {"type": "string"},
            "cluster": cluster,
            "workloads": {"type": "array", "items": {"$ref": "#/$defs/workload"}},
            "running": {"type": "array", "items": {"$ref": "#/$defs/running"}},
            "schedule": {"type": "object", "additionalProperties": False,
                         "properties": {"horizon": _TIME, "step": _TIME}},
            "interruptions": {"$ref": "#/$defs/interruptions"},
            "quotas": quotas,
            "now": {"type": "string", "description": "RFC 3339 wall-clock time of time 0 (a live cluster's import)"},
            "reconfigure": {"enum": ["forbidden", "allowed"],
                            "description": "gpu_modes: fixed (forbidden, the default) or the current layout a plan "
                                           "may change at a cost (allowed)"},
        },
        "$defs": defs,
    }
