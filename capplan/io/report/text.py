"""The plan as text for terminals (``capplan show``): per rack and node, one character per GPU.

A GPU is drawn as the letter of the workload holding most of it (upper case when the GPU is full,
lower case when part of it is free), ``.`` when it is free and idle, and ``x`` when it is free and
stranded (no workload of the scenario can use it).
"""

from __future__ import annotations

from typing import Any

_SYMBOLS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def _symbols(data: dict[str, Any]) -> dict[int, str]:
    """Workload index -> its symbol, for workloads that hold a GPU, in scenario order."""
    used = sorted({data["assignments"][u[0]][0] for row in data["cells"] for c in row for u in c[1]})
    return {w: _SYMBOLS[k] if k < len(_SYMBOLS) else "*" for k, w in enumerate(used)}


def _cell(c: list[Any], sym: dict[int, str], assignments: list[list[Any]]) -> str:
    mode, used, idle, stranded = c[0], c[1], c[2], c[3]
    if not used:
        return "x" if stranded else "."
    area: dict[int, float] = {}
    for u in used:
        w = assignments[u[0]][0]
        area[w] = area.get(w, 0.0) + (u[2] - u[1]) * (u[4] - u[3])
    top = max(sorted(area), key=lambda w: area[w])
    s = sym.get(top, "*")
    return s.lower() if (idle or stranded) and mode != 1 else s


def _gpus(x: float) -> str:
    return f"{x:.2f}".rstrip("0").rstrip(".")


def render_text(data: dict[str, Any], width: int = 100) -> str:
    """The text view of report data (from :func:`~capplan.io.report.data.build_report`).

    Parameters
    ----------
    data
        The report data.
    width
        Most characters per line before a node's GPUs wrap.
    """
    sym = _symbols(data)
    nodes, cells, asg = data["nodes"], data["cells"], data["assignments"]
    models = data["models"]
    plan, tot, cost = data["plan"], data["totals"], data["cost"]
    cur = "$" if data["currency"] == "USD" else data["currency"] + " "
    g = tot["gpus"] or 1
    lines = [f"{data['title']} · {plan['kind']} {plan['status']} ({plan['strategy']}), "
             + plan.get("gap_text", f"gap {plan['gap']:.2%}"),
             f"GPUs {tot['gpus']}: {_gpus(tot['allocated'])} allocated ({tot['allocated'] / g:.1%}), "
             f"{_gpus(tot['idle'])} idle, {_gpus(tot['stranded'])} stranded · "
             f"{cur}{cost['per_hour']['total']:,.2f}/h, {cur}{cost['per_month']['total']:,.0f}/month "
             f"({cur}{cost['per_month']['stranded']:,.0f} stranded)"
             + (f" · unpriced: {cost['unpriced_gpus']:,} GPUs ({', '.join(cost['unpriced_models'])})"
                if cost.get("unpriced_gpus") else ""), ""]
    rc = data.get("reconfigured") or {}
    if rc.get("gpus"):
        many = "GPUs change" if rc["gpus"] != 1 else "GPU changes"
        lines.insert(-1, f"reconfigured: {rc['gpus']} {many} mode or MIG layout; drain "
                         f"{', '.join(rc['nodes'])} before applying")
    if "horizon" in cost:
        hz = cost["horizon"]
        lines.insert(-1, f"over the horizon ({hz['hours']:g} h): {_gpus(hz['gpu_hours'])} GPU-hours scheduled, "
                         f"{cur}{hz['allocated']:,.2f} allocated of {cur}{hz['capacity']:,.2f} capacity")
    name_w = max((len(n["name"]) for n in nodes), default=4)
    model_w = max((len(m["name"]) for m in models), default=0)
    power = {(p["level"], p["name"]): p for p in data["power"]}

    def node_line(i: int, indent: str) -> None:
        n = nodes[i]
        model = models[n["model"]]["name"] if n["model"] >= 0 else "-"
        row = "".join(_cell(c, sym, asg) for c in cells[i])
        used = sum(1 for c in cells[i] if c[1])
        head = f"{indent}{n['name']:<{name_w}}  {model:<{model_w}}  "
        room = max(8, width - len(head) - 12)
        chunks = [row[k:k + room] for k in range(0, len(row), room)] or ["(no GPUs)"]
        spare = f"  spare for {n['spare_for']}" if n.get("spare_for") else ""
        changed = [str(g) for g, c in enumerate(cells[i]) if len(c) > 6 and c[6]]
        if changed:
            spare += f"  reconfigures GPU{'s' if len(changed) > 1 else ''} {', '.join(changed)} (drain first)"
        lines.append(f"{head}{chunks[0]}  {used}/{n['gpus']} in use{spare}" if n["gpus"] else f"{head}(no GPUs)")
        lines.extend(" " * len(head) + c for c in chunks[1:])

    def walk(d: dict[str, Any], depth: int) -> None:
        indent = "  " * depth
        if d["name"]:
            p = power.get((d["level"], d["name"]))
            pw = ""
            if p is not None:
                pw = (f"  power {p['draw_w'] / 1000:g}/{p['budget_w'] / 1000:g} kW" if p["budget_w"] is not None
                      else f"  power {p['draw_w'] / 1000:g} kW")
            lines.append(f"{indent}{d['level']} {d['name']}{pw}")
            indent += "  "
        for c in d["children"]:
            walk(c, depth + (1 if d["name"] else 0))
        for i in d["nodes"]:
            node_line(i, indent)

    for d in data["tree"]:
        walk(d, 0)
    lines.append("")
    names = [f"{s} {data['workloads'][w]['name']}" for w, s in sym.items()]
    lines.append("legend: " + ", ".join(names) if names else "legend: no GPU is in use")
    lines.append("        lower case: part of the GPU is free; . idle; x stranded (no workload can use it)")
    for r in data.get("goodput", []):
        spares = f" + {r['spares']} spare{'s' if r['spares'] != 1 else ''}" if r["spares"] else ""
        lines.append(f"goodput {r['workload']}: {r['goodput']:.2%} ({r['goodput_per_provisioned_gpu']:.2%} per "
                     f"provisioned GPU), {r['nodes']} nodes{spares}, checkpoint every "
                     f"{r['checkpoint_interval_s'] / 3600:.2f} h, {r['lost_gpu_hours_per_day']:.1f} GPU-h lost/day")
    for u in data["unplaced"]:
        w = data["workloads"][u["workload"]]
        near = ", ".join(nodes[i]["name"] for i, _ in u["closest"])
        lines.append(f"unplaced {w['name']} x{len(u['replicas'])}: {u['reason']}"
                     + (f" (closest: {near})" if near else ""))
    return "\n".join(lines) + "\n"
