"""The price table: given or read from a file, exact model names, never a guessed price."""

from __future__ import annotations

import json

import pytest

import smithers_tt as st
from smithers_tt.errors import InvalidArgument

PRICES = {"gpt-4o-mini": {"input": 0.15, "output": 0.6, "cached_input": 0.075}}


def test_a_call_costs_its_tokens_at_the_models_prices_per_million() -> None:
    table = st.PriceTable(PRICES)
    # 1,000 prompt tokens of which 400 cached, 200 completion tokens
    cost = table.cost("gpt-4o-mini", 1000, 200, 400)
    assert cost == pytest.approx((600 * 0.15 + 400 * 0.075 + 200 * 0.6) / 1e6)


@pytest.mark.parametrize(
    "model", ["gpt-4o", "gpt-4o-mini-2024-07-18", "GPT-4O-MINI", None], ids=repr
)
def test_a_model_the_table_does_not_name_exactly_has_no_cost(model: str | None) -> None:
    assert st.PriceTable(PRICES).cost(model, 1000, 200) is None


def test_a_call_that_reported_no_tokens_has_no_cost() -> None:
    assert st.PriceTable(PRICES).cost("gpt-4o-mini", None, None) is None


def test_cached_tokens_without_a_cached_price_cost_as_input() -> None:
    table = st.PriceTable({"m": {"input": 1.0, "output": 2.0}})
    assert table.cost("m", 10, 0, 4) == pytest.approx(10 / 1e6)


@pytest.mark.parametrize("suffix", [".json", ".toml"])
def test_a_table_is_read_from_a_json_or_toml_file(tmp_path, suffix: str) -> None:
    path = tmp_path / f"prices{suffix}"
    if suffix == ".json":
        path.write_text(json.dumps(PRICES))
    else:
        path.write_text('["gpt-4o-mini"]\ninput = 0.15\noutput = 0.6\ncached_input = 0.075\n')
    assert st.PriceTable.load(path).rows() == st.PriceTable(PRICES).rows()
    assert st.PriceTable.of(str(path)).rows() == [("gpt-4o-mini", 0.15, 0.6, 0.075)]


@pytest.mark.parametrize(
    "prices, match",
    [
        ({"m": {"input": -1, "output": 1}}, "m.input"),
        ({"m": {"input": 1, "output": float("nan")}}, "m.output"),
        ({"m": {"input": 1}}, "takes input, output"),
        ({"m": {"input": 1, "output": 1, "per": "k"}}, "takes input, output"),
        ({"m": {"input": True, "output": 1}}, "m.input"),
        ({"m": 3}, "must map"),
    ],
)
def test_a_bad_price_is_refused_naming_it(prices: dict, match: str) -> None:
    with pytest.raises(InvalidArgument, match=match):
        st.PriceTable(prices)


def test_a_file_that_is_not_a_table_is_refused(tmp_path) -> None:
    path = tmp_path / "prices.json"
    path.write_text("[1, 2]")
    with pytest.raises(InvalidArgument, match="map model names"):
        st.PriceTable.load(path)
