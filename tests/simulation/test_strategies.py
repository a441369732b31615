"""Batching strategies: every sample once per epoch, each strategy against a reference."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis import LengthHistogram
from analysis.batching import BatchRule
from analysis.simulation.strategies import (
    PACKED_STRATEGIES,
    PADDING_NOISE,
    STRATEGIES,
    TOKEN_STRATEGIES,
    build_epoch,
    epoch_builder,
    ffd_plan,
)


def _rule(strategy: str, batch_size: int, max_tokens: int) -> dict[str, int]:
    return {"max_tokens": max_tokens} if strategy in TOKEN_STRATEGIES else {"batch_size": batch_size}


def _lengths(seed: int, n: int, top: int = 300) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(1, top + 1, size=n)


# ------------------------------------------------------------------ reference implementations
def _hf_length_grouped(lengths: list[int], batch_size: int, perm: list[int]) -> list[list[int]]:
    """transformers' get_length_grouped_indices (given its permutation), cut into batches."""
    mult = max(1, min(len(lengths) // (batch_size * 4), 50))
    size = mult * batch_size
    megabatches = [perm[i : i + size] for i in range(0, len(lengths), size)]
    megabatches = [sorted(m, key=lambda i: lengths[i], reverse=True) for m in megabatches]
    maxima = [lengths[m[0]] for m in megabatches]
    top = maxima.index(max(maxima))
    megabatches[0][0], megabatches[top][0] = megabatches[top][0], megabatches[0][0]
    flat = [i for m in megabatches for i in m]
    return [flat[i : i + batch_size] for i in range(0, len(flat), batch_size)]


def _naive_ffd(lengths: list[int], max_tokens: int) -> list[list[int]]:
    """Textbook first-fit decreasing: bins as lists of lengths."""
    bins: list[list[int]] = []
    room: list[int] = []
    for length in sorted(lengths, reverse=True):
        for b, r in enumerate(room):
            if r >= length:
                bins[b].append(length)
                room[b] -= length
                break
        else:
            bins.append([length])
            room.append(max_tokens - length)
    return bins


def _greedy_budget(sorted_lengths: list[int], max_tokens: int) -> list[int]:
    """Sizes of the greedy token-budget batches over lengths in consumption order."""
    sizes, size, longest = [], 0, 0
    for length in sorted_lengths:
        if size and (size + 1) * max(longest, length) > max_tokens:
            sizes.append(size)
            size, longest = 0, 0
        size += 1
        longest = max(longest, length)
    sizes.append(size)
    return sizes


# ------------------------------------------------------------------ every sample once
@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 300),
    batch_size=st.integers(1, 40),
    top=st.integers(1, 500),
    strategy=st.sampled_from(STRATEGIES),
)
def test_every_index_exactly_once(seed, n, batch_size, top, strategy):
    lengths = _lengths(seed, n, top)
    edges = [0, *sorted({int(top * 0.3) or 1, int(top * 0.7) or 1} - {top}), top]
    rng = np.random.default_rng(seed)
    builder = epoch_builder(lengths, strategy, edges=edges, **_rule(strategy, batch_size, batch_size * top))
    for _ in range(2):
        ep = builder.epoch(rng)
        assert ep.indices.dtype == np.int64 and ep.offsets.dtype == np.int64
        np.testing.assert_array_equal(np.sort(ep.indices), np.arange(n))
        assert (ep.sizes > 0).all() and ep.offsets[0] == 0 and ep.offsets[-1] == n
        batches = ep.batches()
        assert len(batches) == len(ep) == ep.buckets.size
        np.testing.assert_array_equal(np.concatenate(batches), ep.indices)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_same_seed_same_epoch(strategy):
    lengths = _lengths(1, 500)
    kw = dict(edges=[0, 100, 200, 300], **_rule(strategy, 8, 1200))
    a = build_epoch(lengths, strategy, rng=np.random.default_rng(7), **kw)
    b = build_epoch(lengths, strategy, rng=np.random.default_rng(7), **kw)
    c = build_epoch(lengths, strategy, rng=np.random.default_rng(8), **kw)
    np.testing.assert_array_equal(a.indices, b.indices)
    np.testing.assert_array_equal(a.offsets, b.offsets)
    assert not np.array_equal(a.indices, c.indices)


