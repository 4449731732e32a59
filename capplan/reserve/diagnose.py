"""Explain an unmet guaranteed tier: where the shortfall lands and which constraints bind there.

Works on the plan's decisions (orders, capacity per site) and the problem data, not on solver
internals: a constraint is reported as binding when no further lot could have been added.
"""

from __future__ import annotations

from collections.abc import Sequence

from capplan.reserve.problem import Problem, PurchaseData
from capplan.reserve.result import Order, Unmet
from capplan.reserve.solver import RawSolution

EPS = 1e-4


def explain(
    pr: Problem, raw: RawSolution, orders: Sequence[Order], by_site: dict[tuple[int, str, int], int]
) -> tuple[Unmet, ...]:
    """One :class:`Unmet` per guaranteed class and period with unmet demand (worst scenario)."""
    out: list[Unmet] = []
    lab = pr.labels
    for c, cl in enumerate(pr.classes):
        tier = pr.tiers[cl.tier]
        for p in range(pr.periods):
            col = raw.excess[:, c, p]
            if col.max() <= EPS:
                continue
            w = int(col.argmax())
            sites, binding = _binding(pr, raw, orders, by_site, c, p, w)
            out.append(
                Unmet(
                    tier.name,
                    cl.name,
                    lab[p],
                    pr.scenario_names[w],
                    round(float(col[w]), 6),
                    tuple(sites),
                    tuple(binding),
                )
            )
    return tuple(out)


def _binding(
    pr: Problem,
    raw: RawSolution,
    orders: Sequence[Order],
    by_site: dict[tuple[int, str, int], int],
    c: int,
    p: int,
    w: int,
) -> tuple[list[str], list[str]]:
    """Sites where the shortfall lands and the binding constraints there.

    The sites are those whose power, rack space or install limit binds; when none binds, the
    sites that hold or can receive a GPU model the class accepts (``cloud`` when the planning
    file has no site).
    """
    cl = pr.classes[c]
    opts = [po for po in pr.purchases if po.model in cl.ratios]
    why: list[str] = []
    if not opts:
        why.append(f"no purchase option for {', '.join(cl.ratios)}")
    elif all(p < po.lead_time for po in opts):
        lead = min(po.lead_time for po in opts)
        why.append(f"lead time: the earliest purchase ordered now arrives in {pr.labels[lead]} ({lead} periods)")
    sites = _site_limits(pr, orders, opts, p, why)
    why += _supply_and_cloud(pr, raw, orders, opts, c, p, w)
    if not why:
        why.append("capacity shared with other guaranteed classes")
    if not sites:
        sites = [
            site.name
            for s, site in enumerate(pr.sites)
            if any(by_site.get((s, m, p), 0) for m in cl.ratios) or any(s in po.sites for po in opts)
        ] or (["cloud"] if not pr.sites else [])
    return sites, why


def _site_limits(pr: Problem, orders: Sequence[Order], opts: list[PurchaseData], p: int, why: list[str]) -> list[str]:
    """Sites whose power, rack space or install limit leaves no room for one more lot by period ``p``."""
    lab = pr.labels
    by_name = {po.name: po for po in pr.purchases}
    sites: list[str] = []
    for s, site in enumerate(pr.sites):
        here = [po for po in opts if s in po.sites and p >= po.lead_time]
        if not here:
            continue
        inst = [i for i in pr.installed if i.site == s and i.start <= p < i.end]
        arrived = [o for o in orders if o.site == site.name and lab.index(o.arrival_period) <= p]
        # (per-GPU attribute, site capacity, what it is, unit, display scale): power, then rack space
        for attr, cap, what, unit, scale in (
            ("power_w", site.power_w, "power", "kW", 1000.0),
            ("rack_units_per_gpu", site.rack_units, "rack space", "units", 1.0),
        ):
            if cap is None:
                continue
            used = sum(i.count * getattr(i, attr) for i in inst) + sum(
                o.count * getattr(by_name[o.option], attr) for o in arrived
            )
            if used + min(po.lot_size * getattr(po, attr) for po in here) > cap + EPS:
                why.append(f"{what} at {site.name}: {used / scale:g} of {cap / scale:g} {unit} in {lab[p]}")
                sites.append(site.name)
        if site.max_installs is not None:
            full = [
                lab[a]
                for a in range(p + 1)
                if sum(o.count for o in orders if o.site == site.name and lab.index(o.arrival_period) == a)
                + min(po.lot_size for po in here)
                > site.max_installs
            ]
            if full and len(full) == len(range(min(po.lead_time for po in here), p + 1)):
                why.append(f"install limit at {site.name} ({site.max_installs} GPUs per period)")
                sites.append(site.name)
    return list(dict.fromkeys(sites))


def _supply_and_cloud(
    pr: Problem, raw: RawSolution, orders: Sequence[Order], opts: list[PurchaseData], c: int, p: int, w: int
) -> list[str]:
    """Supply caps used in every order period, exhausted on-demand and calendar blocks."""
    cl, lab = pr.classes[c], pr.labels
    why: list[str] = []
    for po in opts:
        if po.supply_cap is None or p < po.lead_time:
            continue
        bought = {
            q: sum(o.count for o in orders if o.option == po.name and o.order_period == lab[q])
            for q in range(p - po.lead_time + 1)
        }
        if all(n + po.lot_size > po.supply_cap for n in bought.values()):
            why.append(
                f"supply cap of {po.name}: {po.supply_cap} GPUs per period, used in every order "
                f"period up to {lab[p - po.lead_time]}"
            )
    recs = [(o, ro) for o, ro in enumerate(pr.recourse) if ro.kind == "on_demand" and ro.model in cl.ratios]
    if not recs:
        why.append(f"no on-demand option for {', '.join(cl.ratios)}")
    for o, ro in recs:
        if ro.max_gpus is not None and raw.rec[w, :, o, p].sum() >= ro.max_gpus - EPS:
            why.append(f"availability cap of {ro.name}: {ro.max_gpus:g} GPUs")
    for co in pr.commits:
        if co.model in cl.ratios and co.max_units is not None:
            used = sum(u for (k, _q), u in raw.commits.items() if pr.commits[k].name == co.name)
            if used >= co.max_units:
                why.append(f"calendar blocks of {co.name}: all {co.max_units} booked")
    return why
