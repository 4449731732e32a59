"""Issue 18 / 15: time to read a big scenario, with each YAML loader, and through ``load_scenario``.

Run: ``python benchmarks/load_bench.py [--repeat 5]``. Imports the default Alibaba trace (8,152 pods,
1,213 nodes) into a scenario file in a temporary folder, then prints a Markdown table of the median
seconds (and the ratio to PyYAML's pure-Python ``safe_load``, the loader capplan used before) of:
``yaml.safe_load``, ``yaml.load(Loader=CSafeLoader)``, capplan's bounded decoder
(:func:`capplan.model.decode.decode`) and the whole :func:`capplan.io.scenario.load_scenario`.
All loaders give the same data (checked). Recorded in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import yaml
from micro_bench import median_time

from capplan.io.alibaba import read_nodes, read_pods, trace_data
from capplan.io.scenario import load_scenario
from capplan.model.decode import decode

REPO = Path(__file__).resolve().parents[1]
# ../shared from the main checkout, ../../shared from a worktree under /work/wt
TRACE = next((p / "shared" / "data" / "alibaba-gpu-v2023" for p in (REPO.parent, REPO.parent.parent)
              if (p / "shared" / "data" / "alibaba-gpu-v2023").is_dir()), REPO.parent / "shared")


def main() -> None:
    """Print the table."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    nodes = read_nodes(TRACE / "openb_node_list_gpu_node.csv")
    pods = read_pods(TRACE / "openb_pod_list_default.csv")
    text = yaml.safe_dump(trace_data(nodes, pods, "default"), sort_keys=False, default_flow_style=None, width=200)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.yaml"
        path.write_text(text, encoding="utf-8")
        expected = yaml.load(text, Loader=yaml.CSafeLoader)
        assert decode(text) == expected == yaml.safe_load(text)
        rows = [
            ("yaml.safe_load (pure Python, before)", lambda: yaml.safe_load(text)),
            ("yaml.load(CSafeLoader)", lambda: yaml.load(text, Loader=yaml.CSafeLoader)),
            ("capplan decode (libyaml events, limits)", lambda: decode(text)),
            ("load_scenario (decode + validated Problem)", lambda: load_scenario(path)),
        ]
        base = None
        print(f"scenario: {len(text) / 1e6:.2f} MB, {len(nodes)} nodes, {len(pods)} workloads; "
              f"median of {args.repeat}\n")
        print("| loader | seconds | speed-up vs safe_load |\n|---|---:|---:|")
        for name, fn in rows:
            t = median_time(fn, args.repeat)
            base = base or t
            print(f"| {name} | {t:.3f} | {base / t:.1f}x |")


if __name__ == "__main__":
    main()
