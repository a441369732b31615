"""analysis.tables, the one number formatter: every face's convention, and the rules it replaced.

The references below are the formatters that were written in the faces before they all called
``tables`` (the narrative's ``percent``, the figures' ``format_percent`` / ``format_count``,
``waste.tokens_text``, the CLI's word lists): the one formatter must write what they wrote.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from analysis.plots import _common
from analysis.tables import (
    MISSING,
    column_kind,
    format_bound,
    format_count,
    format_length,
    format_percent,
    format_value,
    tidy,
)

#: Every name the CLI printed as a count (its ``_COUNT_NAMES``), and the ratios and floats.
CLI_COUNTS = [
    "samples",
    "tokens",
    "batches",
    "steps",
    "padded_tokens",
    "waste_tokens",
    "useful_tokens",
    "lower_edge",
    "upper_edge",
    "batch_size",
    "distinct_lengths",
    "min",
    "max",
    "max_len",
    "samples_clipped",
    "tokens_removed",
    "predicted_tokens_per_s",
    "expected_padded_tokens",
    "p10",
    "p50",
    "p90",
    "p99",
    "p95",
    "p999",
    "simulated_samples",
]
CLI_RATIOS = [
    "efficiency",
    "expected_efficiency",
    "efficiency_se",
    "simulated_efficiency",
    "share_samples_clipped",
    "share_tokens_removed",
    "token_share_longest_1pct",
    "token_share_longest_10pct",
    "composition_repeat",
]
CLI_FLOATS = ["within_batch_cv", "lag1_autocorr", "tokens_per_step_cv", "straggler_factor", "batch_rule"]

finite = st.floats(min_value=-2.0, max_value=2.0, allow_nan=False) | st.sampled_from(
    [0.0, -0.0, 1e-12, -1e-12, 0.00005, -0.00005, 0.000404, 0.0512, 0.8123, 0.99996, 1.0, 0.005, -0.005]
)


def old_narrative_percent(share: float, digits: int = 1) -> str:
    value = 100 * share
    if abs(value) < 0.5 * 10**-digits:
        value = 0.0
    return f"{value:.{digits}f}%"


def old_figure_percent(share: float) -> str:
    if not np.isfinite(share):
        return "n/a"
    pct = 100 * share
    if abs(pct) < 0.005:
        return "0%"
    if abs(pct) >= 9.95:
        return f"{pct:.0f}%"
    if abs(pct) >= 0.995:
        return f"{pct:.1f}%"
    return f"{pct:.2g}%"


def honest(share: float, digits: int | None, old: str) -> str:
    """What the old rule wrote, but for the one change since: a share that is not 0 never reads
    ``0.0%`` (it reads ``<0.1%``) and one below 1 never reads ``100.0%`` (``>99.9%``)."""
    pct = 100 * share
    if digits is None:  # figures: two significant digits below 1%, one decimal near 100%
        if 0 < pct < 0.005:
            return "<0.01%"
        if 99.5 <= pct < 100:
            return ">99.9%" if pct >= 99.95 else f"{pct:.1f}%"
        return old
    unit = 10.0**-digits
    if 0 < pct < unit / 2:
        return f"<{unit:.{digits}f}%"
    if 100 - unit / 2 <= pct < 100:
        return f">{100 - unit:.{digits}f}%"
    return old


def old_table_ratio(v: float) -> str:
    text = f"{100 * v:.2f}%"
    return "0.00%" if text == "-0.00%" else text


@pytest.mark.parametrize("name", CLI_COUNTS)
def test_every_count_the_cli_prints_is_a_count(name):
    assert column_kind(name) == "count"


@pytest.mark.parametrize("name", CLI_RATIOS)
def test_every_ratio_the_cli_prints_is_a_ratio(name):
    assert column_kind(name) == "ratio"


@pytest.mark.parametrize("name", CLI_FLOATS)
def test_the_cli_floats_stay_floats(name):
    assert column_kind(name) == "float"


@given(finite, st.integers(0, 4))
def test_prose_percent_is_what_the_narrative_wrote(share, digits):
    if digits == 0 and 100 * share == -0.5:  # the one exact tie: the old rule wrote "-0%"
        assert format_percent(share, digits) == "0%"
        return
    expected = honest(share, digits, old_narrative_percent(share, digits))
    assert format_percent(share, digits) == expected
    if digits == 1:
        assert format_percent(share, "prose") == expected
    if digits == 2:
        assert format_percent(share, "table") == format_percent(share) == expected


@given(finite)
def test_table_ratio_is_what_the_notebooks_showed(share):
    assert format_value(share, "ratio") == honest(share, 2, old_table_ratio(share))


@given(finite | st.sampled_from([math.nan, math.inf]))
def test_figure_percent_is_what_the_figures_wrote(share):
    expected = honest(share, None, old_figure_percent(share)) if np.isfinite(share) else "n/a"
    assert format_percent(share, "figure") == expected


@pytest.mark.parametrize(
    ("share", "digits", "text"),
    [
        (0.00004, 1, "<0.1%"),
        (0.0004, 2, "0.04%"),
        (0.99996, 1, ">99.9%"),
        (0.9996, 1, ">99.9%"),
        (1.0, 1, "100.0%"),
    ],
)
def test_a_share_not_zero_never_reads_zero_nor_one_below_one_whole(share, digits, text):
    assert format_percent(share, digits) == text


def test_bounds_are_rounded_outward():
    assert format_bound(0.0726) == "0.08"  # "within 0.08 points", never "within 0.07"
    assert format_bound(0.0726, upper=False) == "0.07"
    assert format_bound(0.07) == "0.07"  # float noise (7.000000000000001) is not rounded up
    for x in np.random.default_rng(3).uniform(0, 5, 500):
        assert float(format_bound(x)) >= x - 1e-9 and float(format_bound(x, upper=False)) <= x + 1e-9


@given(st.integers(0, 10**20) | st.floats(0, 1e18, allow_nan=False))
def test_counts_are_what_tokens_text_and_the_figures_wrote(value):
    tokens_text = f"{value:,}" if isinstance(value, int) else f"{value:,.0f}"
    assert format_count(value) == tokens_text
    assert _common.format_count(float(value)) == f"{round(float(value)) + 0:,}"


def test_no_format_writes_minus_zero():
    assert format_count(-0.0) == format_count(-0.4) == "0"
    assert format_percent(-1e-9) == "0.00%" and format_percent(-1e-9, "figure") == "0%"
    assert format_value(-1e-9) == "0.000" and format_length(-0.01) == "0.0"


def test_missing_values():
    assert (
        format_value(None) == format_value(float("nan"), "ratio") == format_value(np.nan, "count") == MISSING
    )
    assert format_percent(float("nan"), 1) == MISSING and format_count(float("inf")) == MISSING


def test_thousands_separators_everywhere():
    assert format_value(12345.6789) == "12,345.679"
    assert format_value(np.int64(1234567)) == "1,234,567" and format_value(1234.0) == "1,234"
    assert format_length(8192.0) == "8,192" and format_length(1234.5) == "1,234.5"


def test_tidy_formats_a_series_row_by_row():
    summary = pd.Series({"samples": 1234, "mean": 56.7, "p95": 812.0, "share_x": 0.5}, dtype=object)
    assert tidy(summary)["value"].tolist() == ["1,234", "57", "812", "50.00%"]


def test_one_percent_formatter_with_named_styles():
    """Three formatters with three defaults were one too many: the narrative's ``percent``, the
    strategies' ``_pct`` and the figures' ``format_percent`` are gone; every style is named."""
    import ast
    from pathlib import Path

    import analysis

    defined = []
    for path in Path(analysis.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and ("percent" in node.name or node.name == "_pct"):
                defined.append(f"{path.name}:{node.name}")
    assert defined == ["tables.py:format_percent"]
    share = 0.123456
    assert [format_percent(share, s) for s in ("table", "prose", "figure", "error")] == [
        "12.35%",
        "12.3%",
        "12%",
        "12%",
    ]
    assert format_percent(0.00042, "error") == "0.042%"  # "± 0.042%", never "± <0.1%"
    with pytest.raises(ValueError, match="style must be one of"):
        format_percent(0.5, "bold")  # type: ignore[arg-type]