def test_histogram_input_is_expanded():
    hist = LengthHistogram.from_counts([2, 5], [3, 1])
    ep = build_epoch(hist, "sorted", rng=np.random.default_rng(0), batch_size=3)
    assert sorted(sorted(b.tolist()) for b in ep.batches()) == [[0, 1, 2], [3]]


# ------------------------------------------------------------------ each strategy
def test_sorted_compositions_are_fixed_and_order_shuffled():
    lengths = _lengths(2, 103)
    order = np.argsort(lengths, kind="stable")
    expected = sorted(order[i : i + 10].tolist() for i in range(0, 103, 10))
    builder = epoch_builder(lengths, "sorted", batch_size=10)
    rng = np.random.default_rng(0)
    orders = set()
    for _ in range(5):
        batches = [b.tolist() for b in builder.epoch(rng).batches()]
        assert sorted(batches) == expected
        orders.add(tuple(b[0] for b in batches))
    assert len(orders) > 1


def test_sorted_with_max_tokens_uses_one_fitting_batch_size():
    lengths = np.array([10, 50, 30, 20])
    builder = epoch_builder(lengths, "sorted", max_tokens=120)
    assert builder.batch_sizes == (2,)  # 120 // 50
    assert epoch_builder(lengths, "random", max_tokens=10).batch_sizes == (1,)


def test_random_is_a_permutation_cut_in_order():
    lengths = _lengths(3, 50)
    ep = build_epoch(lengths, "random", rng=np.random.default_rng(5), batch_size=8)
    np.testing.assert_array_equal(ep.indices, np.random.default_rng(5).permutation(50))
    assert ep.sizes.tolist() == [8] * 6 + [2]


