"""Exceptions raised by capplan.

Every error a user can fix is an :class:`InputError` that names the field path
(``workloads[3].mig``) and, where possible, the fix. The CLI maps it to exit code 2.
A :class:`PlanValidationError` means a planner produced an invalid plan: that is a bug,
never an input problem, and the CLI maps it to exit code 1.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class CapplanError(Exception):
    """Base class of all capplan errors."""


class InputError(CapplanError):
    """Invalid user input (a scenario, plan, catalog or planning file).

    It deliberately does not derive from ``ValueError``, so that it passes through pydantic
    validators unchanged and keeps its field path.

    Parameters
    ----------
    path
        Field path of the offending value, for example ``workloads[3].mig``;
        empty when the error concerns the whole file.
    message
        What is wrong and how to fix it.
    """

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}" if path else message)


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


def suggest(name: str, choices: Iterable[str], n: int = 3) -> str:
    """Return a ``did you mean ...?`` hint for ``name`` among ``choices`` (may be empty)."""
    pool = list(choices)
    close = difflib.get_close_matches(name, pool, n=n, cutoff=0.5)
    if not close:
        lowered = {c.lower(): c for c in pool}
        close = [lowered[c] for c in difflib.get_close_matches(name.lower(), list(lowered), n=n, cutoff=0.4)]
    return f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
