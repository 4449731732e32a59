"""An independent checker: recompute a plan's feasibility from its decisions and the problem.

It never looks at solver variables. Capacity is rebuilt from fleet, in-flight orders, the
plan's orders and commitments; every coverage row must balance and fit in that capacity.
"""

from __future__ import annotations

from collections import defaultdict

from capplan.reserve.problem import Problem
from capplan.reserve.result import Plan

TOL = 1e-5


def check_plan(pr: Problem, plan: Plan) -> list[str]:
    """Return human-readable violations of ``plan`` against ``pr`` (empty when valid)."""
    v: list[str] = []
    lab = list(pr.labels)
    T = len(lab)
    site_idx = {s.name: i for i, s in enumerate(pr.sites)}
    purchases = {po.name: po for po in pr.purchases}
    own: dict[tuple[int, str, int], float] = defaultdict(float)
    watts: dict[tuple[int, int], float] = defaultdict(float)
    space: dict[tuple[int, int], float] = defaultdict(float)
    for i in pr.installed:
        for p in range(i.start, i.end):
            own[i.site, i.model, p] += i.count
            watts[i.site, p] += i.count * i.power_w
            space[i.site, p] += i.count * i.rack_units_per_gpu
    installs: dict[tuple[int, int], float] = defaultdict(float)
    supply: dict[tuple[str, str], float] = defaultdict(float)
    for o in plan.orders:
        po = purchases.get(o.option)
        if po is None or po.model != o.model:
            v.append(f"{o.line()}: unknown purchase option {o.option}")
            continue
        s, q, a = site_idx[o.site], lab.index(o.order_period), lab.index(o.arrival_period)
        if s not in po.sites:
            v.append(f"{o.line()}: option {po.name} cannot deliver to {o.site}")
        if a != q + po.lead_time:
            v.append(f"{o.line()}: lead time is {po.lead_time} periods")
        if o.count <= 0 or o.count % po.lot_size or o.lots * po.lot_size != o.count:
            v.append(f"{o.line()}: not a whole number of lots of {po.lot_size}")
        installs[s, a] += o.count
        supply[po.name, o.order_period] += o.count
        for p in range(a, T):
            own[s, po.model, p] += o.count
            watts[s, p] += o.count * po.power_w
            space[s, p] += o.count * po.rack_units_per_gpu
    for (name, per), n in supply.items():
        cap = purchases[name].supply_cap
        if cap is not None and n > cap:
            v.append(f"supply cap of {name} exceeded in {per}: {n} > {cap}")
    for s, site in enumerate(pr.sites):
        for p in range(T):
            if site.power_w is not None and watts[s, p] > site.power_w + TOL:
                v.append(f"power at {site.name} in {lab[p]}: {watts[s, p]} W > {site.power_w} W")
            if site.rack_units is not None and space[s, p] > site.rack_units + TOL:
                v.append(f"rack space at {site.name} in {lab[p]}: {space[s, p]} > {site.rack_units}")
            if site.max_installs is not None and installs[s, p] > site.max_installs:
                v.append(f"installs at {site.name} in {lab[p]}: {installs[s, p]} > {site.max_installs}")
    cloud: dict[tuple[str, int], float] = defaultdict(float)
    commits = {co.name: co for co in pr.commits}
    booked: dict[str, int] = defaultdict(int)
    for cm in plan.commitments:
        co = commits[cm.option]
        q = lab.index(cm.start_period)
        if q not in co.starts:
            v.append(f"{cm.line()}: start outside the window")
        if cm.gpus != cm.units * co.unit or cm.periods != min(co.duration, T - q):
            v.append(f"{cm.line()}: not whole blocks of {co.unit} for {co.duration} periods")
        booked[co.name] += cm.units
        for p in range(q, q + cm.periods):
            cloud[co.model, p] += cm.gpus
    for name, n in booked.items():
        if commits[name].max_units is not None and n > (commits[name].max_units or 0):
            v.append(f"calendar blocks of {name}: {n} > {commits[name].max_units}")
    for co in pr.commits:
        if co.max_gpus is not None:
            for p in range(T):
                act = sum(
                    cm.gpus
                    for cm in plan.commitments
                    if cm.option == co.name
                    and lab.index(cm.start_period) <= p < lab.index(cm.start_period) + cm.periods
                )
                if act > co.max_gpus:
                    v.append(f"reserved {co.name} in {lab[p]}: {act} > max_gpus {co.max_gpus}")

    # gang blocks fit their location
    gang_use: dict[tuple[str, str, int], float] = defaultdict(float)
    gang_cap: dict[tuple[str, str, str], int] = defaultdict(int)
    for g in plan.gang_blocks:
        gang_use[g["location"], g["model"], lab.index(g["period"])] += g["gpus"]
        gang_cap[g["class"], g["model"], g["period"]] += g["gpus"]
    for (loc, m, p), n in gang_use.items():
        avail = cloud[m, p] if loc == "cloud" else own[site_idx[loc], m, p]
        if n > avail + TOL:
            v.append(f"gang blocks at {loc} for {m} in {lab[p]}: {n} GPUs > {avail}")

    classes = {c.name: c for c in pr.classes}
    recs = {ro.name: ro for ro in pr.recourse}
    tiers = {c.name: pr.tiers[c.tier] for c in pr.classes}
    pool: dict[tuple[str, str, str], float] = defaultdict(float)
    rpool: dict[tuple[str, str, str], float] = defaultdict(float)
    backlog: dict[tuple[str, str, str], float] = {}
    short_scen: dict[tuple[str, str], bool] = defaultdict(bool)
    for row in plan.coverage:
        cl, tier, key = classes[row["class"]], tiers[row["class"]], (row["scenario"], row["class"])
        p = lab.index(row["period"])
        w = plan.scenarios.index(row["scenario"])
        d = float(pr.demand[w, pr.classes.index(cl), p])
        where = f"{row['class']} in {row['period']} ({row['scenario']})"
        if abs(row["demand"] - d) > TOL:
            v.append(f"{where}: demand {row['demand']} differs from the input {d}")
        served = 0.0
        for m, n in row["committed"].items():
            if m not in cl.ratios:
                v.append(f"{where}: uses {m}, not accepted by the class")
                continue
            served += n * cl.ratios[m]
            pool[row["scenario"], m, row["period"]] += n * cl.factor
            if cl.site_gangs and n > gang_cap[cl.name, m, row["period"]] + TOL:
                v.append(
                    f"{where}: uses {n} {m} but holds only {gang_cap[cl.name, m, row['period']]} in gangs"
                )
        for name, n in row["recourse"].items():
            ro = recs[name]
            if ro.model not in cl.ratios:
                v.append(f"{where}: uses {name} whose model is not accepted")
                continue
            if ro.kind == "spot" and not tier.spot:
                v.append(f"{where}: tier {tier.name} may not use spot capacity")
            served += n * cl.ratios[ro.model] * (1 - ro.interruption_rate)
            rpool[row["scenario"], name, row["period"]] += n
        if abs(served - row["served"]) > 1e-3 * max(1.0, d):
            v.append(f"{where}: served {row['served']} but the allocations deliver {served:.6f}")
        prev = backlog.get((*key, lab[p - 1]), 0.0) if p else 0.0
        balance = row["served"] + row["shortfall"] + row["lost"] + row["backlog"] - prev - d
        if abs(balance) > 1e-3 * max(1.0, d):
            v.append(f"{where}: served + shortfall + lost + backlog - previous backlog != demand")
        backlog[(*key, row["period"])] = row["backlog"]
        if tier.kind == "guaranteed" and (row["lost"] > TOL or row["backlog"] > TOL):
            v.append(f"{where}: guaranteed demand cannot be deferred or lost")
        if tier.kind == "flexible":
            if row["shortfall"] > TOL:
                v.append(f"{where}: flexible demand shows guaranteed shortfall")
            k = tier.max_deferral
            if row["backlog"] > TOL and (k == 0 or p == T - 1):
                v.append(f"{where}: backlog not allowed here")
            lim = float(pr.demand[w, pr.classes.index(cl), max(0, p - k + 1) : p + 1].sum())
            if row["backlog"] > lim + 1e-3:
                v.append(f"{where}: backlog {row['backlog']} older than {k} periods")
        if row["shortfall"] > TOL:
            short_scen[row["scenario"], tier.name] = True
    for (sn, m, per), n in pool.items():
        p = lab.index(per)
        avail = sum(own[s, m, p] for s in range(len(pr.sites))) + cloud[m, p]
        if n > avail + 1e-4:
            v.append(f"{m} in {per} ({sn}): allocations use {n:.4f} GPUs > capacity {avail}")
    for (sn, name, per), n in rpool.items():
        limit = recs[name].max_gpus
        if limit is not None and n > limit + 1e-4:
            v.append(f"{name} in {per} ({sn}): {n:.4f} GPUs > availability {limit}")
    if plan.status == "ok":
        for t in pr.tiers:
            if t.kind == "guaranteed":
                pmiss = sum(
                    pr.probabilities[w] for w, sn in enumerate(pr.scenario_names) if short_scen[sn, t.name]
                )
                if pmiss > 1 - t.service_level + 1e-6:
                    v.append(f"tier {t.name}: shortfall probability {pmiss:.4f} > {1 - t.service_level:.4f}")
    return v
