"""Plan and schedule reports: a self-contained HTML page and a text view for terminals.

:func:`build_report` computes what a report shows (occupancy, idle and stranded capacity, cost,
power, the unplaced workloads and the nodes that came closest); :func:`render_html` and
:func:`render_text` draw it. :func:`read_result` reads a plan or a schedule file's data.

The names are loaded on first use (PEP 562; see :mod:`capplan.placement.heuristics` for why a
package does not import its own submodules).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from capplan.io.report.data import build_report, check_matches
    from capplan.io.report.html import render_html
    from capplan.io.report.prices import HOURS_PER_MONTH, Prices, catalog_prices, load_prices
    from capplan.io.report.schedule import Timed, Timeline, is_schedule, read_result
    from capplan.io.report.text import render_text

_HOMES = {
    "data": ("build_report", "check_matches"),
    "html": ("render_html",),
    "prices": ("HOURS_PER_MONTH", "Prices", "catalog_prices", "load_prices"),
    "schedule": ("Timed", "Timeline", "is_schedule", "read_result"),
    "text": ("render_text",),
}
_HOME = {name: module for module, names in _HOMES.items() for name in names}

__all__ = ["HOURS_PER_MONTH", "Prices", "Timed", "Timeline", "build_report", "catalog_prices", "check_matches",
           "is_schedule", "load_prices", "read_result", "render_html", "render_text"]


def __getattr__(name: str) -> Any:
    if name in _HOME:
        return getattr(import_module(f"{__name__}.{_HOME[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
