"""Run cases of the hostile corpus in this process, one after another; print the results as JSON.

Usage: ``python tests/data/hostile/run_corpus.py CORPUS_DIR NAME...``; ``CORPUS_DIR/outputs.json``
maps a case to the output path that replaces ``{out}`` in its arguments. Each case runs
``capplan.cli.main.main`` in its own folder with stderr captured, and records its exit code,
its error output and the CPU seconds it took. The caller sets the memory limit (RLIMIT_AS) on
this process; the last line also reports the process's peak resident memory, an upper bound
for every case. One interpreter for many cases keeps the corpus fast on a busy machine.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import resource
import sys
import time
from pathlib import Path


def main() -> None:
    """Run the named cases of the corpus and print one JSON object."""
    root = Path(sys.argv[1])
    cases = {c["name"]: c for c in json.loads((root / "cases.json").read_text(encoding="utf-8"))}
    outputs = json.loads((root / "outputs.json").read_text(encoding="utf-8"))
    from capplan.cli.main import main as capplan

    results = {}
    for name in sys.argv[2:]:
        case = cases[name]
        os.chdir(root / name)
        argv = [outputs[name] if a == "{out}" else a for a in case["argv"]]
        err = io.StringIO()
        start = time.process_time()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                code = capplan(argv)
            except SystemExit as exc:  # argparse refuses an option
                code = exc.code if isinstance(exc.code, int) else 1
        results[name] = {"code": code, "stderr": err.getvalue(), "cpu": time.process_time() - start}
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"results": results, "peak_rss_kib": peak}))


if __name__ == "__main__":
    main()
