"""Computed prose only: the sentences that state a fact about the data are computed (notebook
02's conclusion, notebook 03's sampler data), and bounds are rounded outward."""

from __future__ import annotations

import tracemalloc

import nbformat
import numpy as np
import pandas as pd

from analysis import LengthHistogram, compare_strategies, narrative, optimize_edges
from analysis.narrative import strategies as narrative_strategies
from analysis.paths import NOTEBOOKS_DIR
from analysis.simulation.epochs import SIMULATION_SUBSAMPLE, simulation_sample
from analysis.tables import format_percent


def _code(name: str) -> list[str]:
    nb = nbformat.read(NOTEBOOKS_DIR / name, as_version=4)
    return [c.source for c in nb.cells if c.cell_type == "code"]


def _markdown(name: str) -> str:
    nb = nbformat.read(NOTEBOOKS_DIR / name, as_version=4)
    return "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")


def test_a_bound_is_rounded_outward_in_the_simulation_sentence():
    table = pd.DataFrame(
        {"efficiency": [0.900726, 0.5], "expected_efficiency": [0.9, 0.5]}, index=["bucketed", "random"]
    )
    text = narrative.describe_simulation(table, 3)
    assert "within 0.08 points" in text  # a gap of 0.0726 points: "within 0.07" would be false


def test_notebook_02_states_no_fact_of_the_bundled_data_in_fixed_prose():
    prose = _markdown("02_strategies.ipynb")
    assert "look-alike lengths" not in prose.replace("\n", " ")  # false where packing mixes more
    assert "packing removes the padding" not in prose.replace("\n", " ")  # it is 99.6% on some data
    code = "\n".join(_code("02_strategies.ipynb"))
    assert "narrative_strategies.describe_choice(table)" in code
    # one trade-off: the frontier's (mixing, the variance share), not a second one on the CV
    assert "describe_tradeoff" not in code and "plot_tradeoff" not in code
    assert "narrative.frontier_sentence(answer, answer.mixing_axis)" in code


def _table(lengths: np.ndarray) -> pd.DataFrame:
    hist = LengthHistogram.from_lengths(lengths)
    edges = optimize_edges(hist, 4, batch_size=8).edges
    return compare_strategies(hist, rng=np.random.default_rng(0), edges=edges, epochs=1, batch_size=8)


def test_the_choice_sentence_says_what_the_table_says():
    rng = np.random.default_rng(4)
    for lengths in (
        rng.integers(10, 2_000, 4_000),
        np.r_[rng.integers(5, 40, 3_000), rng.integers(1_500, 1_600, 300)],
    ):
        table = _table(lengths)
        eff = table["efficiency"]
        choice = narrative_strategies.describe_choice(table)
        assert f"({format_percent(eff['packing'], 'prose')} efficient)" in choice
        assert f"pads {format_percent(1 - eff['bucketed'], 'prose')} of its tokens" in choice


def test_notebook_03_never_expands_a_huge_histogram_for_its_sampler():
    assert not any("hist.expand()" in source for source in _code("03_bucket_count.ipynb"))
    huge = LengthHistogram([16, 300, 4_096], [6 * 10**11, 3 * 10**11, 10**11])  # 1e12 samples
    tracemalloc.start()
    try:
        sample, population = simulation_sample(huge, np.random.default_rng(1701))
        lengths = sample.expand()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert population == 10**12 and sample.n_samples == len(lengths) == SIMULATION_SUBSAMPLE
    assert peak < 200 * 2**20  # a subsample's arrays, not 8 TB of per-sample lengths
    assert set(np.unique(lengths)) <= {16, 300, 4_096}
    text = narrative_strategies.describe_sampler_data(sample.n_samples, population)
    assert "uniform subsample of 1,000,000 of the 1,000,000,000,000 samples" in text


def test_the_summary_page_says_its_mixing_was_simulated_on_a_subsample():
    from analysis.answers.recommendation import recommend
    from analysis.report._index import Source, _mixing_html, summary_facts

    huge = LengthHistogram([16, 300, 4_096], [6 * 10**11, 3 * 10**11, 10**11])
    facts = summary_facts(Source("huge.csv", ()), recommend(huge, 2, batch_size=8), huge, seed=0)
    from analysis.answers.frontier import DEFAULT_SIMULATED_SAMPLES

    expected = f"on a uniform subsample of {DEFAULT_SIMULATED_SAMPLES:,} of the 1,000,000,000,000 samples"
    assert expected in _mixing_html(facts)
    small = LengthHistogram([16, 300, 4_096], [60, 30, 10])
    facts = summary_facts(Source("small.csv", ()), recommend(small, 2, batch_size=8), small, seed=0)
    assert "subsample" not in _mixing_html(facts)
