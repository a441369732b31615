"""No batch over its token budget once padded: under ``max_tokens`` with ``pad_to_multiple_of``
a bucket takes ``max_tokens // round_up(upper_edge, m)`` samples, ``token_budget`` fills by
padded length, and the plan, the sampler and the simulator agree (issue 31, "Budgets")."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis import BatchRule, BucketedBatchSampler, LengthHistogram, optimize_edges, simulate
from analysis.batching import round_up
from analysis.narrative import plan_warnings
from analysis.padding.waste import EXACT_STRATEGIES, batch_step_tokens, exact_padding, step_tokens
from analysis.simulation.strategies import build_epoch

#: The strategies whose batches pad (the packers' rows hold no padding).
PADDED = ("bucketed", "sorted", "random", "length_grouped", "token_budget")


def _padded(batch_lengths: np.ndarray, m: int) -> int:
    """A batch's padded tokens, by hand: its size times its longest rounded up to ``m``."""
    top = int(batch_lengths.max())
    return len(batch_lengths) * (-(-top // m) * m)


def test_the_issues_case_keeps_every_batch_within_the_budget():
    """5,000 lengths uniform on 1..2,048, 6 buckets, max_tokens 8,192, pad_to_multiple_of 64:
    the plan of bfa82a0 ran 26 samples of up to 320 padded tokens in bucket 0 (8,320) and its
    sampler yielded 183 of 735 batches over 8,192; token_budget 107 of 722."""
    lengths = np.random.default_rng(0).integers(1, 2049, 5000)
    hist = LengthHistogram.from_lengths(lengths)
    plan = optimize_edges(hist, 6, max_tokens=8192, pad_to_multiple_of=64)
    sizes = [8192 // (-(-upper // 64) * 64) for upper in plan.edges[1:]]
    assert plan.batch_sizes == sizes
    assert all(b * (-(-upper // 64) * 64) <= 8192 for b, upper in zip(plan.batch_sizes, plan.edges[1:]))
    batches = list(BucketedBatchSampler(lengths, plan, seed=0))
    over = [b for b in batches if _padded(lengths[b], 64) > 8192]
    assert len(batches) > 700 and over == []
    for strategy in ("bucketed", "token_budget"):
        res = simulate(hist, strategy, plan.rule, rng=np.random.default_rng(0), epochs=1, edges=plan.edges)
        assert int(res.batches["padded"].max()) <= 8192, strategy
    assert plan.warnings == ()  # nothing can pass the budget: nothing to warn of
    assert plan.step_tokens == plan.n_batches * 8192


@settings(max_examples=60, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 300), min_size=1, max_size=120),
    max_tokens=st.integers(1, 1200),
    m=st.sampled_from([1, 2, 3, 8, 64]),
    k=st.integers(1, 5),
    seed=st.integers(0, 2**16),
)
def test_no_batch_passes_the_budget_but_a_lone_sample_padded_beyond_it(lengths, max_tokens, m, k, seed):
    """Random rules and lengths: no batch of the plan (its batch sizes times each bucket's
    upper edge padded), of the sampler or of any padded strategy's simulated epoch holds more
    than ``max_tokens`` padded tokens, unless it is one sample padded beyond the budget; and
    ``step_tokens`` is what the simulated steps take (``max(max_tokens, padded)`` each)."""
    arr = np.array(lengths)
    hist = LengthHistogram.from_lengths(arr)
    rule = BatchRule(max_tokens=max_tokens, pad_to_multiple_of=m)
    plan = optimize_edges(hist, min(k, hist.n_distinct), rule)
    for size, upper in zip(plan.batch_sizes, plan.edges[1:], strict=True):
        padded = -(-upper // m) * m
        assert size * padded <= max_tokens or (size == 1 and padded > max_tokens)

    def fits(padded: int, size: int, longest: int) -> bool:
        return padded <= max_tokens or (size == 1 and -(-longest // m) * m > max_tokens)

    for batch in BucketedBatchSampler(arr, plan, seed=seed):
        assert fits(_padded(arr[batch], m), len(batch), int(arr[batch].max()))
    for strategy in PADDED:
        res = simulate(hist, strategy, rule, rng=np.random.default_rng(seed), epochs=1, edges=plan.edges)
        b = res.batches
        assert (b["padded"] == b["size"] * round_up(b["longest"].to_numpy(), m)).all()
        for padded, size, longest in zip(b["padded"], b["size"], b["longest"], strict=True):
            assert fits(int(padded), int(size), int(longest)), strategy
        if strategy in EXACT_STRATEGIES:  # step_tokens says what the epoch's steps take, exactly
            steps = step_tokens(hist, rule, exact_padding(hist, strategy, rule, plan.edges).n_batches)
            assert batch_step_tokens(b["padded"].to_numpy(), max_tokens) == steps, strategy
    assert plan.step_tokens == step_tokens(hist, rule, plan.n_batches)
    # the plan warns exactly when a sample padded passes the budget
    beyond = int(round_up(hist.max, m)) > max_tokens
    assert any("over the budget" in w for w in plan_warnings(plan)) == beyond
    assert any(w.kind == "longer_than_budget" for w in plan.warnings) == beyond


@pytest.mark.parametrize("m", [1, 3, 64])
def test_token_budget_fills_by_padded_length(m):
    """Without noise the strategy's order is the stable sort by length; a greedy fill by hand
    over it (a batch takes the next sample while ``(size + 1) * round_up(longest, m) <=
    max_tokens``) gives the same batches."""
    lengths = np.random.default_rng(3).integers(1, 2049, 3000)
    rule = BatchRule(max_tokens=8192, pad_to_multiple_of=m)
    epoch = build_epoch(lengths, "token_budget", rule, rng=np.random.default_rng(4), padding_noise=0.0)
    expected, batch, top = [], [], 0
    for i in np.argsort(lengths, kind="stable").tolist():
        padded = -(-int(lengths[i]) // m) * m
        if batch and (len(batch) + 1) * max(top, padded) > 8192:
            expected.append(batch)
            batch, top = [], 0
        batch.append(i)
        top = max(top, padded)
    expected.append(batch)
    got = sorted(sorted(b.tolist()) for b in epoch.batches())
    assert got == sorted(sorted(b) for b in expected)
    assert max(_padded(lengths[b], m) for b in expected) <= 8192


# ---------------------------------------------------------------------------------- faces
#: Every length within max_tokens 8,100; padded to a multiple of 64, 8,050 fits (8,064) and
#: 8,100 passes (8,128).
BEYOND = np.r_[np.arange(100, 4000, 7), 8_050, 8_100]


def _beyond_line(w: str) -> bool:
    return w.startswith("1 sample is padded to a multiple of 64 longer than max_tokens 8,100") and w.endswith(
        "each is a batch over the budget (clip them with max_len or raise max_tokens)"
    )


@pytest.mark.parametrize("command", ["optimize", "compare"])
def test_the_cli_warns_of_a_sample_padded_beyond_the_budget(command, tmp_path, capsys):
    from analysis.cli import main

    path = tmp_path / "lengths.npy"
    np.save(path, BEYOND)
    argv = [
        command,
        str(path),
        "--max-tokens",
        "8100",
        "--pad-to-multiple-of",
        "64",
        "--buckets",
        "3",
        "--quiet",
    ]
    assert main([*argv, "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)["warnings"]  # --json keeps the facts
    beyond = [w for w in facts if w["kind"] == "longer_than_budget"]
    assert [(w["samples"], w["multiple"], w["longest"]) for w in beyond] == [(1, 64, 8_128)]
    assert main(argv) == 0
    text = " ".join(capsys.readouterr().out.split())  # the text face wraps a warning's line
    assert text.count("warning: ") == 3
    assert "warning: 1 sample is padded to a multiple of 64 longer than max_tokens 8,100" in text


def test_the_summary_page_and_the_explorer_warn_of_a_sample_padded_beyond_the_budget():
    from analysis.answers.recommendation import recommend
    from analysis.explorer import explore_view
    from analysis.report._index import Source, index_html, summary_facts

    hist = LengthHistogram.from_lengths(BEYOND)
    rec = recommend(hist, 3, max_tokens=8_100, pad_to_multiple_of=64)
    assert sum(map(_beyond_line, plan_warnings(rec.plan))) == 1
    assert rec.plan.step_tokens == rec.plan.n_batches * 8_100 + 28  # 8,128 passes it by 28
    page = index_html(summary_facts(Source("x", ()), rec, hist, seed=0), [])
    assert "1 sample is padded to a multiple of 64 longer than max_tokens 8,100" in page
    view = explore_view(hist, n_buckets=3, max_tokens=8_100, pad_to_multiple_of=64)
    assert view.warnings == plan_warnings(rec.plan)
