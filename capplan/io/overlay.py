"""What-if overlays: a scenario that is another scenario plus edits (``base: live.yaml``).

A what-if kept as a full copy of the live cluster drifts from it the day after it is written. An
overlay names its base and holds only the edits, so it follows every nightly import::

    base: live.yaml            # relative to this file's folder
    workloads:
      - {name: train-a, replicas: 12}                 # a workload of the base: merged field by field
      - {name: new-gang, gpus: 8, replicas: 4}        # a new name: added
      - {name: old-batch, remove: true}               # removed
    cluster:
      racks:
        - name: r1
          nodes:
            - {name: spare-1, gpu: H100-SXM5-80GB, gpus: 8, cpu: 224, memory_gib: 2048}

The edits are merged into the base (docs/formats.md, "What-if overlays"): mappings key by key,
``null`` removes a key, lists of named mappings (workloads, racks, nodes, node groups by
``name_prefix``...) item by item by name (``remove: true`` drops an item), any other value
replaces the base's.
A base may itself be an overlay (at most :data:`MAX_DEPTH` levels, no cycles).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from capplan.io.files import load_yaml_or_json
from capplan.model.errors import InputError

#: Deepest chain of overlays (an overlay of an overlay of ...).
MAX_DEPTH = 8


def load_scenario_data(path: str | Path) -> tuple[Any, list[Path]]:
    """The scenario data at ``path`` with every ``base`` resolved, and the files it was built from.

    The files (the overlay first, then its bases) are what a cache must hash: a what-if changes
    when its base does.

    Raises
    ------
    InputError
        When a base is missing, unreadable, not a mapping, too deep a chain or a cycle, or an edit
        is malformed (naming the field path in the overlay).
    """
    return _load(str(path), [])


def _load(path: str, chain: list[Path]) -> tuple[Any, list[Path]]:
    data = load_yaml_or_json(path, "scenario" if not chain else f"base scenario (of {chain[-1]})")
    here = Path(path) if path != "-" else Path("-")
    if not isinstance(data, dict) or "base" not in data:
        return data, [here]
    base = data["base"]
    if not isinstance(base, str) or not base.strip():
        raise InputError("base", f"{path}: `base` is the path of the scenario this one edits (a string)")
    target = Path(base) if Path(base).is_absolute() or path == "-" else here.parent / base
    seen = [p.resolve() for p in (*chain, here) if str(p) != "-"]
    if target.resolve() in seen:
        raise InputError("base", f"{path}: base {base} leads back to itself (a cycle of overlays)")
    if len(chain) + 1 >= MAX_DEPTH:
        raise InputError("base", f"{path}: more than {MAX_DEPTH} overlays in a chain")
    if not target.is_file():
        raise InputError("base", f"{path}: base scenario {target} does not exist")
    base_data, files = _load(str(target), [*chain, here])
    if not isinstance(base_data, dict):
        raise InputError("base", f"base scenario {target} is not a mapping")
    edits = {k: v for k, v in data.items() if k != "base"}
    return merge(base_data, edits, ""), [here, *files]


def merge(base: Any, edit: Any, path: str) -> Any:
    """``edit`` merged into ``base`` (neither is changed); ``path`` names the edit for errors."""
    if isinstance(base, dict) and isinstance(edit, dict):
        out = dict(base)
        for k, v in edit.items():
            sub = f"{path}.{k}" if path else str(k)
            if v is None:
                out.pop(k, None)
            else:
                out[k] = merge(base[k], v, sub) if k in base else _plain(v, sub)
        return out
    if isinstance(base, list) and isinstance(edit, list) and _named(base) and _named(edit, allow_empty=True):
        return _merge_named(base, edit, path)
    return _plain(edit, path)


def _key(item: Any) -> tuple[str, str] | None:
    """What names a list item: its ``name``, or the ``name_prefix`` of a node group."""
    if isinstance(item, dict):
        for k in ("name", "name_prefix"):
            if isinstance(item.get(k), str):
                return k, item[k]
    return None


def _named(items: list[Any], allow_empty: bool = False) -> bool:
    return (bool(items) or allow_empty) and all(_key(x) is not None for x in items)


def _merge_named(base: list[dict[str, Any]], edit: list[dict[str, Any]], path: str) -> list[Any]:
    out: list[Any] = list(base)
    index = {_key(x): i for i, x in enumerate(base)}
    gone: set[int] = set()
    for j, item in enumerate(edit):
        sub = f"{path}[{j}]"
        remove = item.get("remove", False)
        if not isinstance(remove, bool):
            raise InputError(f"{sub}.remove", "`remove: true` drops the item of that name; give true or false")
        key = _key(item)
        assert key is not None  # _named checked it
        i = index.get(key)
        if remove:
            if i is None:
                raise InputError(f"{sub}.{key[0]}", f"cannot remove {key[1]!r}: the base has no item of that name")
            gone.add(i)
            continue
        fields = {k: v for k, v in item.items() if k != "remove"}
        if i is None:
            index[key] = len(out)
            out.append(_plain(fields, sub))
        else:
            out[i] = merge(out[i], fields, sub)
    return [x for i, x in enumerate(out) if i not in gone]


def _plain(value: Any, path: str) -> Any:
    """A new value from the overlay as it is, minus the overlay's own keys (``remove`` on list items)."""
    if isinstance(value, dict):
        if value.get("remove") is True:
            raise InputError(f"{path}.remove", "`remove: true` only drops an item of a named list of the base")
        return {k: _plain(v, f"{path}.{k}") for k, v in value.items() if k != "remove"}
    if isinstance(value, list):
        return [_plain(v, f"{path}[{i}]") for i, v in enumerate(value)]
    return value
