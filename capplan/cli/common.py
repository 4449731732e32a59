"""What every command shares: exit codes, the ``--catalog`` option and checked option types."""

from __future__ import annotations

import argparse
import math
from types import FrameType
from typing import ClassVar

EXIT_OK, EXIT_INTERNAL, EXIT_INPUT, EXIT_GUARANTEE, EXIT_INVALID = 0, 1, 2, 3, 4
SEED_MAX = 2**31 - 1


def add_catalog_option(p: argparse.ArgumentParser) -> None:
    """Add the shared ``--catalog FILE`` option (repeatable) to a sub-command."""
    p.add_argument("--catalog", action="append", default=[], metavar="FILE",
                   help="extra GPU catalog file (YAML); may be repeated; overrides built-in models")


def add_prices_option(p: argparse.ArgumentParser) -> None:
    """Add ``--prices FILE``: GPU-hour prices per model, overriding the catalog's ``price_per_gpu_hour``."""
    p.add_argument("--prices", metavar="FILE",
                   help="GPU-hour prices per model (YAML/JSON `price_per_gpu_hour: {MODEL: price}`) "
                        "overriding the catalog's; see docs/report.md")


def strategy_help(default: str = "auto") -> str:
    """The ``--strategy`` help: every strategy of the table (registered ones included) and the default."""
    from capplan.placement.strategies import STRATEGIES

    return (f"planner: auto (chosen by the problem's size), {', '.join(sorted(STRATEGIES))} "
            f"(default {default}; docs/cli.md)")


def seconds(text: str) -> float:
    """An argparse type: a finite, positive number of seconds, at most the file limit on numbers (10^15)."""
    from capplan.model.decode import LIMITS

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite positive number of seconds, got {text!r}")
    if value > LIMITS.magnitude:
        raise argparse.ArgumentTypeError(f"{text} s is above the limit of {LIMITS.magnitude:g} s "
                                         "(see docs/formats.md, Limits)")
    return value


def workers(text: str) -> int:
    """An argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text!r}")
    return value


def seed(text: str) -> int:
    """An argparse type: an integer seed in ``0..2**31-1``."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer in 0..{SEED_MAX}, got {text!r}") from None
    if not 0 <= value <= SEED_MAX:
        raise argparse.ArgumentTypeError(f"must be in 0..{SEED_MAX}, got {text!r}")
    return value


def gap(text: str) -> float:
    """An argparse type: a relative gap, a finite number in ``0..1``."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in 0..1, got {text!r}") from None
    if not math.isfinite(value) or not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be a finite number in 0..1, got {text!r}")
    return value


class Interrupt:
    """SIGINT handler: remembers the interrupt, so that an error it causes (a KeyboardInterrupt
    inside an extension module's import becomes an ImportError) still ends as "interrupted", and
    a command can see an interrupt that a solver's callback swallowed (:func:`check_interrupt`)."""

    #: The handler the running command installed (None outside a command).
    current: ClassVar[Interrupt | None] = None

    def __init__(self) -> None:
        self.seen = False

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.seen = True
        raise KeyboardInterrupt


def check_interrupt() -> None:
    """Raise :class:`KeyboardInterrupt` if SIGINT arrived during this command, even when a solver's
    callback swallowed the exception (HiGHS's interrupt callbacks do): call it before writing."""
    if Interrupt.current is not None and Interrupt.current.seen:
        raise KeyboardInterrupt
