"""Pod files where most GPU pods are tied to one GPU model, built from the default trace.

The shared data folder holds the default, ``cpu*`` and ``gpushare*`` pod files of the Alibaba v2023
family; none has a ``gpu_spec`` (its ``gpuspec*`` files are held out on purpose). To measure the online
policy where most pods accept one GPU model only, this script writes variants of
``openb_pod_list_default.csv`` with ``gpu_spec`` filled for a fraction of the GPU pods, drawn with a
fixed seed, and links the node files and the published results next to them, so the folder works
as ``--data`` of ``benchmarks/online_vs_fgd.py`` and ``benchmarks/online_latency.py``:

* ``spec<NN>``: NN% of the GPU pods tied to one model, drawn in proportion to the model's GPUs
  among the models with a node large enough for the pod (the demand per model stays in
  proportion to its capacity);
* ``specg2<NN>``: NN% of the GPU pods tied to ``G2`` (the largest model, 71% of the GPUs), where a
  G2 node can host them.

CPU-only pods and every other column are unchanged. Usage::

    python benchmarks/online_spec_traces.py [--data DIR] [-o OUT] [--variants spec60,spec90,specg260]
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "alibaba-gpu-v2023"
NODES = ("openb_node_list_gpu_node.csv", "openb_node_list_all_node.csv")
SEED = 2026


def tied(rows: list[dict[str, str]], nodes: list[dict[str, str]], share: float, only: str | None,
         seed: int = SEED) -> list[dict[str, str]]:
    """Copies of ``rows`` with ``gpu_spec`` set to one model on ``share`` of the GPU pods.

    ``only``: that model for every tied pod; ``None``: a model drawn in proportion to its GPUs among
    the models with a node of at least the pod's GPU count. Pods no such node can host stay untied.
    """
    rng = np.random.default_rng(seed)
    gpus: dict[str, int] = {}
    biggest: dict[str, int] = {}
    for n in nodes:
        g = int(n["gpu"])
        if g:
            gpus[n["model"]] = gpus.get(n["model"], 0) + g
            biggest[n["model"]] = max(biggest.get(n["model"], 0), g)
    models = sorted(gpus)
    out = []
    for r in rows:
        r = dict(r)
        num = int(r["num_gpu"])
        if num and rng.random() < share:
            ok = [m for m in models if biggest[m] >= num and (only is None or m == only)]
            if ok:
                w = np.array([gpus[m] for m in ok], dtype=np.float64)
                r["gpu_spec"] = ok[int(rng.choice(len(ok), p=w / w.sum()))]
        out.append(r)
    return out


def main() -> int:
    """Write the variants; exit 2 on an unknown variant name."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("-o", "--out", type=Path, default=Path("out-spec-traces"))
    ap.add_argument("--variants", default="spec60,spec90,specg260")
    args = ap.parse_args()
    want = []
    for v in (x.strip() for x in args.variants.split(",") if x.strip()):
        m = re.fullmatch(r"spec(g2)?(\d{1,3})", v)
        if m is None or int(m[2]) > 100:
            print(f"--variants: {v!r} is not spec<NN> or specg2<NN> with NN in 0..100", file=sys.stderr)
            return 2
        want.append((v, int(m[2]) / 100, "G2" if m[1] else None))
    with open(args.data / "openb_pod_list_default.csv", newline="") as fh:
        reader = csv.DictReader(fh)
        fields = list(reader.fieldnames or [])
        rows = list(reader)
    with open(args.data / NODES[0], newline="") as fh:
        nodes = list(csv.DictReader(fh))
    args.out.mkdir(parents=True, exist_ok=True)
    for name in (*NODES, "fgd-expected-results"):
        link = args.out / name
        if not link.exists():
            link.symlink_to((args.data / name).resolve())
    for name, share, only in want:
        got = tied(rows, nodes, share, only)
        with open(args.out / f"openb_pod_list_{name}.csv", "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=fields)
            w.writeheader()
            w.writerows(got)
        n = sum(1 for r in got if r["gpu_spec"])
        print(f"{name}: {n} of {sum(1 for r in got if int(r['num_gpu']))} GPU pods tied to one model")
    return 0


if __name__ == "__main__":
    sys.exit(main())