def test_bucketed_batches_stay_in_their_bucket():
    lengths = _lengths(4, 1000)
    edges = [0, 40, 120, 300]
    for rule, sizes in (({"batch_size": 16}, [16, 16, 16]), ({"max_tokens": 1200}, [30, 10, 4])):
        builder = epoch_builder(lengths, "bucketed", edges=edges, **rule)
        assert list(builder.batch_sizes) == sizes
        ep = builder.epoch(np.random.default_rng(0))
        bucket_of = np.searchsorted(edges[1:-1], lengths, side="left")
        counts = np.bincount(bucket_of, minlength=3)
        assert len(ep) == sum(-(-int(c) // s) for c, s in zip(counts, sizes, strict=False))
        for batch, bucket in zip(ep.batches(), ep.buckets.tolist(), strict=False):
            assert set(bucket_of[batch].tolist()) == {bucket}
            assert batch.size <= sizes[bucket]
        # every bucket has at most one short batch
        pairs = zip(ep.buckets.tolist(), ep.sizes.tolist(), strict=True)
        short = [b for b, size in pairs if size < sizes[b]]
        assert len(short) == len(set(short))


def test_bucketed_shuffles_inside_buckets_and_batch_order():
    lengths = _lengths(5, 400)
    builder = epoch_builder(lengths, "bucketed", edges=[0, 150, 300], batch_size=8)
    rng = np.random.default_rng(0)
    a, b = builder.epoch(rng), builder.epoch(rng)
    sets = lambda ep: {frozenset(x.tolist()) for x in ep.batches()}  # noqa: E731
    assert len(sets(a) & sets(b)) < 5
    assert a.buckets.tolist() != sorted(a.buckets.tolist())


@pytest.mark.parametrize("n, batch_size", [(1000, 4), (37, 4), (5, 8), (1, 1)])
def test_length_grouped_matches_hugging_face(n, batch_size):
    lengths = _lengths(n, n, top=60)  # many ties: stability matters
    perm = np.random.default_rng(11).permutation(n).tolist()
    expected = _hf_length_grouped(lengths.tolist(), batch_size, perm)
    ep = build_epoch(lengths, "length_grouped", rng=np.random.default_rng(11), batch_size=batch_size)
    assert [b.tolist() for b in ep.batches()] == expected
    assert lengths[ep.indices[0]] == lengths.max()


def test_length_grouped_explicit_megabatch():
    lengths = _lengths(6, 200)
    ep = build_epoch(
        lengths, "length_grouped", rng=np.random.default_rng(0), batch_size=5, gradient_accumulation_steps=2
    )
    # the Trainer's megabatch: min(200 // (4 * 5 * 2), 50) * 5 * 2 = 50 samples; inside each
    # (apart from the swapped first slot) lengths descend, and across a boundary they need not
    for start in range(0, 200, 50):
        chunk = lengths[ep.indices[start : start + 50]]
        assert (np.diff(chunk[1:]) <= 0).all()
    assert (np.diff(lengths[ep.indices[1:]]) > 0).any()


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 200), max_tokens=st.integers(1, 400))
def test_token_budget_matches_greedy_reference(seed, n, max_tokens):
    lengths = _lengths(seed, n, top=100)
    noise = PADDING_NOISE
    ep = build_epoch(lengths, "token_budget", rng=np.random.default_rng(seed), max_tokens=max_tokens)
    # budget respected, except a sample longer than the budget goes alone
    for batch in ep.batches():
        assert batch.size * lengths[batch].max() <= max_tokens or batch.size == 1
    # the same draws (noise first) give the reference sort; the greedy fill gives the sizes
    rng = np.random.default_rng(seed)
    u = rng.uniform(-noise, noise, size=n)
    order = np.argsort(lengths * (1.0 + u), kind="stable")
    sizes = _greedy_budget(lengths[order].tolist(), max_tokens)
    assert sorted(ep.sizes.tolist()) == sorted(sizes)
    starts = np.cumsum([0, *sizes[:-1]])
    expected = {frozenset(order[s : s + k].tolist()) for s, k in zip(starts, sizes, strict=False)}
    assert {frozenset(b.tolist()) for b in ep.batches()} == expected


def _loop_budget_starts(lengths: list[int], max_tokens: int) -> list[int]:
    """Batch starts of the greedy fill, one sample at a time (the previous implementation)."""
    starts, size, longest = [0], 0, 0
    for i, length in enumerate(lengths):
        top = max(longest, length)
        if size and (size + 1) * top > max_tokens:
            starts.append(i)
            size, longest = 1, length
        else:
            size, longest = size + 1, top
    return starts


@settings(max_examples=200, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 300),
    top=st.integers(1, 200),
    max_tokens=st.integers(1, 600),
    block=st.sampled_from([1, 3, 64, 1 << 16]),
    table=st.sampled_from([0, 1 << 25]),
    wide=st.booleans(),
)
def test_token_budget_starts_match_the_loop(seed, n, top, max_tokens, block, table, wide):
    """The batch ends without a loop over samples (any order of lengths, samples over the
    budget, block edges; table 0: the per-batch path for huge batches)."""
    import analysis.simulation.strategies._token as token

    lengths = np.random.default_rng(seed).integers(1, top + 1, size=n)
    saved = token._BUDGET_BLOCK, token._BUDGET_TABLE
    token._BUDGET_BLOCK, token._BUDGET_TABLE = block, table
    try:
        starts = token._token_budget_starts(lengths.astype(np.int64 if wide else np.uint16), max_tokens)
    finally:
        token._BUDGET_BLOCK, token._BUDGET_TABLE = saved
    assert starts.tolist() == _loop_budget_starts(lengths.tolist(), max_tokens)
    assert starts.dtype == np.int64


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 400), ties=st.sampled_from(["none", "some", "all"]))
def test_stable_argsort_of_keys_is_numpys(seed, n, ties):
    from analysis.simulation.strategies._token import _stable_argsort_keys

    gen = np.random.default_rng(seed)
    keys = gen.integers(1, 60, size=n) * (1.0 + gen.uniform(-PADDING_NOISE, PADDING_NOISE, size=n))
    if ties == "some":
        keys = np.round(keys)  # many equal keys: their order is the index order
    elif ties == "all":
        keys = np.full(n, 7.5)
    order = _stable_argsort_keys(keys)
    np.testing.assert_array_equal(order, np.argsort(keys, kind="stable"))
    assert order.dtype == np.int64


