"""The self-contained HTML report: one file, inline CSS, JavaScript and data, no network access.

The page embeds the report data (see :mod:`capplan.io.report.data`) as JSON and draws it with a
small script shipped beside this module (``assets/report.js``), so it opens from disk in any
modern browser and stays fast with tens of thousands of GPUs (one ``innerHTML`` per view).
"""

from __future__ import annotations

import json
from functools import cache
from html import escape
from importlib import metadata, resources
from typing import Any

_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="capplan {version}">
<link rel="icon" href="data:,">
<title>{title} · capplan report</title>
<style>
{css}
</style>
</head>
<body>
<header id="head"><h1>{title}</h1></header>
<nav>
<a href="#cluster">Cluster</a><a href="#priorities">Priorities</a><a href="#utilisation">Utilisation</a>
<a href="#power-sec">Power</a><a href="#unplaced-sec">Unplaced</a><a href="#goodput-sec">Goodput</a>
<a href="#cost-sec">Cost</a>
<a href="#timeline-sec" id="timeline-link"{timeline_hidden}>Timeline</a>
<span class="sp"></span>
<label>colour by <select id="colour"><option value="w">workload</option>
<option value="p">priority</option><option value="k">kind</option>
<option value="t">tenant</option></select></label>
</nav>
<main>
<section id="cluster"><h2>Cluster</h2>
<p class="note">Each box is a GPU. MIG instances sit at their start on the memory-slice axis (left to right);
time-sliced shares fill from the bottom; whole GPUs are filled. Grey: idle (some workload of the scenario could
use it). Hatched red: stranded (no workload of the scenario can use it as the cluster stands). Hover for details,
click to pin and highlight a workload; click a legend entry to highlight it.</p>
<div id="legend" class="legend"></div>
<div id="map"></div>
</section>
<div class="grid2">
<section id="priorities"><h2>Placed vs bound, per priority</h2><div id="prio"></div>
<p class="note">GPUs of demand placed at each priority (highest first), against the planner's proven upper
bound on what any plan could place there.</p></section>
<section id="utilisation"><h2>Utilisation by GPU model</h2><div id="util"></div>
<p class="note">GPU-equivalents: MIG instances count their compute slices, shares their fraction.</p></section>
<section id="power-sec"><h2>Power per domain</h2><div id="power"></div>
<p class="note">GPU draw counts the TDP of every GPU in use, as the planner's power rule does.</p></section>
<section id="cost-sec"><h2>Cost</h2><div id="cost"></div></section>
</div>
<section id="unplaced-sec"><h2>Unplaced workloads</h2><div id="unplaced"></div></section>
<section id="goodput-sec"><h2>Goodput under interruptions</h2><div id="goodput"></div>
<p class="note">Per gang with checkpoint: the share of wall time that is useful work (Daly 2006), per GPU
provisioned including the hot spares held idle for it (marked "spare" on the map).</p></section>
<section id="timeline-sec"{timeline_hidden}><h2>Timeline</h2>
<p class="note">One row per node and one thin lane per GPU in it: a bar is a replica from its start to its end
(MIG instances at their memory slices, shares stacked within the GPU; CPU-only replicas below the GPUs).</p>
<div id="timeline" class="tl"></div><div id="timeline-rows"></div></section>
<section id="compare-sec"{compare_hidden}><h2>Policies side by side</h2>
<p class="note">Per workload still to start: its run under each schedule (upper bar: the first, lower: the second),
and the GPU-hours of waiting (demand x (start - release)) the second saves.</p>
<div id="compare" class="tl"></div><div id="compare-rows"></div></section>
</main>
<div id="tip"></div>
<div id="details"></div>
<script id="report-data" type="application/json">{data}</script>
<script>
{js}
</script>
</body>
</html>
"""


def _version() -> str:
    try:
        return metadata.version("capplan")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "unknown"


@cache
def _asset(name: str) -> str:
    return (resources.files("capplan.io.report") / "assets" / name).read_text(encoding="utf-8")


def _json_for_script(data: Any) -> str:
    """JSON that cannot end the ``<script>`` element it sits in."""
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render_html(data: dict[str, Any]) -> str:
    """The report page for ``data`` (from :func:`~capplan.io.report.data.build_report`).

    Returns
    -------
    str
        A complete HTML document that needs no other file and no network.
    """
    return _PAGE.format(version=escape(_version()), title=escape(str(data["title"])), css=_asset("report.css"),
                        js=_asset("report.js"), data=_json_for_script(data),
                        timeline_hidden="" if "schedule" in data else ' style="display:none"',
                        compare_hidden="" if "compare" in data else ' style="display:none"')
