"""Markdown report and PNG plots (matplotlib, Agg backend) of a reservation plan.

Units: demand, service, backlog and shortfall are in *reference GPUs* of each class (a class's
demand divided by the throughput of the models it runs on); capacity is in physical GPUs. The
report and the chart keep the two apart: every axis and column names its unit.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from capplan.reserve.result import Plan
from capplan.reserve.tables import cost_label

Arr = npt.NDArray[np.float64]


def _money(x: float) -> str:
    return f"{x:,.0f}"


def markdown_report(plan: Plan, source: str = "") -> str:
    """Render the plan as Markdown: schedule, reservations, costs, tiers, coverage, what-ifs."""
    out = _header(plan, source)
    if plan.unmet:
        out += ["## Guaranteed demand that cannot be met", ""]
        out += [f"- {u.line()}" for u in plan.unmet]
        out.append("")
    out += _schedule(plan) + _costs_and_tiers(plan) + _effective(plan) + _coverage(plan) + _what_ifs(plan)
    out += [
        "",
        "Plots: `demand_vs_capacity.png`, `cost_breakdown.png`. All fields: `plan.json` "
        "(see docs/reservations.md).",
        "",
    ]
    return "\n".join(out)


def _header(plan: Plan, source: str) -> list[str]:
    out: list[str] = [f"# Reservation plan{': ' + plan.name if plan.name else ''}", ""]
    if source:
        out += [f"Planning file: `{source}`", ""]
    sv = plan.solver
    return [
        *out,
        f"- Status: **{plan.status}** (solver {sv['backend']} {sv['status']}, {sv['runtime_s']} s, "
        f"{sv['variables']} variables, {sv['constraints']} constraints)",
        f"- Horizon: {plan.periods[0]} .. {plan.periods[-1]} ({len(plan.periods)} periods), "
        f"{len(plan.scenarios)} scenarios",
        f"- Expected total cost: **{_money(plan.costs['total'])}**",
        "",
    ]


def _schedule(plan: Plan) -> list[str]:
    out = ["## Order schedule", ""]
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
    return out


def _costs_and_tiers(plan: Plan) -> list[str]:
    out = ["", "## Expected cost breakdown", "", "| category | expected cost |", "|---|---:|"]
    out += [f"| {cost_label(k)} | {_money(v)} |" for k, v in plan.costs.items()]
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
    return out


#: columns of the coverage table, in order (reference GPUs except on-demand + spot)
COVERAGE_COLUMNS = ("demand", "backlog in", "served", "on-demand + spot (GPUs)", "shortfall", "lost", "backlog out")


def coverage_table(plan: Plan) -> dict[tuple[str, str], dict[str, float]]:
    """Expected coverage per (period, class) over the scenarios, keyed by :data:`COVERAGE_COLUMNS`.

    ``backlog in`` is the flexible demand deferred from the previous period and ``backlog out``
    what this period defers, so ``served = demand + backlog in - shortfall - lost - backlog out``.
    """
    prob = dict(zip(plan.scenarios, plan.probabilities, strict=True))
    pi = {p: i for i, p in enumerate(plan.periods)}
    carried = {(r["scenario"], r["class"], pi[r["period"]]): r["backlog"] for r in plan.coverage}
    agg: dict[tuple[str, str], dict[str, float]] = {}
    for r in plan.coverage:
        a = agg.setdefault((r["period"], r["class"]), dict.fromkeys(COVERAGE_COLUMNS, 0.0))
        q = prob[r["scenario"]]
        values = (
            r["demand"],
            carried.get((r["scenario"], r["class"], pi[r["period"]] - 1), 0.0),
            r["served"],
            sum(r["recourse"].values()),
            r["shortfall"],
            r["lost"],
            r["backlog"],
        )
        for k, x in zip(COVERAGE_COLUMNS, values, strict=True):
            a[k] += q * x
    return agg


def _coverage(plan: Plan) -> list[str]:
    out = [
        "",
        "## Coverage (expected over scenarios, reference GPUs)",
        "",
        "Flexible demand may be deferred: `backlog in` arrives from the previous period and `backlog out` "
        "is carried to the next, so served = demand + backlog in - shortfall - lost - backlog out. "
        "On-demand and spot are physical GPUs.",
        "",
        "| period | class | " + " | ".join(COVERAGE_COLUMNS) + " |",
        "|---|---|" + "---:|" * len(COVERAGE_COLUMNS),
    ]
    out += [
        f"| {p} | {c} | " + " | ".join(f"{a[k]:,.1f}" for k in COVERAGE_COLUMNS) + " |"
        for (p, c), a in coverage_table(plan).items()
    ]
    return out


def _effective(plan: Plan) -> list[str]:
    """The price per useful GPU-hour of each on-demand and spot option, per class."""
    if not plan.effective_prices:
        return []
    out = ["## Price per useful GPU-hour (on-demand and spot)", "",
           "Useful share: the goodput of the class's gang under the option's interruptions (with `checkpoint` "
           "and `interruptions_per_node_hour`), else 1 - interruption_rate.", "",
           "| class | option | price / GPU-h | useful share | per useful GPU-h | per useful reference GPU-h |",
           "|---|---|---:|---:|---:|---:|"]
    for r in plan.effective_prices:
        per = "-" if r["per_useful_gpu_hour"] is None else f"{r['per_useful_gpu_hour']:.3f}"
        ref = "-" if r["per_useful_reference_gpu_hour"] is None else f"{r['per_useful_reference_gpu_hour']:.3f}"
        out.append(f"| {r['class']} | {r['option']} | {r['price_per_gpu_hour']:.3f} | {r['useful_share']:.4f} "
                   f"| {per} | {ref} |")
    return [*out, ""]


def _what_ifs(plan: Plan) -> list[str]:
    if not plan.what_if:
        return []
    out = [
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
    return out


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    FigureCanvasAgg(fig)  # the figure's own canvas: no pyplot state, no global backend switch (thread-safe)
    fig.savefig(buf, format="png", dpi=110, metadata={"Software": None})
    return buf.getvalue()


@dataclass(frozen=True)
class ChartSeries:
    """What the demand-vs-capacity chart draws, per period.

    Reference GPUs (per scenario, ``(scenarios, periods)``): ``demand``, ``served``,
    ``backlog_out`` (deferred to the next period), ``unmet`` (shortfall + lost). Physical GPUs
    (``(periods,)``): ``own`` (fleet, in-flight and purchased), ``cloud`` (reserved terms and
    calendar blocks), ``in_use`` (committed GPUs the classes use, expected) and ``recourse``
    (on-demand + spot, expected).
    """

    demand: Arr
    served: Arr
    backlog_out: Arr
    unmet: Arr
    own: Arr
    cloud: Arr
    in_use: Arr
    recourse: Arr
    prob: Arr


def chart_series(plan: Plan) -> ChartSeries:
    """Sum the plan's coverage and capacity rows over classes and models, per scenario and period."""
    T, W = len(plan.periods), len(plan.scenarios)
    pi = {p: i for i, p in enumerate(plan.periods)}
    wi = {s: i for i, s in enumerate(plan.scenarios)}
    ref = {k: np.zeros((W, T)) for k in ("demand", "served", "backlog_out", "unmet", "in_use", "recourse")}
    for r in plan.coverage:
        at = wi[r["scenario"]], pi[r["period"]]
        ref["demand"][at] += r["demand"]
        ref["served"][at] += r["served"]
        ref["backlog_out"][at] += r["backlog"]
        ref["unmet"][at] += r["shortfall"] + r["lost"]
        ref["in_use"][at] += sum(r["committed"].values())
        ref["recourse"][at] += sum(r["recourse"].values())
    own, cloud = np.zeros(T), np.zeros(T)
    for c in plan.capacity:
        own[pi[c["period"]]] += c["own"]
        cloud[pi[c["period"]]] += c["cloud"]
    prob = np.array(plan.probabilities)
    return ChartSeries(
        ref["demand"], ref["served"], ref["backlog_out"], ref["unmet"], own, cloud,
        prob @ ref["in_use"], prob @ ref["recourse"], prob,
    )