@pytest.mark.parametrize("strategy", TOKEN_STRATEGIES)
def test_token_strategies_with_batch_size_get_the_memory_of_a_full_batch(strategy):
    # batch_size B: the budget is B full batches' worth of the longest sample
    lengths = _lengths(9, 300, top=90)
    a = epoch_builder(lengths, strategy, batch_size=4)
    b = epoch_builder(lengths, strategy, max_tokens=4 * int(lengths.max()))
    assert a.max_tokens == 4 * int(lengths.max()) and a.batch_sizes == ()
    assert a.rule == BatchRule(batch_size=4)
    ea, eb = a.epoch(np.random.default_rng(3)), b.epoch(np.random.default_rng(3))
    np.testing.assert_array_equal(ea.indices, eb.indices)
    np.testing.assert_array_equal(ea.offsets, eb.offsets)
    for batch in ea.batches():
        used = lengths[batch].sum() if strategy in PACKED_STRATEGIES else batch.size * lengths[batch].max()
        assert used <= 4 * lengths.max()


def test_token_budget_noise_changes_compositions_between_epochs():
    lengths = _lengths(7, 2000)
    builder = epoch_builder(lengths, "token_budget", max_tokens=2000)
    rng = np.random.default_rng(0)
    a, b = ({frozenset(x.tolist()) for x in builder.epoch(rng).batches()} for _ in range(2))
    assert len(a & b) < len(a) / 2


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 150),
    top=st.integers(1, 120),
    max_tokens=st.integers(120, 600),
)
def test_packing_equals_naive_ffd(seed, n, top, max_tokens):
    lengths = _lengths(seed, n, top)
    ep = build_epoch(lengths, "packing", rng=np.random.default_rng(seed), max_tokens=max_tokens)
    bins = [sorted(lengths[b].tolist(), reverse=True) for b in ep.batches()]
    assert all(sum(b) <= max_tokens for b in bins)
    reference = _naive_ffd(lengths.tolist(), max_tokens)
    assert len(bins) == len(reference)
    assert sorted(bins) == sorted(reference)


