"""The bounded decoder: same data as PyYAML where the input is sane, a field path where it is not."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from capplan.model.decode import Limits, decode
from capplan.model.errors import InputError

SMALL = Limits(depth=5, values=1000)


def _error(text: str, as_json: bool = False, limits: Limits = SMALL) -> InputError:
    with pytest.raises(InputError) as ei:
        decode(text, "scenario.yaml", as_json=as_json, limits=limits)
    return ei.value


@pytest.mark.parametrize("text", [
    "a: 1\nb: [1, 2.5, -3, 0x10, 1_000]\nc: {d: null, e: ~, f: true, g: 'yes', h: \"x\"}\n",
    "base: &b {x: 1, y: [1, 2]}\nn: {<<: *b, y: 3}\nm: *b\n",
    "t: 2027-01-01\nu: '2027-01'\nv: 2027-01\nw: 1e5\nx: 1.5e+3\n",
    "- a\n- - b\n  - c\n- {k: v}\n",
    "",
    "# only a comment\n",
])
def test_same_data_as_pyyaml(text: str) -> None:
    """Sane YAML (anchors, merge keys, scalars of every kind) decodes exactly as PyYAML's safe loader."""
    assert decode(text) == yaml.safe_load(text)


@pytest.mark.parametrize(("text", "path", "needle"), [
    ("a: {b: 1, b: 2}\n", "a.b", "duplicate key 'b'"),
    ("a: [1, .nan]\n", "a[1]", "not a finite number"),
    ("a: {b: -.inf}\n", "a.b", "not a finite number"),
    ("a: 1.0e+400\n", "a", "not a finite number"),
    ("a: 10000000000000000\n", "a", "out of range"),
    ("a: [[[[[[1]]]]]]\n", "a[0][0][0][0]", "nesting deeper than the limit of 5"),
    ("a: !!python/name:os.system x\n", "a", "unsupported YAML tag"),
    ("a: !!binary aGk=\n", "a", "unsupported YAML tag"),
    ("a: *nope\n", "a", "unknown alias"),
    ("? [1]\n: x\n", "", "a mapping key must be a plain value"),
])
def test_refused_with_path(text: str, path: str, needle: str) -> None:
    """Each refused YAML value names its field path and says why."""
    e = _error(text)
    assert e.path == path and needle in e.message, (e.path, e.message)


@pytest.mark.parametrize("depth", [70, 1_100, 100_000])
def test_deep_nesting_names_the_input_and_the_path(depth: int) -> None:
    """Past the depth limit, the error names the input and the field path, whichever parser refuses first.

    libyaml (PyYAML >= 6.0.4 bundles one) refuses nesting deeper than 1000 levels itself, while
    reading ahead; capplan's own limit (64) must still be the one reported, at the right path.
    """
    e = _error("description: " + "[" * depth + "]" * depth + "\n", limits=Limits())
    assert e.path.startswith("description[0][0]") and "scenario.yaml" in str(e), str(e)
    assert len(str(e).splitlines()) == 1


@pytest.mark.parametrize(("text", "path"), [
    ("a: [1, 2\nb: 3\n", "a[2]"),
    ("a:\n  b: [1, {c: d]\n", "a.b[1]"),
])
def test_parser_errors_carry_the_path(text: str, path: str) -> None:
    """Where the parser's own message is what the user sees, capplan puts the field path and the input before it."""
    with pytest.raises(InputError) as ei:
        decode(text, "scenario.yaml")
    assert ei.value.path == path and "scenario.yaml is not valid YAML" in ei.value.message
    assert "line 2" in ei.value.message and len(str(ei.value).splitlines()) == 1


def test_alias_bomb_refused_while_reading() -> None:
    """A billion-laughs document is refused when its expansion passes the value limit, not after."""
    levels = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    levels += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    e = _error("\n".join(levels) + "\n")
    assert e.path.startswith("a2") and "more than 1000 values" in e.message


def test_aliases_within_the_limit_are_shared() -> None:
    """Aliases below the limit decode to the anchored value (one object, not a copy)."""
    data: Any = decode("a: &x [1, 2]\nb: *x\n")
    assert data["a"] == [1, 2] and data["b"] is data["a"]


def test_more_than_one_document_refused() -> None:
    """A file holds one document."""
    assert "more than one YAML document" in _error("a: 1\n---\nb: 2\n").message


@pytest.mark.parametrize(("text", "path", "needle"), [
    ('{"a": 1, "a": 2}', "a", "duplicate key 'a'"),
    ('{"a": [1, NaN]}', "a[1]", "NaN is not a finite number"),
    ('{"a": {"b": Infinity}}', "a.b", "not a finite number"),
    ('{"a": 1e400}', "a", "not a finite number"),
    ('{"a": 12345678901234567890}', "a", "out of range"),
    ('{"a": [[[[[[1]]]]]]}', "a[0][0][0][0]", "nesting deeper than the limit of 5"),
])
def test_json_refused_with_path(text: str, path: str, needle: str) -> None:
    """JSON gets the same checks, with the path of the refused value."""
    e = _error(text, as_json=True)
    assert e.path == path and needle in e.message, (e.path, e.message)


def test_json_deeper_than_the_interpreter_refused() -> None:
    """JSON nested beyond Python's recursion limit is an input error, not a crash."""
    assert "nested deeper" in _error("[" * 100_000 + "]" * 100_000, as_json=True).message


def test_json_sane_data() -> None:
    """Sane JSON decodes as the json module does."""
    assert decode('{"a": [1, 2.5, "x", null, true], "b": {}}', as_json=True) == {
        "a": [1, 2.5, "x", None, True], "b": {}}
