"""Plan and schedule reports: a self-contained HTML page and a text view for terminals.

:func:`build_report` computes what a report shows (occupancy, idle and stranded capacity, cost,
power, the unplaced workloads and the nodes that came closest); :func:`render_html` and
:func:`render_text` draw it. :func:`read_result` reads a plan or a schedule file's data.
"""

from capplan.io.report.data import build_report, check_matches
from capplan.io.report.html import render_html
from capplan.io.report.prices import HOURS_PER_MONTH, Prices, catalog_prices, load_prices
from capplan.io.report.schedule import Timed, Timeline, is_schedule, read_result
from capplan.io.report.text import render_text

__all__ = ["HOURS_PER_MONTH", "Prices", "Timed", "Timeline", "build_report", "catalog_prices", "check_matches",
           "is_schedule", "load_prices", "read_result", "render_html", "render_text"]
