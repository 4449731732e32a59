"""Console output for people and for log readers: one clock, a level and a time on every log line.

Two kinds of lines go to stderr:

- **log records** (``logging``, shown with ``-v``, warnings always): in ``--log-format text``
  ``2026-12-04T02:30:01.250Z INFO capplan +1.49s: scenario loaded ...``; in ``json`` one object per
  line, ``{"time", "elapsed_s", "level", "logger", "message"}``;
- **the command's own report** (the summary, per-scenario lines of ``sweep``, ``error:`` lines):
  plain text in ``text`` (what a person reads), the same records as the log in ``json``.

Every elapsed time counts from the start of the command (:func:`start`): the log, the progress
lines and ``--summary-json``'s ``wall_seconds`` share that one clock.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from datetime import UTC, datetime
from typing import Any

FORMATS = ("text", "json")
_state: dict[str, Any] = {"format": "text", "t0": time.perf_counter(), "wall0": time.time()}


def start(log_format: str = "text") -> None:
    """Start the command's clock and choose the console format (``text`` or ``json``)."""
    _state.update(format=log_format, t0=time.perf_counter(), wall0=time.time())


def elapsed() -> float:
    """Seconds since :func:`start` (the one clock of the command)."""
    return time.perf_counter() - float(_state["t0"])


def is_json() -> bool:
    """Whether the console speaks JSON lines."""
    return bool(_state["format"] == "json")


def _stamp(when: float) -> str:
    return datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{int(when * 1000) % 1000:03d}Z"


def _record(level: str, message: str, logger: str = "capplan", **fields: Any) -> str:
    out = {"time": _stamp(time.time()), "elapsed_s": round(elapsed(), 3), "level": level, "logger": logger,
           "message": message}
    out.update(fields)
    return json.dumps(out, ensure_ascii=False)


class _Formatter(logging.Formatter):
    """Log records with the time, the level and the command's clock (text or JSON lines)."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        if record.exc_info:
            message += "\n" + self.formatException(record.exc_info)
        since = record.created - float(_state["wall0"])
        if is_json():
            return json.dumps({"time": _stamp(record.created), "elapsed_s": round(since, 3),
                               "level": record.levelname.lower(), "logger": record.name, "message": message},
                              ensure_ascii=False)
        return f"{_stamp(record.created)} {record.levelname} {record.name} +{since:.2f}s: {message}"


def configure_logging(verbose: bool) -> None:
    """Send log records to stderr in the chosen format (INFO with ``-v``, else WARNING)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter())
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, handlers=[handler])


def say(message: str, level: str = "info", **fields: Any) -> None:
    """One line (or several) of the command's own report on stderr.

    In text, printed as given; in JSON, one record per line with ``level`` and ``fields``.
    """
    if not is_json():
        print(message, file=sys.stderr)
        return
    for line in message.splitlines() or [""]:
        print(_record(level, line, **fields), file=sys.stderr)


def error(message: str) -> None:
    """An ``error:`` line (text) or an ``error`` record (JSON)."""
    say(message if is_json() else f"error: {message}", "error")
