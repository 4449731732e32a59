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

from capplan.io.report import build_report, render_html
from capplan.io.scenario import load_scenario
from capplan.placement import PlanOptions, solve
from capplan.testing.browser import Browser

REPO = Path(__file__).resolve().parents[1]


def _small_png(png: bytes, path: Path) -> int:
    """Save ``png`` as a 256-colour PNG at ``path``; return its size in bytes."""
    img = Image.open(io.BytesIO(png)).convert("RGB")
    img.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)
    return path.stat().st_size


def _fleet(b: Browser, gpus: int, tmp: Path, out: Path) -> None:
    """A screen of the benchmark fleet's report, coloured by tenant, at the first rack with stranded GPUs."""
    sys.path.insert(0, str(Path(__file__).parent))
    from report_bench import fleet

    from capplan.io.scenario import problem_from_data

    p = problem_from_data(fleet(gpus, 0))
    plan = solve(p, "heuristic", PlanOptions(time_limit=60, seed=0))
    page = tmp / "fleet.html"
    page.write_text(render_html(build_report(p, plan)), encoding="utf-8")
    b.resize(1280, 900)
    b.open(page.resolve().as_uri())
    b.evaluate("(() => { const s = document.getElementById('colour'); s.value = 't';"
               "s.dispatchEvent(new Event('change')); })()")
    # The first rack with stranded capacity (rack power budgets strand H100s in this fleet).
    b.evaluate("window.capplanReport.drawAll()")
    y = b.evaluate("(() => { const r = document.querySelector('#map .str').closest('.rack');"
                   "return r.getBoundingClientRect().top + window.scrollY; })()")
    b.evaluate(f"window.scrollTo(0, {y} - 44)")
    b.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    n = _small_png(b.screenshot(), out / f"report-fleet-{gpus}.png")
    print(f"fleet-{gpus}: {plan.status}, {n // 1024} KiB", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """Write ``report-EXAMPLE.png`` and ``report-EXAMPLE-tables.png`` per example."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(REPO / "docs"))
    ap.add_argument("--strategy", default="auto")
    ap.add_argument("--fleet", type=int, default=10_000,
                    help="also photograph the benchmark fleet of this many GPUs (0: skip)")
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
            data = build_report(p, plan)
            page.write_text(render_html(data), encoding="utf-8")
            b.resize(1280, 900)
            b.open(page.resolve().as_uri())
            # Draw every rack now (large pages draw far racks on scrolling), and show the whole page at
            # once, so that nothing moves between measuring and capturing.
            b.evaluate("window.capplanReport.drawAll()")
            for _ in range(2):
                b.resize(1280, int(b.evaluate("document.documentElement.scrollHeight")))
            top = b.evaluate("document.getElementById('cluster').getBoundingClientRect().bottom + window.scrollY")
            n1 = _small_png(b.screenshot(clip=(0, 0, 1280, top + 12)), out / f"report-{f.stem}.png")
            y = b.evaluate("document.getElementById('priorities').getBoundingClientRect().top + window.scrollY")
            h = b.evaluate("document.getElementById('unplaced-sec').getBoundingClientRect().bottom + window.scrollY")
            n2 = _small_png(b.screenshot(clip=(0, y - 8, 1280, h - y + 16)), out / f"report-{f.stem}-tables.png")
            if f.stem == "mig-inference":  # one picture of the hover details on a MIG instance
                k = next(k for k, a in enumerate(data["assignments"]) if a[4] and a[5] > 0)
                x, y = b.evaluate(f"(() => {{ const r = document.querySelector('#map .a[data-a=\"{k}\"]')"
                                  ".getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; })()")
                b.mouse("move", x, y)
                _small_png(b.screenshot(clip=(0, y - 120, 1280, 330)), out / f"report-{f.stem}-hover.png")
                b.mouse("move", 0, 0)
            print(f"{f.stem}: {plan.status}, {n1 // 1024} KiB + {n2 // 1024} KiB", file=sys.stderr)
        if args.fleet:
            _fleet(b, args.fleet, tmp, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
