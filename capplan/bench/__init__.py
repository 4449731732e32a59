"""Benchmark suite: online FGD-protocol simulation, baselines, batch planning, metrics and reports.

The online simulator (:mod:`capplan.bench.online.sim`) replays trace pods in arrival order against
per-GPU milli-GPU free arrays; policies (:mod:`capplan.bench.online.policies`) score nodes; the
protocols (:mod:`capplan.bench.protocols`) define arrival order, inflation and binning; the
runner (:mod:`capplan.bench.runner`) runs many (policy, seed) pairs in parallel and resumably.
"""
