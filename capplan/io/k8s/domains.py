"""Topology domains of imported nodes: one per distinct level-label value, unique per level."""

from __future__ import annotations

from collections.abc import Sequence

from capplan.model.problem import Domain


def topology_paths(
    raw: list[tuple[str, list[str]]], levels: Sequence[tuple[str, str]], warnings: list[str]
) -> tuple[list[tuple[str, ...]], list[Domain]]:
    """Paths per node and the domains, making names unique per level (``parent/name`` on a clash).

    Parameters
    ----------
    raw
        Per node: its name and its label value for each level ("" when the label is missing; such
        a node is its own domain ``node:<name>`` at that level, with one warning per level).
    levels
        ``(level, label key)`` pairs, outermost first.
    warnings
        Where missing labels are reported.
    """
    paths = [list(vals) for _, vals in raw]
    domains: list[Domain] = []
    for d, (level, label) in enumerate(levels):
        missing = [name for (name, vals), p in zip(raw, paths, strict=True) if vals[d] == ""]
        if missing:
            warnings.append(
                f"{len(missing)} node(s) have no label {label} ({', '.join(missing[:5])}"
                f"{', ...' if len(missing) > 5 else ''}); each is its own {level} 'node:NAME'"
            )
        for (node, _), p in zip(raw, paths, strict=True):
            if p[d] == "":
                p[d] = f"node:{node}"  # never a made-up shared domain (label values cannot hold ':')
        parents: dict[str, set[str | None]] = {}
        for p in paths:
            parents.setdefault(p[d], set()).add(p[d - 1] if d else None)
        for p in paths:
            if len(parents[p[d]]) > 1:
                p[d] = f"{p[d - 1]}/{p[d]}"
        seen: set[str] = set()
        for p in paths:
            if p[d] not in seen:
                seen.add(p[d])
                domains.append(Domain(level=level, name=p[d], parent=p[d - 1] if d else None))
    return [tuple(p) for p in paths], domains
