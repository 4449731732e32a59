"""Regenerate the report screenshots in docs/ (docs/report.md shows them).

For each placement example in ``models/examples`` (those with a ``cluster``), plan it, write its
HTML report and photograph it in headless Chromium: the top of the page (header and cluster map)
and the tables below. PNGs are reduced to a 256-colour palette to stay small. Usage::

    python benchmarks/report_screenshots.py [--out docs] [--strategy auto]
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
from pathlib import Path

import yaml
from PIL import Image

from capplan.bench.browser import Browser
from capplan.io.report import build_report, render_html
from capplan.io.scenario import load_scenario
from capplan.placement import PlanOptions, solve

REPO = Path(__file__).resolve().parents[1]


def _small_png(png: bytes, path: Path) -> int:
    """Save ``png`` as a 256-colour PNG at ``path``; return its size in bytes."""
    img = Image.open(io.BytesIO(png)).convert("RGB")
    img.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)
    return path.stat().st_size


def main(argv: list[str] | None = None) -> int:
    """Write ``report-EXAMPLE.png`` and ``report-EXAMPLE-tables.png`` per example."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(REPO / "docs"))
    ap.add_argument("--strategy", default="auto")
    args = ap.parse_args(argv)
    out = Path(args.out)
    tmp = Path(tempfile.mkdtemp())
    examples = [f for f in sorted((REPO / "models" / "examples").glob("*.yaml"))
                if "cluster" in (yaml.safe_load(f.read_text(encoding="utf-8")) or {})]
    with Browser(width=1280, height=900) as b:
        for f in examples:
            p = load_scenario(f)
            plan = solve(p, args.strategy, PlanOptions(time_limit=30, seed=0))
            page = tmp / f"{f.stem}.html"
            page.write_text(render_html(build_report(p, plan)), encoding="utf-8")
            b.open(page.resolve().as_uri())
            top = b.evaluate("document.getElementById('cluster').getBoundingClientRect().bottom + window.scrollY")
            n1 = _small_png(b.screenshot(clip=(0, 0, 1280, top + 12)), out / f"report-{f.stem}.png")
            y = b.evaluate("document.getElementById('priorities').getBoundingClientRect().top + window.scrollY")
            h = b.evaluate("document.getElementById('unplaced-sec').getBoundingClientRect().bottom + window.scrollY")
            n2 = _small_png(b.screenshot(clip=(0, y - 8, 1280, h - y + 16)), out / f"report-{f.stem}-tables.png")
            print(f"{f.stem}: {plan.status}, {n1 // 1024} KiB + {n2 // 1024} KiB", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
