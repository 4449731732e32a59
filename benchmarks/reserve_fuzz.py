"""Fuzz campaign for ``reserve``: tiny planning files, known answers by exhaustive lot search, four invariants.

Each seed draws a tiny planning file: one site without power costs, 2-3 periods of one hour, one class of
H100 GPUs (guaranteed, or flexible with a penalty per lost GPU-hour), one purchase option (lead time 0-1,
lot 1-4, a unit cost depreciated over the horizon's periods) beside on-demand H100s, 1-3 scenarios with
demands of 0-6 GPUs. It is solved with ``auto`` (and the decomposition on every fifth seed) and checked:

- **internal errors**: any exception;
- **invalid**: :func:`capplan.reserve.check.check_plan` finds a violation;
- **false claims**: the plan says ``optimal`` and costs more than the exhaustive search's optimum (every count
  of lots in every order period, the recourse priced from the rules alone: on-demand or the penalty for each
  GPU-hour of demand above the purchases in service), or costs less (a wrong oracle or a wrong cost);
- **invariants**, each on a solve of a changed file: more demand (one scenario-period + 1..3 GPUs) never
  lowers the cost; a longer lead time (+1) never lowers it; a free option (a spot H100 at any price, usable
  by the class) never raises it; scaling every price and penalty by k scales the cost by k;
- **overruns**: a solve's wall time above 1.1 x limit + 1 s.

``python -m benchmarks.reserve_fuzz --first 0 --count 500`` prints one JSON line per finding and a summary.
"""

from __future__ import annotations

import argparse
import copy
import itertools
import json
import os
import random
import time
import traceback
from typing import Any

LIMIT = 5.0
#: plan costs are rounded to cents
CENT = 0.005 + 1e-9
MODEL = "H100-SXM5"


def generate(seed: int) -> dict[str, Any]:
    """One tiny planning file (see the module docstring)."""
    rnd = random.Random(seed)
    periods = rnd.choice([2, 3])
    guaranteed = rnd.random() < 0.6
    n = rnd.randint(1, 3)
    weights = [rnd.randint(1, 4) for _ in range(n)]
    probs = [round(w / sum(weights), 6) for w in weights]
    probs[-1] = round(1 - sum(probs[:-1]), 6)
    tier: dict[str, Any] = ({"name": "t", "kind": "guaranteed"} if guaranteed else
                            {"name": "t", "kind": "flexible", "penalty_per_gpu_hour": rnd.choice([3, 5, 8]),
                             "spot": True})
    options: dict[str, Any] = {
        "purchases": [{"model": MODEL, "lead_time": rnd.choice([0, 1]), "unit_cost": rnd.choice([2, 5, 9, 14]),
                       "lot_size": rnd.choice([1, 2, 4]), "depreciation_periods": periods}],
    }
    if guaranteed or rnd.random() < 0.5:
        options["on_demand"] = [{"model": MODEL, "price_per_gpu_hour": rnd.choice([2, 4, 6])}]
    return {
        "name": f"fuzz-{seed}",
        "horizon": {"start": "2027-01", "periods": periods, "hours_per_period": 1},
        "sites": [{"name": "s"}],
        "tiers": [tier],
        "classes": [{"name": "c", "tier": "t", "models": {MODEL: 1.0}}],
        "options": options,
        "scenarios": [{"name": f"w{i}", "probability": probs[i],
                       "demand": {"c": [rnd.randint(0, 6) for _ in range(periods)]}} for i in range(n)],
    }


