"""Markdown report and PNG plots (matplotlib, Agg backend) of a reservation plan."""

from __future__ import annotations

import io
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from capplan.reserve.result import Plan


def _money(x: float) -> str:
    return f"{x:,.0f}"


def markdown_report(plan: Plan, source: str = "") -> str:
    """Render the plan as Markdown: schedule, reservations, costs, tiers, coverage, what-ifs."""
    out: list[str] = [f"# Reservation plan{': ' + plan.name if plan.name else ''}", ""]
    if source:
        out += [f"Planning file: `{source}`", ""]
    sv = plan.solver
    out += [
        f"- Status: **{plan.status}** (solver {sv['backend']} {sv['status']}, {sv['runtime_s']} s, "
        f"{sv['variables']} variables, {sv['constraints']} constraints)",
        f"- Horizon: {plan.periods[0]} .. {plan.periods[-1]} ({len(plan.periods)} periods), "
        f"{len(plan.scenarios)} scenarios",
        f"- Expected total cost: **{_money(plan.costs['total'])}**",
        "",
    ]
    if plan.unmet:
        out += ["## Guaranteed demand that cannot be met", ""]
        out += [f"- {u.line()}" for u in plan.unmet]
        out.append("")
    out += ["## Order schedule", ""]
    if plan.orders:
        out += [
            "| order | model | site | GPUs | lots | ordered | arrives |",
            "|---|---|---|---:|---:|---|---|",
        ]
        out += [
            f"| {o.option} | {o.model} | {o.site} | {o.count} | {o.lots} | {o.order_period} | "
            f"{o.arrival_period} |"
            for o in plan.orders
        ]
    else:
        out.append("No purchases.")
    out += ["", "## Cloud reservations and calendar blocks", ""]
    if plan.commitments:
        out += ["| kind | option | model | GPUs | from | to |", "|---|---|---|---:|---|---|"]
        out += [
            f"| {c.kind} | {c.option} | {c.model} | {c.gpus} | {c.start_period} | {c.end_period} |"
            for c in plan.commitments
        ]
    else:
        out.append("None.")
    out += ["", "## Expected cost breakdown", "", "| category | expected cost |", "|---|---:|"]
    out += [f"| {k} | {_money(v)} |" for k, v in plan.costs.items()]
    out += [
        "",
        "## Service per tier",
        "",
        "| tier | kind | service level | P(shortfall) | expected shortfall (GPU-h) | worst (GPU-h) | met |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    out += [
        f"| {t.tier} | {t.kind} | {t.service_level:g} | {t.shortfall_probability:.3f} | "
        f"{t.expected_shortfall_gpu_hours:,.1f} | {t.worst_shortfall_gpu_hours:,.1f}"
        f"{' (' + t.worst_scenario + ')' if t.worst_scenario else ''} | {'yes' if t.met else 'NO'} |"
        for t in plan.tiers
    ]
    out += [
        "",
        "## Coverage (expected over scenarios, reference GPUs)",
        "",
        "| period | class | demand | served | on-demand + spot GPUs | shortfall | lost |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    prob = dict(zip(plan.scenarios, plan.probabilities, strict=True))
    agg: dict[tuple[str, str], list[float]] = {}
    for r in plan.coverage:
        a = agg.setdefault((r["period"], r["class"]), [0.0] * 5)
        q = prob[r["scenario"]]
        for i, x in enumerate(
            (r["demand"], r["served"], sum(r["recourse"].values()), r["shortfall"], r["lost"])
        ):
            a[i] += q * x
    out += [f"| {p} | {c} | " + " | ".join(f"{x:,.1f}" for x in a) + " |" for (p, c), a in agg.items()]
    if plan.what_if:
        out += [
            "",
            "## What-if deltas (against this plan)",
            "",
            "| what-if | status | total cost | delta | GPUs ordered delta |",
            "|---|---|---:|---:|---|",
        ]
        for w in plan.what_if:
            od = ", ".join(f"{k} {v:+d}" for k, v in w["orders_delta"].items()) or "none"
            out.append(
                f"| `{w['what_if']}` | {w['status']} | {_money(w['costs']['total'])} | "
                f"{w['cost_delta']['total']:+,.0f} | {od} |"
            )
    out += [
        "",
        "Plots: `demand_vs_capacity.png`, `cost_breakdown.png`. All fields: `plan.json` "
        "(see docs/reservations.md).",
        "",
    ]
    return "\n".join(out)


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


def demand_capacity_png(plan: Plan) -> bytes:
    """Demand fan (min, 10-90 % band, expected) vs committed capacity per period, all classes summed."""
    T, W = len(plan.periods), len(plan.scenarios)
    pi = {p: i for i, p in enumerate(plan.periods)}
    wi = {s: i for i, s in enumerate(plan.scenarios)}
    dem = np.zeros((W, T))
    rec = np.zeros((W, T))
    for r in plan.coverage:
        dem[wi[r["scenario"]], pi[r["period"]]] += r["demand"]
        rec[wi[r["scenario"]], pi[r["period"]]] += sum(r["recourse"].values())
    prob = np.array(plan.probabilities)
    own = np.zeros(T)
    cloud = np.zeros(T)
    for c in plan.capacity:
        own[pi[c["period"]]] += c["own"]
        cloud[pi[c["period"]]] += c["cloud"]
    x = np.arange(T)
    fig, ax = plt.subplots(figsize=(9, 4.5))
    order = np.argsort(dem, axis=0)
    cum = np.cumsum(prob[order], axis=0)

    def quant(q: float) -> Any:
        idx = (cum >= q - 1e-12).argmax(axis=0)
        return np.take_along_axis(dem, order, axis=0)[idx, np.arange(T)]

    ax.fill_between(x, dem.min(axis=0), dem.max(axis=0), alpha=0.15, color="tab:blue", label="demand min-max")
    ax.fill_between(x, quant(0.1), quant(0.9), alpha=0.3, color="tab:blue", label="demand 10-90 %")
    ax.plot(x, prob @ dem, color="tab:blue", label="expected demand")
    ax.step(x, own, where="mid", color="black", label="owned GPUs")
    ax.step(x, own + cloud, where="mid", color="tab:green", linestyle="--", label="owned + reserved cloud")
    ax.plot(x, own + cloud + prob @ rec, color="tab:orange", linestyle=":", label="+ expected on-demand/spot")
    ax.set_xticks(x[:: max(1, T // 12)], [plan.periods[i] for i in x[:: max(1, T // 12)]], rotation=45)
    ax.set_ylabel("GPUs (demand in reference GPUs)")
    ax.set_title("Demand fan vs capacity")
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return _png(fig)


def cost_breakdown_png(plan: Plan) -> bytes:
    """Horizontal bar chart of the expected cost per category."""
    items = [(k, v) for k, v in plan.costs.items() if k != "total"]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.barh([k for k, _ in items], [v for _, v in items], color="tab:purple")
    ax.invert_yaxis()
    ax.set_xlabel("expected cost over the horizon")
    ax.set_title(f"Cost breakdown (total {plan.costs['total']:,.0f})")
    fig.tight_layout()
    return _png(fig)
