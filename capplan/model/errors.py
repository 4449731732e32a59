"""Exceptions raised by capplan.

Every error a user can fix is an :class:`InputError` that names the field path
(``workloads[3].mig``) and, where possible, the fix. The CLI maps it to exit code 2.
A :class:`PlanValidationError` means a planner produced an invalid plan: that is a bug,
never an input problem, and the CLI maps it to exit code 1.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

#: Most errors reported for one file.
MAX_ERRORS = 20


class CapplanError(Exception):
    """Base class of all capplan errors."""


class InputError(CapplanError):
    """Invalid user input (a scenario, plan, catalog or planning file).

    It deliberately does not derive from ``ValueError``, so that it passes through pydantic
    validators unchanged and keeps its field path. One error may carry several problems of the
    same file (:attr:`problems`, at most :data:`MAX_ERRORS`); ``path`` and ``message`` are the first.

    Parameters
    ----------
    path
        Field path of the offending value, for example ``workloads[3].mig``;
        empty when the error concerns the whole file.
    message
        What is wrong and how to fix it.
    more
        Further ``(path, message)`` problems of the same input.
    """

    def __init__(self, path: str, message: str, more: Iterable[tuple[str, str]] = ()) -> None:
        self.path = path
        self.message = message
        self.problems: list[tuple[str, str]] = [(path, message), *more]
        self.total = len(self.problems)
        del self.problems[MAX_ERRORS:]
        super().__init__(self.lines()[0] if self.total == 1 else "\n".join(self.lines()))

    @classmethod
    def of(cls, problems: list[tuple[str, str]], total: int | None = None) -> InputError:
        """One error holding several ``(path, message)`` problems (``total`` counts any left out)."""
        err = cls(problems[0][0], problems[0][1], problems[1:])
        err.total = max(err.total, total or 0)
        return err

    def lines(self) -> list[str]:
        """One line per problem (``path: message``), and a last line counting any left out."""
        out = [f"{p}: {m}" if p else m for p, m in self.problems]
        if self.total > len(self.problems):
            out.append(f"... and {self.total - len(self.problems)} more error(s)")
        return out


class ErrorList:
    """Collects the problems of one input so that all of them are reported at once.

    Examples
    --------
    >>> errors = ErrorList()
    >>> with errors.catch():
    ...     raise InputError("a", "bad")
    >>> errors.raise_any()
    Traceback (most recent call last):
    ...
    capplan.model.errors.InputError: a: bad
    """

    def __init__(self) -> None:
        self.problems: list[tuple[str, str]] = []
        self.total = 0

    def add(self, err: InputError) -> None:
        """Record the problems of ``err``."""
        self.total += err.total
        self.problems.extend(err.problems[: MAX_ERRORS - len(self.problems)])

    @contextmanager
    def catch(self) -> Iterator[None]:
        """Record an :class:`InputError` raised in the block and carry on after it."""
        try:
            yield
        except InputError as err:
            self.add(err)

    def __bool__(self) -> bool:
        return bool(self.problems)

    def raise_any(self) -> None:
        """Raise one :class:`InputError` with every problem recorded, if any."""
        if self.problems:
            raise InputError.of(self.problems, self.total)


class PlanValidationError(CapplanError):
    """A plan violates at least one rule of the problem.

    Parameters
    ----------
    violations
        Human-readable descriptions of each violated rule.
    """

    def __init__(self, violations: list[str]) -> None:
        self.violations = violations
        head = "; ".join(violations[:5])
        more = f" (+{len(violations) - 5} more)" if len(violations) > 5 else ""
        super().__init__(f"invalid plan: {head}{more}")


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance between ``a`` and ``b`` (insertions, deletions, substitutions)."""
    if len(a) < len(b):
        a, b = b, a
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1]


_FAMILY = re.compile(r"^(?:[A-Za-z]+-)*?([A-Za-z]+)-?(\d+)")


def family_matches(name: str, choices: Iterable[str], n: int = 3) -> list[str]:
    """Choices of the same family as ``name``: same letters, nearest number (``H101`` -> ``H100-...``)."""
    m = _FAMILY.match(name)
    if not m:
        return []
    letters, number = m.group(1).lower(), int(m.group(2))
    scored = []
    for c in choices:
        mc = _FAMILY.match(c)
        if mc and mc.group(1).lower() == letters:
            scored.append((abs(int(mc.group(2)) - number), len(c), c))
    return [c for _, _, c in sorted(scored)[:n]]


def _number(name: str) -> int:
    m = _FAMILY.match(name)
    return int(m.group(2)) if m else -1


def close_matches(name: str, choices: Iterable[str], n: int = 3) -> list[str]:
    """The choices closest to ``name``: by edit distance (case-insensitive), then by similarity."""
    pool = list(dict.fromkeys(choices))
    close = _by_distance(name, pool, n)
    if len(close) < n:
        lowered = {c.lower(): c for c in pool}
        for c in difflib.get_close_matches(name.lower(), list(lowered), n=n, cutoff=0.6):
            if lowered[c] not in close and len(close) < n:
                close.append(lowered[c])
    return close


def _by_distance(name: str, pool: list[str], n: int) -> list[str]:
    low = name.lower()
    limit = max(1, min(3, len(name) // 3))
    scored = sorted((edit_distance(low, c.lower()), c) for c in pool)
    return [c for d, c in scored if d <= limit][:n]


def suggest(name: str, choices: Iterable[str], n: int = 3, family: Iterable[str] | None = None) -> str:
    """Return a ``did you mean ...?`` hint for ``name`` among ``choices`` (may be empty).

    Near misses by edit distance come first; with ``family`` (canonical GPU model names), models
    of the same family follow (``H101`` suggests the ``H100-...`` models), then similar names.
    """
    pool = list(dict.fromkeys(choices))
    kin = family_matches(name, family, n) if family is not None else []
    same = [c for c in kin if _FAMILY.match(c) and _number(c) == _number(name)]
    low = name.lower()
    close = [c for c in pool if edit_distance(low, c.lower()) <= (1 if len(name) >= 6 else 0)][:n]
    for group in (same, _by_distance(name, pool, n), kin, close_matches(name, pool, n)):
        for c in group:
            if c not in close and len(close) < n:
                close.append(c)
    return f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""


def describe(data: object) -> str:
    """Say in plain words what a parsed file or value holds: ``an empty file``, ``a list``, ..."""
    if data is None:
        return "an empty file (or only comments)"
    if isinstance(data, bool):
        return f"the value {data!r}"
    if isinstance(data, dict):
        return "a mapping"
    if isinstance(data, list):
        return f"a list of {len(data)} item(s)"
    if isinstance(data, str):
        return f"the text {data[:40]!r}"
    if isinstance(data, int | float):
        return f"the number {data!r}"
    return f"a value of type {type(data).__name__}"
