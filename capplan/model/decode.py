"""Bounded, strict decoding of input text (YAML or JSON) into plain Python data.

Every input file passes through here before anything is built from it, so the limits below
hold for every format (scenario, catalog, planning file, plan, kubectl JSON):

- the file is at most :attr:`Limits.file_bytes` bytes and valid UTF-8;
- YAML has one document, no duplicate keys, no unknown tags, nesting at most
  :attr:`Limits.depth` levels and at most :attr:`Limits.values` values *after* alias expansion
  (so a "billion laughs" alias bomb is refused while it is read, not after it has been expanded);
- every number is finite and within :attr:`Limits.magnitude` (``NaN``, ``.inf`` and ``1e400`` are
  refused with the field path).

YAML is read with PyYAML's C parser (libyaml) when installed and the pure-Python one otherwise;
the parser's events are turned into data here, iteratively, which checks the limits as it goes
and is faster than PyYAML's own constructor.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from yaml import events as ev
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.nodes import ScalarNode

from capplan.model.errors import InputError

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the C parser, when libyaml is installed


@dataclass(frozen=True)
class Limits:
    """Hard limits on input files (documented in docs/formats.md)."""

    #: Largest input file, in bytes.
    file_bytes: int = 64 * 1024 * 1024
    #: Deepest nesting of mappings and lists.
    depth: int = 64
    #: Most values (scalars, mappings and lists) in one file, counting every alias expansion.
    values: int = 10_000_000
    #: Largest magnitude of any number.
    magnitude: float = 1e15
    #: Most nodes in one cluster (after ``count`` expansion).
    nodes: int = 200_000
    #: Most GPUs on one node.
    gpus_per_node: int = 128
    #: Most GPUs in one cluster.
    gpus: int = 2_000_000
    #: Most replicas of one workload.
    replicas: int = 1_000_000
    #: Most replicas of all workloads together.
    total_replicas: int = 2_000_000
    #: Largest CPU (cores) of a node or a replica.
    cpu_cores: int = 100_000
    #: Largest host or GPU memory (GiB) of a node or a replica.
    memory_gib: int = 100_000_000
    #: Largest power budget (kW) of a domain.
    power_kw: int = 10_000_000
    #: Largest ``migration_cost`` and largest ``priority`` magnitude.
    weight: int = 10_000_000_000


LIMITS = Limits()

#: Largest prefix read again with the pure-Python parser to find the path of a parser error.
_REREAD_BYTES = 4 * 1024 * 1024
_STR = "tag:yaml.org,2002:str"
_MERGE = "tag:yaml.org,2002:merge"
_PLAIN_TAGS = {None, "!", "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"}
_SCALARS = ("null", "bool", "int", "float", "timestamp")
_CONSTRUCTORS = {f"tag:yaml.org,2002:{t}": SafeConstructor.yaml_constructors[f"tag:yaml.org,2002:{t}"]
                 for t in _SCALARS}


def read_text(path: str | Path, what: str = "file", limits: Limits = LIMITS) -> str:
    """Read a UTF-8 text file of at most ``limits.file_bytes`` bytes (``-`` reads standard input).

    Raises
    ------
    InputError
        If the file is missing, unreadable, too large or not valid UTF-8.
    """
    p = str(path)
    try:
        if p == "-":
            stream = getattr(sys.stdin, "buffer", None)
            if stream is None:  # a text stream (tests replace stdin with StringIO)
                data = sys.stdin.read(limits.file_bytes + 1).encode("utf-8", "surrogateescape")
            else:
                data = stream.read(limits.file_bytes + 1)
        else:
            with open(p, "rb") as fh:
                data = fh.read(limits.file_bytes + 1)
    except FileNotFoundError:
        raise InputError("", f"{what} {p} does not exist") from None
    except OSError as exc:
        raise InputError("", f"cannot read {what} {p}: {exc.strerror}") from None
    if len(data) > limits.file_bytes:
        raise InputError("", f"{what} {p} is larger than the limit of {limits.file_bytes} bytes")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise InputError("", f"{what} {p} is not valid UTF-8 (byte 0x{data[exc.start]:02x} at line {line}, "
                             f"column {col}); save it as UTF-8") from None


def decode(text: str, origin: str = "file", as_json: bool = False, limits: Limits = LIMITS) -> Any:
    """Parse ``text`` as JSON (``as_json``) or YAML into plain data, enforcing ``limits``.

    An empty YAML document gives ``None``.

    Raises
    ------
    InputError
        Naming the field path (and the line, for YAML) of the first problem.
    """
    if as_json:
        return _decode_json(text, origin, limits)
    return _Builder(text, origin, limits).run()


# ---------------------------------------------------------------------------------------------- YAML


def _path(parts: list[str | int]) -> str:
    if len(parts) > 12:
        return _path(parts[:6]) + f"...({len(parts) - 6} more levels)"
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


class _Frame:
    __slots__ = ("anchor", "container", "has_key", "is_map", "key", "merged", "start")

    def __init__(self, container: Any, is_map: bool, start: int, anchor: str | None) -> None:
        self.container = container
        self.is_map = is_map
        self.key: Any = None
        self.has_key = False
        self.start = start
        self.anchor = anchor
        self.merged: dict[Any, Any] | None = None


class _Builder:
    """Turns parser events into data (iteratively), checking the limits on the way."""

    def __init__(self, text: str, origin: str, limits: Limits, loader: Any = None) -> None:
        self.text = text
        self.loader = (loader or _Loader)(text)
        self.origin = origin
        self.limits = limits
        self.stack: list[_Frame] = []
        self.anchors: dict[str, tuple[Any, int]] = {}
        self.count = 0
        self.cache: dict[tuple[str, str], Any] = {}
        self.done: Any = None

    def where(self) -> list[str | int]:
        parts: list[str | int] = []
        for f in self.stack:
            if f.is_map:
                if f.has_key:
                    parts.append(str(f.key))
            else:
                parts.append(len(f.container))
        return parts

    def fail(self, message: str, e: ev.Event) -> InputError:
        line = e.start_mark.line + 1 if e.start_mark is not None else "?"
        return InputError(_path(self.where()), f"{message} ({self.origin}, line {line})")

    def run(self) -> Any:
        try:
            return self._run()
        except yaml.YAMLError as exc:
            raise self.parser_error(exc) from None
        except RecursionError:  # pragma: no cover - the depth limit comes first
            raise InputError("", f"{self.origin} is nested too deeply") from None
        finally:
            self.loader.dispose()

    def parser_error(self, exc: yaml.YAMLError) -> InputError:
        """The parser's own refusal as one line, with the field path capplan worked out.

        libyaml reads ahead of the events it hands out (a run of ``[`` is one long lookahead), and
        since PyYAML 6.0.4 it refuses nesting deeper than 1000 levels itself, before capplan's depth
        check sees an event. The text up to the parser's mark is then read again with the
        pure-Python parser, event by event: capplan's own check (with its path) fires where it
        would have, or the path reached at the mark is put in front of the parser's message.
        """
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        context = getattr(exc, "context", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        message = f"{self.origin} is not valid YAML: {context + ': ' if context else ''}{problem}{where}"
        path = _path(self.where())
        index = getattr(mark, "index", None)
        if self.loader.__class__ is not yaml.SafeLoader and isinstance(index, int) and index <= _REREAD_BYTES:
            again = _Builder(self.text[:index], self.origin, self.limits, yaml.SafeLoader)
            try:
                again._run()
            except yaml.YAMLError:
                path = _path(again.where()) or path
            except InputError as own:
                return own
            finally:
                again.loader.dispose()
        return InputError(path, message)

    def _run(self) -> Any:
        get = self.loader.get_event
        docs = 0
        limits = self.limits
        while True:
            e = get()
            t = type(e)
            if t is ev.ScalarEvent:
                self.count += 1
                value = self.scalar(e)
                if e.anchor is not None:
                    self.anchors[e.anchor] = (value, 1)
                self.add(value, e)
            elif t is ev.MappingStartEvent or t is ev.SequenceStartEvent:
                if e.tag not in _PLAIN_TAGS:
                    raise self.fail(f"unsupported YAML tag {e.tag!r}", e)
                if len(self.stack) >= limits.depth:
                    raise self.fail(f"nesting deeper than the limit of {limits.depth} levels", e)
                self.count += 1
                is_map = t is ev.MappingStartEvent
                self.stack.append(_Frame({} if is_map else [], is_map, self.count, e.anchor))
            elif t is ev.MappingEndEvent or t is ev.SequenceEndEvent:
                f = self.stack.pop()
                value = f.container
                if f.merged:
                    value = {**f.merged, **value}
                if f.anchor is not None:
                    self.anchors[f.anchor] = (value, self.count - f.start + 1)
                self.add(value, e)
            elif t is ev.AliasEvent:
                if e.anchor not in self.anchors:
                    raise self.fail(f"unknown alias *{e.anchor}", e)
                value, size = self.anchors[e.anchor]
                self.count += size
                self.check_count(e)
                self.add(value, e)
            elif t is ev.DocumentStartEvent:
                docs += 1
                if docs > 1:
                    raise InputError("", f"{self.origin} holds more than one YAML document; give one")
            elif t is ev.StreamEndEvent:
                return self.done

    def check_count(self, e: ev.Event) -> None:
        if self.count > self.limits.values:
            raise self.fail(f"more than {self.limits.values} values once aliases are expanded "
                            "(an alias bomb?)", e)

    def scalar(self, e: ev.ScalarEvent) -> Any:
        tag = e.tag
        if tag is None or tag == "!":
            if not e.implicit[0]:
                return e.value  # quoted: a string
            tag = self.loader.resolve(ScalarNode, e.value, e.implicit)
        if tag == _STR:
            return e.value
        key = (tag, e.value)
        if key in self.cache:
            return self.cache[key]
        if self.count > self.limits.values:
            self.check_count(e)
        build = _CONSTRUCTORS.get(tag)
        if build is None or tag == _MERGE:
            if tag == _MERGE:
                return _MergeKey
            raise self.fail(f"unsupported YAML tag {tag!r}", e)
        try:
            value = build(self.loader, ScalarNode(tag, e.value))
        except (ConstructorError, ValueError) as exc:
            raise self.fail(f"cannot read {e.value!r} as {tag.rsplit(':', 1)[-1]}: {exc}", e) from None
        if isinstance(value, int | float) and not isinstance(value, bool):
            problem = _number_problem(value, self.limits)
            if problem:
                raise self.fail(f"{e.value} is {problem}", e)
        if not isinstance(value, bytes | list | dict):
            self.cache[key] = value
        return value

    def add(self, value: Any, e: ev.Event) -> None:
        if not self.stack:
            self.done = value
            return
        f = self.stack[-1]
        if not f.is_map:
            f.container.append(value)
            return
        if not f.has_key:
            if value is _MergeKey:
                f.key, f.has_key = _MergeKey, True
                return
            if isinstance(value, list | dict):
                raise self.fail("a mapping key must be a plain value, not a list or mapping", e)
            if value in f.container:
                f.key, f.has_key = value, True
                raise self.fail(f"duplicate key {value!r}; each key may appear once", e)
            f.key, f.has_key = value, True
            return
        if f.key is _MergeKey:
            sources = value if isinstance(value, list) else [value]
            if not all(isinstance(s, dict) for s in sources):
                raise self.fail("a merge key (<<) takes a mapping or a list of mappings", e)
            merged = f.merged or {}
            for s in reversed(sources):
                merged.update(s)
            f.merged = merged
        else:
            f.container[f.key] = value
        f.has_key = False
        f.key = None


class _MergeKey:
    """Marker for the YAML merge key ``<<``."""


def _number_problem(value: float, limits: Limits) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return "not a finite number"
    if abs(value) > limits.magnitude:
        return f"out of range (the limit is ±{limits.magnitude:g})"
    return ""


# ---------------------------------------------------------------------------------------------- JSON


class _Bad:
    """A value the fast JSON pass refused; the slow pass finds its path."""

    def __init__(self, message: str) -> None:
        self.message = message


class _Refused(Exception):
    pass


def _decode_json(text: str, origin: str, limits: Limits) -> Any:
    most = limits.magnitude

    def strict_float(s: str) -> float:
        v = float(s)
        if not abs(v) <= most:  # NaN and the infinities too (as _number_problem)
            raise _Refused
        return v

    def strict_int(s: str) -> int:
        if len(s) > 18 and _number_problem(int(s), limits):
            raise _Refused
        v = int(s)
        if abs(v) > most:  # as _number_problem
            raise _Refused
        return v

    def constant(s: str) -> float:
        raise _Refused

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        d = dict(items)
        if len(d) != len(items):
            raise _Refused
        return d

    try:
        data = json.loads(text, parse_float=strict_float, parse_int=strict_int, parse_constant=constant,
                          object_pairs_hook=pairs)
    except _Refused:
        data = _json_slow(text, limits)
    except json.JSONDecodeError as exc:
        raise InputError("", f"{origin} is not valid JSON: {exc}") from None
    except RecursionError:
        raise InputError("", f"{origin} is nested deeper than the limit of {limits.depth} levels") from None
    _check_tree(data, limits)
    return data


def _json_slow(text: str, limits: Limits) -> Any:
    def num(s: str) -> Any:
        v = float(s) if any(c in s for c in ".eE") else int(s)
        problem = _number_problem(v, limits)
        return _Bad(f"{s} is {problem}") if problem else v

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        d: dict[str, Any] = {}
        for k, v in items:
            d[k] = _Bad(f"duplicate key {k!r}; each key may appear once") if k in d else v
        return d

    return json.loads(text, parse_float=num, parse_int=num, object_pairs_hook=pairs,
                      parse_constant=lambda s: _Bad(f"{s} is not a finite number"))


def _check_tree(data: Any, limits: Limits) -> None:
    """Depth, size and refused values of parsed JSON, with the path of the first problem."""
    # each entry: a value, its depth and its place (the key and the parent's place: the path is built only
    # for a problem, not copied for every container of a 100k-GPU scenario)
    todo: list[tuple[Any, int, _Place]] = [(data, 0, None)]
    count = 0
    while todo:
        node, depth, at = todo.pop()
        count += 1
        if isinstance(node, _Bad):
            raise InputError(_path(_parts(at)), node.message)
        if not isinstance(node, dict | list):
            continue
        if depth >= limits.depth:
            raise InputError(_path(_parts(at)), f"nesting deeper than the limit of {limits.depth} levels")
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for k, v in items:
            if isinstance(v, dict | list | _Bad):
                todo.append((v, depth + 1, (k, at)))
            else:
                count += 1
        if count > limits.values:
            raise InputError(_path(_parts(at)), f"more than {limits.values} values")


#: Where a value sits in parsed JSON: its key or index and the place of its container (None: the top).
_Place = tuple[str | int, "_Place"] | None


def _parts(at: _Place) -> list[str | int]:
    """The keys and indices from the top down to ``at``."""
    out: list[str | int] = []
    while at is not None:
        out.append(at[0])
        at = at[1]
    return out[::-1]
