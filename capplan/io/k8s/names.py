"""Kubernetes object names: DNS-safe, within a length limit, unique and stable across runs."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

#: Longest name a HyperNode (or any object referenced as a qualified name) may have.
NAME_LIMIT = 63
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUALIFIED = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_HASH = 10


def is_subdomain(name: str, limit: int = 253) -> bool:
    """True for a DNS-1123 subdomain (what ``metadata.name`` of most objects must be)."""
    return len(name) <= limit and bool(_SUBDOMAIN.match(name))


def is_qualified_name(name: str) -> bool:
    """True for a Kubernetes qualified name without prefix (alphanumerics, ``-_.``, at most 63)."""
    return len(name) <= NAME_LIMIT and bool(_QUALIFIED.match(name))


def _clean(raw: str) -> str:
    out = re.sub(r"[^a-z0-9.-]+", "-", raw.lower())
    out = re.sub(r"-{2,}", "-", re.sub(r"\.{2,}", ".", out))
    out = re.sub(r"(-\.|\.-)", "-", out)
    return out.strip("-.")


def _hashed(raw: str, base: str, limit: int) -> str:
    digest = hashlib.sha256(raw.encode()).hexdigest()[:_HASH]
    head = base[: limit - _HASH - 1].rstrip("-.")
    return f"{head}-{digest}" if head else digest


def object_names(raws: Iterable[str], limit: int = NAME_LIMIT) -> dict[str, str]:
    """Map each raw name to a DNS-1123 name of at most ``limit`` characters, unique over ``raws``.

    Parameters
    ----------
    raws
        The names wanted (domain names, cluster name, ...); repeats are ignored.
    limit
        Longest name allowed (63 for names other objects refer to as qualified names).

    A raw name that is already valid stays as it is. Others are lower-cased and cleaned; a
    cleaned name that is too long, empty or shared by several raw names ends in ``-`` plus 10
    hex digits of the SHA-256 of the raw name, so the result does not depend on the order of
    ``raws`` and stays the same from run to run. Raises ``ValueError`` in the (astronomically unlikely) case that two
    hashed names still clash.
    """
    uniq = sorted(set(raws))
    first: dict[str, str] = {}
    for r in uniq:
        c = r if is_subdomain(r, limit) else _clean(r)
        first[r] = c if c and len(c) <= limit else _hashed(r, c, limit)
    owners: dict[str, list[str]] = {}
    for r, c in first.items():
        owners.setdefault(c, []).append(r)
    out = {r: (c if len(owners[c]) == 1 else _hashed(r, _clean(r), limit)) for r, c in first.items()}
    if len(set(out.values())) != len(out):
        raise ValueError("object names clash after hashing; rename the clashing domains")
    return out
