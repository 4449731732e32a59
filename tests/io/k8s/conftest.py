"""Fixtures for the Kubernetes tests: the sample exports in tests/data/k8s."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).parents[2] / "data" / "k8s"
LEVELS = [("block", "cloud.provider.com/topology-block"), ("rack", "cloud.provider.com/topology-rack")]
LEVEL_ARGS = [f"--level-label={lv}={lb}" for lv, lb in LEVELS]


def import_sample_argv(out: Path, *extra: str) -> list[str]:
    """``capplan import kubernetes`` of the sample nodes and pods to ``out``, with ``extra`` options."""
    return ["import", "kubernetes", "--nodes", str(DATA / "nodes.json"), "--pods", str(DATA / "pods.json"),
            *extra, "-o", str(out)]


@pytest.fixture
def nodes_doc() -> dict[str, Any]:
    """`kubectl get nodes -o json` of the sample cluster (H100, A100 mixed/single MIG, MI300X, CPU)."""
    return json.loads((DATA / "nodes.json").read_text())  # type: ignore[no-any-return]


@pytest.fixture
def pods_doc() -> dict[str, Any]:
    """`kubectl get pods -A -o json` plus PriorityClass, PyTorchJob, TrainJob, PodGroup, Workload."""
    return json.loads((DATA / "pods.json").read_text())  # type: ignore[no-any-return]


def k8s_main(argv: list[str]) -> int:
    """Run the k8s and sweep commands like ``capplan`` does (exit 2 on InputError), without other features."""
    import argparse

    from capplan.cli import k8s as cli
    from capplan.cli import sweep
    from capplan.model.errors import InputError

    parser = argparse.ArgumentParser(prog="capplan")
    sub = parser.add_subparsers(dest="command", required=True)
    imp = sub.add_parser("import").add_subparsers(dest="source", required=True)
    cli.add_import_parser(imp)
    cli.add_parser(sub)
    sweep.add_parser(sub)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except InputError as exc:
        print(f"error: {exc}")
        return 2