def _bin_by_bin_ffd_plan(
    lengths: list[int], counts: list[int], max_tokens: int
) -> list[tuple[int, int, int]]:
    """ffd_plan's events, one bin at a time: for each length (longest first) every open bin in
    opening order takes what fits until the count is used, then new bins take
    ``max_tokens // length`` each."""
    room: list[int] = []
    events = []
    for length, count in zip(reversed(lengths), reversed(counts)):
        for b, r in enumerate(room):
            if count == 0:
                break
            take = min(r // length, count)
            if take:
                events.append((b, length, take))
                room[b] -= take * length
                count -= take
        while count:
            take = min(max_tokens // length, count)
            events.append((len(room), length, take))
            room.append(max_tokens - take * length)
            count -= take
    return events


@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    distinct=st.integers(1, 25),
    top=st.integers(1, 60),
    heavy=st.integers(1, 40),
    spare=st.integers(0, 100),
)
def test_ffd_plan_matches_the_bin_by_bin_reference(seed, distinct, top, heavy, spare):
    gen = np.random.default_rng(seed)
    lengths = np.unique(gen.integers(1, top + 1, size=distinct))
    counts = gen.integers(1, heavy + 1, size=lengths.size)
    max_tokens = int(lengths.max()) + spare
    plan = ffd_plan(LengthHistogram.from_counts(lengths, counts), max_tokens)
    assert list(zip(*(a.tolist() for a in plan))) == _bin_by_bin_ffd_plan(
        lengths.tolist(), counts.tolist(), max_tokens
    )
    assert all(a.dtype == np.int64 for a in plan)


def test_ffd_plan_on_a_large_histogram_is_consistent():
    hist = LengthHistogram.from_counts(np.arange(65, 8193), np.arange(65, 8193) % 97 + 1)
    ev_bin, ev_len, ev_cnt = ffd_plan(hist, 65536)
    used = np.bincount(ev_bin, weights=ev_len * ev_cnt)
    assert used.max() <= 65536
    assert int(ev_cnt.sum()) == hist.n_samples
    np.testing.assert_array_equal(np.bincount(ev_len, weights=ev_cnt)[hist.lengths], hist.counts)
    # FFD is within 11/9 OPT + 1 and OPT >= total / capacity
    assert len(used) <= 11 / 9 * hist.total_tokens / 65536 + 1


def test_packing_randomises_fill_and_bin_order():
    lengths = np.repeat([50, 30], [40, 40])
    builder = epoch_builder(lengths, "packing", max_tokens=160)
    rng = np.random.default_rng(0)
    a, b = builder.epoch(rng), builder.epoch(rng)
    assert a.sizes.tolist() != b.sizes.tolist() or not np.array_equal(a.indices, b.indices)
    assert {frozenset(x.tolist()) for x in a.batches()} != {frozenset(x.tolist()) for x in b.batches()}


# ------------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(strategy="shuffle", batch_size=2), "unknown strategy 'shuffle'"),
        (dict(strategy="bucketed", batch_size=2), "needs edges"),
        (dict(strategy="bucketed", batch_size=2, edges=[0, 5]), "do not cover"),
        (dict(strategy="bucketed", batch_size=2, edges=[3, 9]), "do not cover"),
        (dict(strategy="bucketed", batch_size=2, edges=[0, 5, 5, 9]), "strictly increasing"),
        (dict(strategy="bucketed", batch_size=2, edges=[0]), "at least 2"),
        (dict(strategy="sorted", batch_size=0), "batch_size must be a positive integer"),
        (dict(strategy="random", batch_size=2.5), "batch_size must be a positive integer"),
        (dict(strategy="random"), "exactly one of batch_size and max_tokens"),
        (dict(strategy="random", batch_size=2, max_tokens=9), "exactly one"),
        (dict(strategy="packing", max_tokens=8), "longer than max_tokens = 8"),
        (dict(strategy="token_budget", max_tokens=20, rule=BatchRule(batch_size=2)), "not both"),
        (
            dict(strategy="length_grouped", batch_size=2, gradient_accumulation_steps=0),
            "gradient_accumulation_steps",
        ),
    ],
)
def test_bad_input_raises(kwargs, message):
    strategy = kwargs.pop("strategy")
    with pytest.raises(ValueError, match=message):
        build_epoch([1, 3, 9, 2], strategy, rng=np.random.default_rng(0), **kwargs)


@pytest.mark.parametrize("lengths, message", [([], "empty"), ([3, 0], "zero length"), ([[1, 2]], "1-D")])
def test_bad_lengths_raise(lengths, message):
    with pytest.raises(ValueError, match=message):
        build_epoch(lengths, "random", rng=np.random.default_rng(0), batch_size=2)


def test_rng_must_be_a_generator():
    with pytest.raises(ValueError, match="rng must be a numpy.random.Generator"):
        build_epoch([1, 2], "random", rng=0, batch_size=2)


def test_zero_length_error_suggests_only_what_the_strategies_have() -> None:
    """The zero-length refusal names the remedy the caller has (simulate has no allow_zero)."""
    expected = r"^lengths: row 0: zero length 0 \(a batch holds only non-empty"
    with pytest.raises(ValueError, match=expected) as info:
        epoch_builder([0, 1, 2], "random", batch_size=2)
    assert "allow_zero" not in str(info.value)
