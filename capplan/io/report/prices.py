"""GPU-hour prices for the report's cost view: catalog defaults, overridden by a prices file.

A prices file (YAML or JSON) maps GPU model names (or aliases) to a price per GPU-hour::

    currency: USD              # optional label, default USD
    price_per_gpu_hour:
      H100-SXM5-80GB: 2.10
      A100-SXM4-80GB: 1.20

Models it does not name keep their catalog price (``price_per_gpu_hour`` in the catalog).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from capplan.io.files import load_yaml_or_json
from capplan.model.catalog import Catalog
from capplan.model.errors import InputError
from capplan.model.problem import Problem

#: Hours in an average month (8,760 h a year / 12), used for monthly figures.
HOURS_PER_MONTH = 730.0


@dataclass(frozen=True)
class Prices:
    """Price per GPU-hour by canonical model name (None: unknown), and the currency label."""

    per_gpu_hour: dict[str, float | None]
    currency: str = "USD"

    def of(self, model: str) -> float | None:
        """The price of one GPU-hour of ``model`` (None when no price is known)."""
        return self.per_gpu_hour.get(model)


def catalog_prices(catalog: Catalog) -> Prices:
    """The catalog's own prices (``price_per_gpu_hour`` of each model)."""
    return Prices({m.name: m.price_per_gpu_hour for m in catalog.models})


def load_prices(path: str | Path | None, catalog: Catalog) -> Prices:
    """Catalog prices, overridden by the prices file at ``path`` when given.

    Raises
    ------
    InputError
        When the file is unreadable, not a mapping, names an unknown model or a negative price.
    """
    base = catalog_prices(catalog)
    if path is None:
        return base
    data = load_yaml_or_json(path, "prices file")
    if not isinstance(data, dict) or not isinstance(data.get("price_per_gpu_hour"), dict):
        raise InputError("price_per_gpu_hour", f"{path}: a prices file needs a mapping "
                         "`price_per_gpu_hour: {MODEL: price, ...}` (see docs/report.md)")
    extra = set(data) - {"price_per_gpu_hour", "currency"}
    if extra:
        raise InputError(sorted(extra)[0], f"{path}: unknown field; a prices file has `currency` and "
                         "`price_per_gpu_hour`")
    currency = data.get("currency", "USD")
    if not isinstance(currency, str) or not currency:
        raise InputError("currency", f"{path}: expected a label such as USD or EUR")
    out = dict(base.per_gpu_hour)
    for name, price in data["price_per_gpu_hour"].items():
        where = f"price_per_gpu_hour.{name}"
        model = catalog.get(str(name), where)
        if price is not None and (isinstance(price, bool) or not isinstance(price, int | float) or price < 0):
            raise InputError(where, f"{path}: expected a price of zero or more per GPU-hour, got {price!r}")
        out[model.name] = None if price is None else float(price)
    return Prices(out, currency)


def unpriced_gpus(p: Problem, prices: Prices) -> tuple[int, list[str]]:
    """GPUs of the cluster whose model has no price, and those models (sorted).

    Costs count them at 0, so every cost headline says how many there are (:func:`unpriced_text`).
    """
    count, models = 0, set()
    for n in p.cluster.nodes:
        if n.gpus and n.gpu_model and prices.of(n.gpu_model) is None:
            count += n.gpus
            models.add(n.gpu_model)
    return count, sorted(models)


def unpriced_text(count: int, models: list[str]) -> str:
    """``unpriced: 4,704 GPUs (G2, G3)``, or an empty string when every GPU has a price."""
    if not count:
        return ""
    return f"unpriced: {count:,} GPU{'s' if count != 1 else ''} ({', '.join(models)})"
