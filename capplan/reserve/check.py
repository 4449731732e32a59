"""An independent checker: recompute a plan's feasibility from its decisions and the problem.

It never looks at solver variables. Capacity is rebuilt from fleet, in-flight orders, the
plan's orders and commitments; every coverage row must balance and fit in that capacity.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from capplan.reserve.problem import ClassData, Problem, useful_share
from capplan.reserve.result import Plan

TOL = 1e-5


def check_plan(pr: Problem, plan: Plan) -> list[str]:
    """Return human-readable violations of ``plan`` against ``pr`` (empty when valid)."""
    c = _Checker(pr, plan)
    c.orders()
    c.site_limits()
    c.commitments()
    c.gang_blocks()
    c.coverage()
    c.pools()
    c.service_levels()
    return c.v


class _Checker:
    """Capacity rebuilt from the problem and the plan's decisions, checked step by step."""

    def __init__(self, pr: Problem, plan: Plan) -> None:
        self.pr, self.plan = pr, plan
        self.v: list[str] = []
        self.lab = list(pr.labels)
        self.site_idx = {s.name: i for i, s in enumerate(pr.sites)}
        self.own: dict[tuple[int, str, int], float] = defaultdict(float)
        self.watts: dict[tuple[int, int], float] = defaultdict(float)
        self.space: dict[tuple[int, int], float] = defaultdict(float)
        self.installs: dict[tuple[int, int], float] = defaultdict(float)
        self.cloud: dict[tuple[str, int], float] = defaultdict(float)
        self.gang_cap: dict[tuple[str, str, str], int] = defaultdict(int)
        self.pool: dict[tuple[str, str, str], float] = defaultdict(float)
        self.rpool: dict[tuple[str, str, str], float] = defaultdict(float)
        self.short_scen: dict[tuple[str, str], bool] = defaultdict(bool)
        for i in pr.installed:
            for p in range(i.start, i.end):
                self.own[i.site, i.model, p] += i.count
                self.watts[i.site, p] += i.count * i.power_w
                self.space[i.site, p] += i.count * i.rack_units_per_gpu

    def orders(self) -> None:
        """Each order: a known option, its sites, its lead time, whole lots; supply caps."""
        lab, v, T = self.lab, self.v, len(self.lab)
        purchases = {po.name: po for po in self.pr.purchases}
        supply: dict[tuple[str, str], float] = defaultdict(float)
        for o in self.plan.orders:
            po = purchases.get(o.option)
            if po is None or po.model != o.model:
                v.append(f"{o.line()}: unknown purchase option {o.option}")
                continue
            s, q, a = self.site_idx[o.site], lab.index(o.order_period), lab.index(o.arrival_period)
            if s not in po.sites:
                v.append(f"{o.line()}: option {po.name} cannot deliver to {o.site}")
            if a != q + po.lead_time:
                v.append(f"{o.line()}: lead time is {po.lead_time} periods")
            if o.count <= 0 or o.count % po.lot_size or o.lots * po.lot_size != o.count:
                v.append(f"{o.line()}: not a whole number of lots of {po.lot_size}")
            self.installs[s, a] += o.count
            supply[po.name, o.order_period] += o.count
            for p in range(a, T):
                self.own[s, po.model, p] += o.count
                self.watts[s, p] += o.count * po.power_w
                self.space[s, p] += o.count * po.rack_units_per_gpu
        for (name, per), n in supply.items():
            cap = purchases[name].supply_cap
            if cap is not None and n > cap:
                v.append(f"supply cap of {name} exceeded in {per}: {n} > {cap}")

    def site_limits(self) -> None:
        """Power, rack space and installs per site and period."""
        lab, v = self.lab, self.v
        for s, site in enumerate(self.pr.sites):
            for p in range(len(lab)):
                if site.power_w is not None and self.watts[s, p] > site.power_w + TOL:
                    v.append(f"power at {site.name} in {lab[p]}: {self.watts[s, p]} W > {site.power_w} W")
                if site.rack_units is not None and self.space[s, p] > site.rack_units + TOL:
                    v.append(f"rack space at {site.name} in {lab[p]}: {self.space[s, p]} > {site.rack_units}")
                if site.max_installs is not None and self.installs[s, p] > site.max_installs:
                    v.append(f"installs at {site.name} in {lab[p]}: {self.installs[s, p]} > {site.max_installs}")

    def commitments(self) -> None:
        """Start windows, whole blocks, calendar counts and reserved maxima; cloud capacity."""
        lab, v, T, pr = self.lab, self.v, len(self.lab), self.pr
        commits = {co.name: co for co in pr.commits}
        booked: dict[str, int] = defaultdict(int)
        for cm in self.plan.commitments:
            co = commits[cm.option]
            q = lab.index(cm.start_period)
            if q not in co.starts:
                v.append(f"{cm.line()}: start outside the window")
            if cm.gpus != cm.units * co.unit or cm.periods != min(co.duration, T - q):
                v.append(f"{cm.line()}: not whole blocks of {co.unit} for {co.duration} periods")
            booked[co.name] += cm.units
            for p in range(q, q + cm.periods):
                self.cloud[co.model, p] += cm.gpus
        for name, n in booked.items():
            if commits[name].max_units is not None and n > (commits[name].max_units or 0):
                v.append(f"calendar blocks of {name}: {n} > {commits[name].max_units}")
        for co in pr.commits:
            if co.max_gpus is not None:
                for p in range(T):
                    act = sum(
                        cm.gpus
                        for cm in self.plan.commitments
                        if cm.option == co.name
                        and lab.index(cm.start_period) <= p < lab.index(cm.start_period) + cm.periods
                    )
                    if act > co.max_gpus:
                        v.append(f"reserved {co.name} in {lab[p]}: {act} > max_gpus {co.max_gpus}")

    def gang_blocks(self) -> None:
        """Gang blocks fit the GPUs at their location."""
        gang_use: dict[tuple[str, str, int], float] = defaultdict(float)
        for g in self.plan.gang_blocks:
            gang_use[g["location"], g["model"], self.lab.index(g["period"])] += g["gpus"]
            self.gang_cap[g["class"], g["model"], g["period"]] += g["gpus"]
        for (loc, m, p), n in gang_use.items():
            avail = self.cloud[m, p] if loc == "cloud" else self.own[self.site_idx[loc], m, p]
            if n > avail + TOL:
                self.v.append(f"gang blocks at {loc} for {m} in {self.lab[p]}: {n} GPUs > {avail}")

    def coverage(self) -> None:
        """Every coverage row: the input demand, what its allocations deliver, and the balance."""
        backlog: dict[tuple[str, str, str], float] = {}
        for row in self.plan.coverage:
            self._row(row, backlog)

    def _row(self, row: dict[str, Any], backlog: dict[tuple[str, str, str], float]) -> None:
        pr, lab, v = self.pr, self.lab, self.v
        c = next(i for i, cl in enumerate(pr.classes) if cl.name == row["class"])
        cl, tier, key = pr.classes[c], pr.tiers[pr.classes[c].tier], (row["scenario"], row["class"])
        p, w = lab.index(row["period"]), self.plan.scenarios.index(row["scenario"])
        d = float(pr.demand[w, c, p])
        where = f"{row['class']} in {row['period']} ({row['scenario']})"
        if abs(row["demand"] - d) > TOL:
            v.append(f"{where}: demand {row['demand']} differs from the input {d}")
        served = self._delivered(row, cl, tier.spot, where)
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
            if row["backlog"] > TOL and (k == 0 or p == len(lab) - 1):
                v.append(f"{where}: backlog not allowed here")
            lim = float(pr.demand[w, c, max(0, p - k + 1) : p + 1].sum())
            if row["backlog"] > lim + 1e-3:
                v.append(f"{where}: backlog {row['backlog']} older than {k} periods")
        if row["shortfall"] > TOL:
            self.short_scen[row["scenario"], tier.name] = True

    def _delivered(self, row: dict[str, Any], cl: ClassData, spot_ok: bool, where: str) -> float:
        """Reference GPUs the row's committed and recourse GPUs deliver; adds them to the pools."""
        v, served = self.v, 0.0
        for m, n in row["committed"].items():
            if m not in cl.ratios:
                v.append(f"{where}: uses {m}, not accepted by the class")
                continue
            served += n * cl.ratios[m]
            self.pool[row["scenario"], m, row["period"]] += n * cl.factor
            held = self.gang_cap[cl.name, m, row["period"]]
            if cl.site_gangs and n > held + TOL:
                v.append(f"{where}: uses {n} {m} but holds only {held} in gangs")
        recs = {ro.name: ro for ro in self.pr.recourse}
        for name, n in row["recourse"].items():
            ro = recs[name]
            if ro.model not in cl.ratios:
                v.append(f"{where}: uses {name} whose model is not accepted")
                continue
            if ro.kind == "spot" and not spot_ok:
                v.append(f"{where}: tier {self.pr.tiers[cl.tier].name} may not use spot capacity")
            served += n * cl.ratios[ro.model] * useful_share(cl, ro)
            self.rpool[row["scenario"], name, row["period"]] += n
        return served

    def pools(self) -> None:
        """Allocations fit the committed capacity; on-demand and spot use fit their availability."""
        pr, lab = self.pr, self.lab
        for (sn, m, per), n in self.pool.items():
            p = lab.index(per)
            avail = sum(self.own[s, m, p] for s in range(len(pr.sites))) + self.cloud[m, p]
            if n > avail + 1e-4:
                self.v.append(f"{m} in {per} ({sn}): allocations use {n:.4f} GPUs > capacity {avail}")
        recs = {ro.name: ro for ro in pr.recourse}
        for (sn, name, per), n in self.rpool.items():
            limit = recs[name].max_gpus
            if limit is not None and n > limit + 1e-4:
                self.v.append(f"{name} in {per} ({sn}): {n:.4f} GPUs > availability {limit}")

    def service_levels(self) -> None:
        """A plan reported ``ok`` keeps every guaranteed tier's shortfall probability in budget."""
        pr = self.pr
        if self.plan.status != "ok":
            return
        for t in pr.tiers:
            if t.kind == "guaranteed":
                pmiss = sum(
                    pr.probabilities[w] for w, sn in enumerate(pr.scenario_names) if self.short_scen[sn, t.name]
                )
                if pmiss > 1 - t.service_level + 1e-6:
                    self.v.append(f"tier {t.name}: shortfall probability {pmiss:.4f} > {1 - t.service_level:.4f}")