def _quantile(values: Arr, prob: Arr, q: float) -> Arr:
    """Per column of ``values`` (scenarios x periods), the ``q`` quantile under ``prob``."""
    order = np.argsort(values, axis=0)
    cum = np.cumsum(prob[order], axis=0)
    idx = (cum >= q - 1e-12).argmax(axis=0)
    return np.take_along_axis(values, order, axis=0)[idx, np.arange(values.shape[1])]  # type: ignore[no-any-return]


def demand_capacity_figure(plan: Plan) -> Figure:
    """Two panels sharing the periods: demand vs service (reference GPUs) and capacity (GPUs)."""
    cs = chart_series(plan)
    T = len(plan.periods)
    x = np.arange(T)
    fig = Figure(figsize=(11, 7.5))
    top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=(3, 2))
    dem, p = cs.demand, cs.prob
    top.fill_between(x, dem.min(axis=0), dem.max(axis=0), alpha=0.15, color="tab:blue", label="demand min-max")
    top.fill_between(
        x, _quantile(dem, p, 0.1), _quantile(dem, p, 0.9), alpha=0.3, color="tab:blue", label="demand 10-90 %"
    )
    top.plot(x, p @ dem, color="tab:blue", label="expected demand")
    served, deferred, unmet = p @ cs.served, p @ cs.backlog_out, p @ cs.unmet
    top.plot(x, served, color="black", marker="o", markersize=3, label="expected served")
    if deferred.any():
        top.fill_between(x, served, served + deferred, color="tab:olive", alpha=0.5, step=None,
                         label="deferred to the next period (backlog)")
        carried = np.concatenate(([0.0], deferred[:-1]))
        top.plot(x, p @ dem + carried, color="tab:olive", linestyle=":",
                 label="expected demand + backlog from the previous period")
    if unmet.any():
        top.fill_between(x, served + deferred, served + deferred + unmet, color="tab:red", alpha=0.5,
                         label="expected shortfall + lost")
    top.set_ylabel("reference GPUs (demand units)")
    top.set_title("Demand and service (reference GPUs: throughput of each class's reference model)", fontsize=10)
    top.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    bottom.step(x, cs.own, where="mid", color="black", label="owned GPUs (fleet, in-flight, purchases)")
    if cs.cloud.any():
        bottom.step(x, cs.own + cs.cloud, where="mid", color="tab:green", linestyle="--",
                    label="+ reserved cloud and calendar blocks")
    bottom.step(x, cs.own + cs.cloud + cs.recourse, where="mid", color="tab:orange", linestyle=":",
                label="+ expected on-demand/spot")
    bottom.step(x, cs.in_use + cs.recourse, where="mid", color="tab:purple", alpha=0.8,
                label="expected GPUs in use (incl. on-demand/spot)")
    bottom.set_ylabel("physical GPUs")
    bottom.set_title("Capacity (physical GPUs, all models)", fontsize=10)
    bottom.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ticks = x[:: max(1, T // 12)]
    bottom.set_xticks(ticks, [plan.periods[i] for i in ticks], rotation=45)
    fig.tight_layout()
    return fig


def demand_capacity_png(plan: Plan) -> bytes:
    """The chart of :func:`demand_capacity_figure` as PNG bytes."""
    return _png(demand_capacity_figure(plan))


def cost_breakdown_png(plan: Plan, currency: str = "USD") -> bytes:
    """Horizontal bar chart of the expected cost per category (human labels, amounts in ``currency``)."""
    items = [(cost_label(k), v) for k, v in plan.costs.items() if k != "total"]
    fig = Figure(figsize=(7, 4))
    ax = fig.subplots()
    ax.barh([k for k, _ in items], [v for _, v in items], color="tab:purple")
    ax.invert_yaxis()
    ax.set_xlabel(f"expected cost over the horizon ({currency})")
    ax.set_title(f"Cost breakdown (total {plan.costs['total']:,.0f} {currency})")
    fig.tight_layout()
    return _png(fig)
