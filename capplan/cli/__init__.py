"""The ``capplan`` command line: the only place with argparse, exit codes and console output.

One module per command, listed explicitly in :mod:`capplan.cli.main`; see ``docs/cli.md``.
"""

from __future__ import annotations

from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``capplan`` command; return the exit code (the console script's entry point)."""
    try:
        from capplan.cli.main import main as _main
    except KeyboardInterrupt:  # Ctrl-C while starting up: the documented "interrupted" path
        import sys

        print("interrupted", file=sys.stderr)
        return 1
    return _main(argv)


__all__ = ["main"]
