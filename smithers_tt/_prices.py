"""What model calls cost: a price table per model, given by the user or read from a file.

Nothing is fetched: prices change, and a debugger that guesses them misleads. A model the table
does not name has no cost (``None``), whatever its tokens; a price is per million tokens.
"""

from __future__ import annotations

import json
import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from smithers_tt.errors import InvalidArgument

__all__ = ["ModelPrice", "PriceTable"]


def _price(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise InvalidArgument(f"{where} must be a number >= 0 (per million tokens), got {value!r}")
    if not math.isfinite(value):
        raise InvalidArgument(f"{where} must be finite, got {value!r}")
    return float(value)


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """Prices of one model per million tokens: ``input`` (prompt), ``output`` (completion,
    reasoning included) and ``cached_input`` (prompt tokens served from the provider's cache;
    ``None``: billed as input)."""

    input: float
    output: float
    cached_input: float | None = None

    def cost(
        self, prompt_tokens: int | None, completion_tokens: int | None, cached_tokens: int | None
    ) -> float | None:
        """The cost of one call's tokens; None when it reported no tokens at all."""
        if prompt_tokens is None and completion_tokens is None:
            return None
        prompt, cached = prompt_tokens or 0, min(cached_tokens or 0, prompt_tokens or 0)
        cached_price = self.input if self.cached_input is None else self.cached_input
        total = (prompt - cached) * self.input + cached * cached_price
        return (total + (completion_tokens or 0) * self.output) / 1_000_000


class PriceTable:
    """Model name -> :class:`ModelPrice`. Names match exactly (a dated model name the server
    reports, such as ``gpt-4o-mini-2024-07-18``, needs its own entry: no price is guessed).

    Args:
        prices: model -> a :class:`ModelPrice` or a mapping with ``input``, ``output`` and
            optionally ``cached_input`` (per million tokens).
    """

    def __init__(self, prices: Mapping[str, ModelPrice | Mapping[str, Any]] | None = None) -> None:
        self.prices: dict[str, ModelPrice] = {}
        for model, price in (prices or {}).items():
            if not isinstance(model, str) or not model:
                raise InvalidArgument(f"a price table's model names are strings, got {model!r}")
            self.prices[model] = price if isinstance(price, ModelPrice) else _entry(model, price)

    @classmethod
    def load(cls, path: str | Path) -> PriceTable:
        """Read a table from a ``.json`` or ``.toml`` file: ``{"model": {"input": 0.15,
        "output": 0.6, "cached_input": 0.075}}`` (TOML: one ``["model"]`` table each)."""
        path = Path(path)
        try:
            text = path.read_bytes()
        except OSError as error:
            raise InvalidArgument(
                f"price table {path} cannot be read: {error.strerror or error}"
            ) from error
        try:
            data = tomllib.loads(text.decode()) if path.suffix == ".toml" else json.loads(text)
        except (ValueError, UnicodeDecodeError) as error:
            raise InvalidArgument(f"price table {path} is not valid: {error}") from error
        if not isinstance(data, dict):
            raise InvalidArgument(f"price table {path} must map model names to prices")
        return cls(data)

    @classmethod
    def of(cls, prices: PriceTable | Mapping[str, Any] | str | Path | None) -> PriceTable:
        """A table from what a user passes: a table, a mapping, a file path, or None (empty)."""
        if isinstance(prices, PriceTable):
            return prices
        if isinstance(prices, str | Path):
            return cls.load(prices)
        return cls(prices)

    def cost(
        self,
        model: str | None,
        prompt_tokens: int | None,
        completion_tokens: int | None,
        cached_tokens: int | None = None,
    ) -> float | None:
        """The cost of one call, or None (the model has no price, or no tokens were
        reported)."""
        price = self.prices.get(model) if model is not None else None
        return (
            None if price is None else price.cost(prompt_tokens, completion_tokens, cached_tokens)
        )

    def rows(self) -> list[tuple[str, float, float, float]]:
        """``(model, input, output, cached_input)`` per model (cached as input when unset)."""
        return [
            (m, p.input, p.output, p.input if p.cached_input is None else p.cached_input)
            for m, p in sorted(self.prices.items())
        ]

    def __len__(self) -> int:
        return len(self.prices)

    def __repr__(self) -> str:
        return f"PriceTable({len(self.prices)} models)"


def _entry(model: str, price: Any) -> ModelPrice:
    if not isinstance(price, Mapping):
        raise InvalidArgument(f"the price of {model!r} must map input/output to prices")
    unknown = set(price) - {"input", "output", "cached_input"}
    if unknown or "input" not in price or "output" not in price:
        raise InvalidArgument(
            f"the price of {model!r} takes input, output and optionally cached_input (per "
            f"million tokens), got {sorted(price)}"
        )
    cached = price.get("cached_input")
    return ModelPrice(
        _price(price["input"], f"{model}.input"),
        _price(price["output"], f"{model}.output"),
        None if cached is None else _price(cached, f"{model}.cached_input"),
    )
