"""Tools for testing capplan and strategies added to it.

:mod:`capplan.testing.conformance` is the battery every planning and scheduling strategy must pass
(:func:`check_strategy`, :func:`check_schedule_strategy`); :mod:`capplan.testing.browser` drives a
headless Chromium to check the HTML report as a person sees it. Nothing in the product imports this
package.
"""

from __future__ import annotations

from capplan.testing.conformance import (
    Check,
    check_schedule_strategy,
    check_strategy,
    schedule_checks,
    strategy_checks,
)

__all__ = ["Check", "check_schedule_strategy", "check_strategy", "schedule_checks", "strategy_checks"]