def oracle(d: dict[str, Any]) -> float:
    """The least expected cost over every count of lots in every order period (from the rules alone)."""
    periods = d["horizon"]["periods"]
    po = d["options"]["purchases"][0]
    lead, lot, cost = po["lead_time"], po["lot_size"], po["unit_cost"] / po["depreciation_periods"]
    od = d["options"].get("on_demand")
    tier = d["tiers"][0]
    short_price = od[0]["price_per_gpu_hour"] if od else None
    if tier["kind"] == "flexible":
        short_price = min(x for x in (short_price, tier["penalty_per_gpu_hour"]) if x is not None)
    assert short_price is not None
    peak = max(max(sc["demand"]["c"]) for sc in d["scenarios"])
    most = -(-peak // lot)  # more lots than the peak needs only add cost
    orders = [q for q in range(periods) if q + lead < periods]
    best = float("inf")
    for counts in itertools.product(range(most + 1), repeat=len(orders)):
        cap = [0] * periods
        capex = 0.0
        for q, k in zip(orders, counts, strict=True):
            for t in range(q + lead, periods):
                cap[t] += k * lot
                capex += k * lot * cost
        if max(cap) > most * lot:
            continue
        recourse = sum(sc["probability"] * sum(max(0, x - c) for x, c in zip(sc["demand"]["c"], cap, strict=True))
                       for sc in d["scenarios"]) * short_price
        best = min(best, capex + recourse)
    return best


def _solve(d: dict[str, Any], method: str) -> tuple[Any, Any, float]:
    from capplan.reserve.model import parse_planning
    from capplan.reserve.planner import solve
    from capplan.reserve.problem import build_problem
    from capplan.reserve.solver import SolverSettings

    pr = build_problem(parse_planning(d, "fuzz"))
    t0 = time.perf_counter()
    plan = solve(pr, SolverSettings(time_limit=LIMIT, gap=1e-9, method=method))
    return pr, plan, time.perf_counter() - t0


def _variants(d: dict[str, Any], rnd: random.Random) -> list[tuple[str, dict[str, Any], float]]:
    """(invariant, changed file, factor): the changed cost must be >= (factor > 0: == factor x) the base."""
    out: list[tuple[str, dict[str, Any], float]] = []
    more = copy.deepcopy(d)
    sc = rnd.choice(more["scenarios"])
    t = rnd.randrange(len(sc["demand"]["c"]))
    sc["demand"]["c"][t] += rnd.randint(1, 3)
    out.append(("more demand never lowers cost", more, 0.0))
    longer = copy.deepcopy(d)
    longer["options"]["purchases"][0]["lead_time"] += 1
    out.append(("longer lead never lowers cost", longer, 0.0))
    free = copy.deepcopy(d)
    free["options"]["spot"] = [{"model": MODEL, "price_per_gpu_hour": rnd.choice([0, 1, 3, 20])}]
    free["tiers"][0]["spot"] = True
    if free["tiers"][0]["kind"] == "flexible":
        out.append(("a free option never raises cost", free, -1.0))
    k = rnd.choice([0.5, 2.0, 3.0])
    scaled = copy.deepcopy(d)
    scaled["options"]["purchases"][0]["unit_cost"] *= k
    for od in scaled["options"].get("on_demand", []):
        od["price_per_gpu_hour"] *= k
    if "penalty_per_gpu_hour" in scaled["tiers"][0]:
        scaled["tiers"][0]["penalty_per_gpu_hour"] *= k
    out.append(("scaling prices scales cost", scaled, k))
    return out


def run_seed(seed: int) -> tuple[list[dict[str, Any]], int]:
    """Solve seed ``seed`` and its variants; (the findings, the number of solves)."""
    from capplan.reserve.check import check_plan

    d = generate(seed)
    rnd = random.Random(seed + 1)
    found: list[dict[str, Any]] = []
    solves = 0
    best = oracle(d)
    methods = ["auto"] + (["decomposition"] if seed % 5 == 0 else [])
    base_cost: float | None = None
    for method in methods:
        try:
            pr, plan, wall = _solve(d, method)
        except Exception as exc:
            found.append({"seed": seed, "method": method, "kind": "internal error",
                          "error": f"{type(exc).__name__}: {exc}"[:300], "trace": traceback.format_exc(limit=3)[-600:]})
            continue
        solves += 1
        if wall > 1.1 * LIMIT + 1:
            found.append({"seed": seed, "method": method, "kind": "overrun", "wall": round(wall, 2)})
        bad = check_plan(pr, plan)
        if bad:
            found.append({"seed": seed, "method": method, "kind": "invalid", "violations": bad[:3]})
        cost = plan.costs["total"]
        status = plan.solver.get("status")
        if cost < best - CENT:
            found.append({"seed": seed, "method": method, "kind": "oracle wrong?", "cost": cost, "best": best})
        if status == "optimal" and cost > best + CENT:
            found.append({"seed": seed, "method": method, "kind": "false claim", "cost": cost, "best": best})
        if method == "auto":
            base_cost = cost
    if base_cost is None:
        return found, solves
    for name, changed, factor in _variants(d, rnd):
        try:
            pr, plan, wall = _solve(changed, "auto")
        except Exception as exc:
            found.append({"seed": seed, "variant": name, "kind": "internal error",
                          "error": f"{type(exc).__name__}: {exc}"[:300]})
            continue
        solves += 1
        if wall > 1.1 * LIMIT + 1:
            found.append({"seed": seed, "variant": name, "kind": "overrun", "wall": round(wall, 2)})
        if check_plan(pr, plan):
            found.append({"seed": seed, "variant": name, "kind": "invalid"})
        cost = plan.costs["total"]
        broken = (cost < base_cost - 2 * CENT if factor == 0.0 else cost > base_cost + 2 * CENT if factor < 0
                  else abs(cost - factor * base_cost) > (1 + factor) * CENT)
        if broken:
            found.append({"seed": seed, "variant": name, "kind": "invariant broken", "base": base_cost,
                          "changed": cost, "factor": factor})
    return found, solves


def main(argv: list[str] | None = None) -> None:
    """Run seeds ``first .. first + count - 1``; one JSON line per finding, then a summary line."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--first", type=int, default=0)
    ap.add_argument("--count", type=int, default=100)
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    counts: dict[str, int] = {}
    solves = 0
    for seed in range(a.first, a.first + a.count):
        found, n = run_seed(seed)
        solves += n
        for f in found:
            counts[f["kind"]] = counts.get(f["kind"], 0) + 1
            print(json.dumps(f), flush=True)
    print(json.dumps({"instances": a.count, "solves": solves, "findings": counts,
                      "seconds": round(time.perf_counter() - t0, 1), "load1": round(os.getloadavg()[0], 2)}),
          flush=True)


if __name__ == "__main__":
    main()
