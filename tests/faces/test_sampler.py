"""The training sampler: properties, resume, Monte Carlo, and the real libraries around it
(torch DataLoader and torch.distributed, Lhotse, transformers)."""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis import (
    BatchRule,
    BucketedBatchSampler,
    LengthHistogram,
    exports,
    optimize_edges,
    simulate,
)
from analysis.batching import bucket_index
from analysis.padding.waste import expected_padding
from analysis.simulation.bucketed import bucketed_epoch, epoch_rng
from analysis.simulation.strategies import build_epoch, epoch_builder
from tests.index_dataset import IndexDataset

ROOT = Path(__file__).resolve().parents[2]


def _lengths(seed: int, n: int, top: int = 300) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.clip(rng.lognormal(4.0, 0.8, size=n), 1, top).astype(np.int64)


def _all_ranks(lengths, edges, world_size, **kw) -> list[list[list[int]]]:
    """Each rank's batches of the current epoch, from independent samplers."""
    return [
        list(BucketedBatchSampler(lengths, edges, rank=r, world_size=world_size, **kw))
        for r in range(world_size)
    ]


# ------------------------------------------------------------------ the contract
@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**31),
    n=st.integers(1, 300),
    world_size=st.integers(1, 5),
    batch_size=st.integers(1, 9),
    sync=st.booleans(),
    drop_last=st.booleans(),
    epoch=st.integers(0, 3),
)
def test_every_rank_same_length_and_coverage(seed, n, world_size, batch_size, sync, drop_last, epoch):
    lengths = _lengths(seed, n)
    edges = [0, 40, 90, max(91, int(lengths.max()))]
    kw = dict(batch_size=batch_size, seed=seed, sync_buckets=sync, drop_last=drop_last)
    samplers = [
        BucketedBatchSampler(lengths, edges, rank=r, world_size=world_size, **kw) for r in range(world_size)
    ]
    for s in samplers:
        s.set_epoch(epoch)
    ranks = [list(s) for s in samplers]
    steps = len(samplers[0])
    assert all(len(s) == steps and len(b) == steps for s, b in zip(samplers, ranks))
    bucket_of = bucket_index(lengths, edges)
    flat = [i for batches in ranks for b in batches for i in b]
    counts = np.bincount(flat, minlength=n)
    s0 = samplers[0]
    assert all(s.n_repeated == s0.n_repeated and s.n_dropped == s0.n_dropped for s in samplers)
    if drop_last:
        assert counts.max(initial=0) <= 1 and s0.n_repeated == 0
        assert s0.n_dropped == n - len(flat)
        assert all(len(b) == batch_size for batches in ranks for b in batches)
    else:
        assert counts.min() >= 1 and s0.n_dropped == 0
        assert s0.n_repeated == len(flat) - n
        if world_size == 1:
            assert s0.n_repeated == 0
    for batches in ranks:
        for b in batches:
            assert len(set(bucket_of[b].tolist())) == 1 and 1 <= len(b) <= batch_size
    if sync:  # at every step all ranks draw from the same bucket
        for step in range(steps):
            assert len({int(bucket_of[ranks[r][step][0]]) for r in range(world_size)}) == 1


def test_deterministic_in_seed_and_epoch_and_set_epoch_reshuffles():
    lengths = _lengths(1, 400)
    edges = [0, 50, 120, 300]
    a = BucketedBatchSampler(lengths, edges, batch_size=8, seed=3)
    b = BucketedBatchSampler(lengths, edges, batch_size=8, seed=3)
    assert list(a) == list(b) == list(a)
    a.set_epoch(1)
    assert list(a) != list(b)
    b.set_epoch(1)
    assert list(a) == list(b)
    assert list(BucketedBatchSampler(lengths, edges, batch_size=8, seed=4)) != list(b)


def test_plan_batch_sizes_and_max_tokens_rule():
    lengths = _lengths(2, 500)
    plan = optimize_edges(LengthHistogram.from_lengths(lengths), 3, max_tokens=1200)
    s = BucketedBatchSampler(lengths, plan)
    assert s.edges == plan.edges and s.batch_sizes == plan.batch_sizes
    t = BucketedBatchSampler(lengths, plan, batch_size=4)
    assert t.batch_sizes == [4, 4, 4]
    with pytest.raises(ValueError, match="exactly one of batch_size and max_tokens"):
        BucketedBatchSampler(lengths, plan.edges)
    with pytest.raises(ValueError, match="do not cover"):
        BucketedBatchSampler(lengths, [0, 10, 20], batch_size=2)
    with pytest.raises(ValueError, match="rank must be"):
        BucketedBatchSampler(lengths, plan, rank=2, world_size=2)


def test_counts_by_hand():
    # bucket 0: 5 samples, bucket 1: 2 samples; batch 2; 2 ranks
    lengths = [1, 2, 3, 4, 5, 9, 9]
    edges = [0, 5, 9]
    ep = bucketed_epoch(bucket_index(np.array(lengths), edges), [2, 2], epoch_rng(0, 0), world_size=2)
    # bucket 0: batches 2+2+1, one repeated sample completes its 2nd step; bucket 1: one
    # batch of 2, one repeated sample completes its step
    assert (len(ep), ep.n_steps, ep.n_repeated, ep.n_dropped) == (6, 3, 2, 0)
    dropped = bucketed_epoch(
        bucket_index(np.array(lengths), edges), [2, 2], epoch_rng(0, 0), world_size=2, drop_last=True
    )
    # bucket 0 keeps one step of 2 full batches (4 samples), bucket 1 keeps none (1 batch < 2 ranks)
    assert (len(dropped), dropped.n_repeated, dropped.n_dropped) == (2, 0, 3)
    free = bucketed_epoch(
        bucket_index(np.array(lengths), edges), [2, 2], epoch_rng(0, 0), world_size=2, sync_buckets=False
    )
    assert (len(free), free.n_repeated) == (4, 0)  # batches 2+2+1 and 2: two full steps
    odd = bucketed_epoch(
        bucket_index(np.array([1, 2, 3, 4, 9, 9]), edges),
        [2, 2],
        epoch_rng(0, 0),
        world_size=2,
        sync_buckets=False,
    )
    # 3 batches: one repeated sample (bucket 0's first in the shuffled order) fills step 2
    assert (len(odd), odd.n_repeated, odd.offsets[4] - odd.offsets[3]) == (4, 1, 1)
    assert int(odd.buckets[3]) == 0 and int(odd.indices[-1]) in odd.indices[:-1].tolist()


# ------------------------------------------------------------------ against loop references
def _loop_bucketed_epoch(buckets, sizes, rng, world_size, sync, drop_last):
    """The bucketed epoch as the module docstring states it, one Python step at a time:
    ``(batches in consumption order, bucket of each)``."""
    perm = rng.permutation(len(buckets)).tolist()
    batches, of_bucket = [], []
    for i, size in enumerate(sizes):
        members = [p for p in perm if buckets[p] == i]  # the bucket's samples, shuffled
        full, rem = divmod(len(members), size)
        if drop_last:
            lens = [size] * ((full // world_size) * world_size if sync else full)
        else:
            lens = [size] * full + ([rem] if rem else [])
            lens += [1] * ((-len(lens)) % world_size if sync else 0)  # one-sample repeats
        slot = 0
        for n in lens:
            batches.append([members[(slot + j) % len(members)] for j in range(n)])  # cycling
            of_bucket.append(i)
            slot += n
    w, m = world_size, len(batches)
    if sync:
        order = [s * w + r for s in rng.permutation(m // w).tolist() for r in range(w)]
    else:
        order = rng.permutation(m).tolist()
        if drop_last:  # the trailing incomplete step is dropped
            order = order[: (m // w) * w]
        elif m:  # one-sample repeats of the bucket-grouped order complete the step
            grouped = [(p, buckets[p]) for i in range(len(sizes)) for p in perm if buckets[p] == i]
            for j in range((-m) % w):
                p, i = grouped[j % len(grouped)]
                batches.append([p])
                of_bucket.append(i)
                order.append(len(batches) - 1)
    return [batches[b] for b in order], [of_bucket[b] for b in order]


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**31),
    n=st.integers(1, 120),
    k=st.integers(1, 5),
    world_size=st.integers(1, 4),
    sync=st.booleans(),
    drop_last=st.booleans(),
    narrow=st.booleans(),
)
def test_bucketed_epoch_matches_the_loop_reference(seed, n, k, world_size, sync, drop_last, narrow):
    gen = np.random.default_rng(seed)
    buckets = gen.integers(0, k, size=n)
    sizes = gen.integers(1, 7, size=k).tolist()
    ids = buckets.astype(np.uint8) if narrow else buckets  # the strategies pass uint8 ids
    ep = bucketed_epoch(
        ids, sizes, np.random.default_rng(seed), world_size=world_size, sync_buckets=sync, drop_last=drop_last
    )
    expected, expected_buckets = _loop_bucketed_epoch(
        buckets.tolist(), sizes, np.random.default_rng(seed), world_size, sync, drop_last
    )
    assert [b.tolist() for b in np.split(ep.indices, ep.offsets[1:-1])] == expected or (
        not expected and ep.indices.size == 0
    )
    assert ep.buckets.tolist() == expected_buckets
    assert ep.indices.dtype == np.int64 and ep.offsets.dtype == np.int64


@settings(max_examples=80, deadline=None)
@given(
    seed=st.integers(0, 2**31),
    m=st.integers(1, 40),
    uniform=st.booleans(),
    repeats=st.booleans(),
    through_index=st.booleans(),
)
def test_gather_matches_the_loop_reference(seed, m, uniform, repeats, through_index):
    """Both paths of gather_batches: whole rows (nearly every batch the longest) and per sample."""
    from analysis.simulation.bucketed import gather_batches

    gen = np.random.default_rng(seed)
    sizes = gen.integers(1, 9, size=m)
    if uniform:  # the rows path: a few short batches at most
        sizes[:] = 8
        sizes[gen.integers(0, m, size=3)] = gen.integers(1, 8, size=3)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    total = int(offsets[-1])
    values = gen.permutation(total + 5).astype(np.int64)
    index = gen.integers(0, total + 5, size=total) if through_index else None
    order = gen.integers(0, m, size=int(gen.integers(0, 2 * m))) if repeats else gen.permutation(m)
    source = (values if index is None else values[index]).tolist()
    expected = [source[offsets[b] : offsets[b + 1]] for b in order.tolist()]
    out, new_offsets = gather_batches(values[:total] if index is None else values, offsets, order, index)
    assert [b.tolist() for b in np.split(out, new_offsets[1:-1])] == expected or not expected
    assert new_offsets.tolist() == np.concatenate([[0], np.cumsum([len(b) for b in expected])]).tolist()
    assert out.dtype == np.int64


# ------------------------------------------------------------------ one implementation
@pytest.mark.parametrize("world_size, sync", [(1, True), (4, True), (4, False)])
def test_simulate_and_builder_give_the_samplers_batches(world_size, sync):
    lengths = _lengths(3, 700)
    edges = [0, 40, 100, 300]
    builder = epoch_builder(
        lengths, "bucketed", edges=edges, batch_size=6, world_size=world_size, sync_buckets=sync
    )
    samplers = [
        BucketedBatchSampler(
            lengths, edges, batch_size=6, seed=11, rank=r, world_size=world_size, sync_buckets=sync
        )
        for r in range(world_size)
    ]
    for e in (0, 2):
        ep = builder.epoch(epoch_rng(11, e))
        batches = ep.batches()
        for r, s in enumerate(samplers):
            s.set_epoch(e)
            assert list(s) == [b.tolist() for b in batches[r::world_size]]
    res = simulate(
        lengths,
        "bucketed",
        rng=epoch_rng(11, 0),
        edges=edges,
        batch_size=6,
        world_size=world_size,
        sync_buckets=sync,
    )
    for r, s in enumerate(samplers):
        s.set_epoch(0)
        mine = res.batches[res.batches["rank"] == r]
        assert mine["size"].tolist() == [len(b) for b in s]
        assert mine["longest"].tolist() == [int(lengths[b].max()) for b in s]


# ------------------------------------------------------------------ repeats
def _fewest_repeats(n_batches: int, batch_size: int, world_size: int) -> int:
    """Brute force: the fewest samples in extra batches (each of 1 to ``batch_size`` samples)
    that bring ``n_batches`` to a whole number of steps of ``world_size`` batches."""
    best = None
    for e in range(0, 2 * world_size):
        if (n_batches + e) % world_size:
            continue
        for sizes in itertools.product(range(1, min(batch_size, 3) + 1), repeat=e):
            best = sum(sizes) if best is None else min(best, sum(sizes))
    assert best is not None
    return best


@pytest.mark.parametrize("sync", [True, False])
def test_repeats_are_the_fewest_samples_that_complete_the_steps(sync):
    """Every small case: n_repeated equals a brute-force count of the fewest samples that
    complete the last steps (per bucket with sync_buckets, per epoch without), each repeat a
    one-sample batch; every sample is seen, and each bucket's own batches are those of the exact
    padding model (floor(n / B) full ones, one of n mod B)."""
    checked = 0
    for seed, n, batch_size, world_size in itertools.product(
        range(3), range(1, 10), range(1, 5), range(1, 5)
    ):
        lengths = np.random.default_rng(seed + 10 * n).integers(1, 7, size=n)
        edges = [0, 2, 4, 6]
        s = BucketedBatchSampler(
            lengths, edges, batch_size=batch_size, world_size=world_size, sync_buckets=sync, seed=seed
        )
        counts = np.bincount(bucket_index(lengths, edges), minlength=3).tolist()
        own = [-(-c // batch_size) for c in counts]
        if sync:
            fewest = sum(_fewest_repeats(b, batch_size, world_size) for b in own if b)
        else:
            fewest = _fewest_repeats(sum(own), batch_size, world_size)
        ep = s.global_epoch()
        assert ep.n_repeated == fewest, (seed, n, batch_size, world_size)
        seen = np.bincount(ep.indices, minlength=n)
        assert seen.min() >= 1 and int(seen.sum()) - n == fewest
        sizes, buckets = np.diff(ep.offsets), ep.buckets
        if not sync:  # the repeats are the epoch's last batches
            assert sizes[len(ep) - fewest :].tolist() == [1] * fewest
            sizes, buckets = sizes[: len(ep) - fewest], buckets[: len(ep) - fewest]
        for i, c in enumerate(counts):
            extra = (-own[i]) % world_size if sync and own[i] else 0
            model = [batch_size] * (c // batch_size) + ([c % batch_size] if c % batch_size else [])
            assert sorted(sizes[buckets == i].tolist()) == sorted(model + [1] * extra)
        assert len(ep) == len(s) * world_size
        of_sample = bucket_index(lengths, edges)
        assert all((of_sample[b] == k).all() for b, k in zip(ep.rank_batches(0), ep.buckets[::world_size]))
        checked += 1
    assert checked == 3 * 9 * 4 * 4


def test_world_size_one_batches_are_the_exact_padding_models():
    """One rank: per bucket, floor(n / B) full batches and one of n mod B, as expected_padding
    counts them (its bucket_batches), under a batch_size and a max_tokens rule."""
    lengths = _lengths(21, 1000)
    edges = [0, 40, 90, 300]
    for rule in ({"batch_size": 7}, {"max_tokens": 900}):
        s = BucketedBatchSampler(lengths, edges, seed=3, **rule)
        est = expected_padding(LengthHistogram.from_lengths(lengths), edges, BatchRule(**rule))
        ep = s.global_epoch()
        sizes = np.diff(ep.offsets)
        for i, (c, b) in enumerate(zip(est.bucket_samples, s.batch_sizes)):
            model = [b] * (c // b) + ([c % b] if c % b else [])
            assert sorted(sizes[ep.buckets == i].tolist()) == sorted(model)
            assert len(model) == est.bucket_batches[i]
        assert ep.n_repeated == ep.n_dropped == 0 and sorted(ep.indices.tolist()) == list(range(1000))


@pytest.mark.parametrize("sync", [True, False])
@pytest.mark.parametrize("batch_size", [10**6, 10**8])
def test_huge_batch_size_on_a_tiny_dataset_allocates_little(sync, batch_size):
    """3 samples, 8 ranks: 7 one-sample repeats complete the step (were 7 whole batches of
    copies: 7,000,000 repeats at 1e6, a 5.2 GiB allocation at 1e8)."""
    import tracemalloc

    tracemalloc.start()
    try:
        batches = [
            list(
                BucketedBatchSampler(
                    [5, 3, 9], [0, 10], batch_size=batch_size, world_size=8, rank=r, sync_buckets=sync
                )
            )
            for r in range(8)
        ]
        s = BucketedBatchSampler([5, 3, 9], [0, 10], batch_size=batch_size, world_size=8, sync_buckets=sync)
        repeated = s.n_repeated
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2**20, peak  # under 1 MiB
    assert repeated == 7 and [len(b) for b in batches] == [1] * 8
    assert sorted(len(b[0]) for b in batches) == [1] * 7 + [3]
    assert {i for b in batches for i in b[0]} == {0, 1, 2}


def test_an_epoch_of_one_full_batch_and_many_short_ones_allocates_in_proportion_to_the_data():
    """1e6 samples in one full batch and 60 one-sample buckets: the gather's rows (a short batch
    takes a whole row of the longest batch's width) were 61 x 1e6 slots (488 MiB)."""
    import tracemalloc

    lengths = np.concatenate([np.ones(10**6, dtype=np.int64), np.arange(2, 62)])
    s = BucketedBatchSampler(lengths, list(range(62)), batch_size=10**6)
    tracemalloc.start()
    try:
        ep = s.global_epoch()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(ep) == 61 and np.bincount(ep.indices).tolist() == [1] * lengths.size
    assert peak < 8 * lengths.nbytes, peak  # ~38 MiB: a few arrays of the samples


def test_world_size_one_keeps_the_plain_bucketed_shuffle():
    """Two draws (samples, then batch order), exactly as the strategy always drew them."""
    lengths = _lengths(4, 300)
    edges = [0, 60, 300]
    rng = np.random.default_rng(5)
    perm = rng.permutation(lengths.size)
    bucket = bucket_index(lengths, edges)
    grouped = perm[np.argsort(bucket[perm], kind="stable")]
    batches = []
    for i in range(2):
        members = grouped[bucket[grouped] == i]
        batches += [members[j : j + 7].tolist() for j in range(0, members.size, 7)]
    order = rng.permutation(len(batches))
    ep = build_epoch(lengths, "bucketed", rng=np.random.default_rng(5), edges=edges, batch_size=7)
    assert [b.tolist() for b in ep.batches()] == [batches[k] for k in order]


def test_straggler_factor_with_and_without_sync_buckets():
    lengths = _lengths(6, 3000, top=2000)
    edges = [0, 40, 80, 160, 2000]
    kw = dict(rng=np.random.default_rng(0), edges=edges, batch_size=8, world_size=8, epochs=2)
    synced = simulate(lengths, "bucketed", sync_buckets=True, **kw).summary()["straggler_factor"]
    free = simulate(lengths, "bucketed", sync_buckets=False, **kw).summary()["straggler_factor"]
    assert 1 <= synced < 1.5 < free


# ------------------------------------------------------------------ Monte Carlo
def test_mean_efficiency_over_epochs_matches_expected_padding_within_3_se():
    lengths = _lengths(7, 2000, top=600)
    edges = [0, 35, 70, 140, 600]
    sampler = BucketedBatchSampler(lengths, edges, batch_size=8, seed=1)
    eff = []
    for e in range(60):
        sampler.set_epoch(e)
        batches = list(sampler)
        useful = sum(int(lengths[b].sum()) for b in batches)
        padded = sum(len(b) * int(lengths[b].max()) for b in batches)
        eff.append(useful / padded)
    eff = np.array(eff)
    se = eff.std(ddof=1) / math.sqrt(eff.size)
    exact = expected_padding(
        LengthHistogram.from_lengths(lengths), edges, rule=BatchRule(batch_size=8)
    ).efficiency
    assert abs(eff.mean() - exact) <= 3 * se


# ------------------------------------------------------------------ resume
@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**31),
    n=st.integers(1, 250),
    world_size=st.integers(1, 4),
    sync=st.booleans(),
    drop_last=st.booleans(),
    epoch=st.integers(0, 5),
    cut=st.floats(0, 1),
    ahead=st.integers(0, 6),
)
def test_resume_at_any_cut_point(seed, n, world_size, sync, drop_last, epoch, cut, ahead):
    lengths = _lengths(seed, n)
    edges = [0, 50, max(51, int(lengths.max()))]
    kw = dict(batch_size=4, seed=seed % 1000, world_size=world_size, sync_buckets=sync, drop_last=drop_last)
    for rank in range(world_size):
        s = BucketedBatchSampler(lengths, edges, rank=rank, **kw)
        s.set_epoch(epoch)
        reference = list(s)
        consumed = int(cut * len(s))
        it = iter(s)  # the loader pulled `ahead` batches more than were consumed
        pulled = [next(it) for _ in range(min(len(s), consumed + ahead))]
        assert pulled == reference[: len(pulled)]
        state = json.loads(json.dumps(s.state_dict(consumed)))
        assert len(json.dumps(state)) < 400
        t = BucketedBatchSampler(lengths, edges, rank=rank, **kw)
        t.load_state_dict(state)
        t.set_epoch(epoch)  # what a trainer does before iterating: keeps the resume point
        assert list(t) == reference[consumed:]
        assert list(t) == reference  # the next pass starts the epoch from its first batch
        t.set_epoch(epoch + 1)
        s.set_epoch(epoch + 1)
        assert list(t) == list(s)


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**31),
    n=st.integers(1, 120),
    world_size=st.integers(1, 3),
    sync=st.booleans(),
    drop_last=st.booleans(),
    epoch=st.integers(0, 3),
    cut=st.floats(0, 1),
    other_seed=st.integers(0, 2**31),
    path=st.sampled_from(
        ["fresh", "before set_epoch", "after set_epoch", "after a pass", "after len", "finished, then next"]
    ),
)
def test_resume_into_a_sampler_with_another_seed_takes_the_states_seed(
    seed, n, world_size, sync, drop_last, epoch, cut, other_seed, path
):
    """The resumed stream is that of an uninterrupted run with the state's seed, batch for batch,
    however the sampler that loads it was built and used before (its own seed's epoch built)."""
    lengths = _lengths(seed, n)
    edges = [0, 50, max(51, int(lengths.max()))]
    kw = dict(batch_size=3, world_size=world_size, sync_buckets=sync, drop_last=drop_last)
    ranks = []
    for rank in range(world_size):
        s = BucketedBatchSampler(lengths, edges, seed=seed, rank=rank, **kw)
        s.set_epoch(epoch)
        reference = list(s)
        s.set_epoch(epoch + 1)
        following = list(s)
        s.set_epoch(epoch)
        consumed = len(s) if path == "finished, then next" else int(cut * len(s))
        state = s.state_dict(consumed)
        t = BucketedBatchSampler(lengths, edges, seed=other_seed, rank=rank, **kw)
        if path == "finished, then next":  # the loop moved on to the next epoch, then loaded
            t.set_epoch(epoch + 1)
            t.load_state_dict(state)
            assert (t.seed, t.epoch, len(t)) == (seed, epoch + 1, len(s))
            assert list(t) == following
            ranks.append(reference)
            continue
        if path == "after a pass":  # the other seed's epoch built and cached
            t.set_epoch(epoch)
            list(t)
        elif path == "after len":
            t.set_epoch(epoch)
            assert t.n_repeated >= 0 and len(t) == len(s)
        elif path == "after set_epoch":
            t.set_epoch(epoch)
        t.load_state_dict(state)
        if path == "before set_epoch":
            t.set_epoch(epoch)
        assert t.seed == seed and len(t) == len(reference) - consumed
        rest = list(t)
        assert rest == reference[consumed:]
        t.set_epoch(epoch + 1)
        assert list(t) == following
        ranks.append(reference[:consumed] + rest)
    # every sample of the epoch seen exactly as the uninterrupted epoch has it
    counts = np.bincount([i for batches in ranks for b in batches for i in b], minlength=n)
    epoch_ = BucketedBatchSampler(lengths, edges, seed=seed, **kw).global_epoch(epoch)
    assert counts.tolist() == np.bincount(epoch_.indices, minlength=n).tolist()
    if not drop_last:
        assert counts.min() >= 1 and int(counts.sum()) - n == epoch_.n_repeated
        if world_size == 1:
            assert counts.max() == 1


@pytest.mark.parametrize("other_seed", [2, 9])
def test_finished_epoch_loaded_after_set_epoch_leaves_the_next_epoch_whole(other_seed):
    """A state saved at the end of epoch 0 (seed 2), loaded after set_epoch(1) into a sampler
    built with seed ``other_seed``: epoch 1 of seed 2 follows, whole."""
    lengths = np.random.default_rng(0).integers(1, 100, 64)
    s = BucketedBatchSampler(lengths, [0, 30, 60, 100], batch_size=4, seed=2)
    list(s)
    state = s.state_dict()
    s.set_epoch(1)
    expected = list(s)
    t = BucketedBatchSampler(lengths, [0, 30, 60, 100], batch_size=4, seed=other_seed)
    t.set_epoch(1)
    t.load_state_dict(state)
    got = list(t)
    assert (t.epoch, t.seed, len(got)) == (1, 2, len(expected)) and got == expected
    assert sorted(i for b in got for i in b) == list(range(64))


def test_a_pass_running_when_a_state_is_loaded_stops_with_one_line():
    lengths = np.random.default_rng(0).integers(1, 100, 64)
    s = BucketedBatchSampler(lengths, [0, 30, 60, 100], batch_size=4, seed=2)
    it = iter(s)
    done = [next(it) for _ in range(5)]
    state = s.state_dict()
    t = BucketedBatchSampler(lengths, [0, 30, 60, 100], batch_size=4, seed=0)
    running = iter(t)
    next(running)  # a pass of seed 0 under way
    t.load_state_dict(state)
    with pytest.raises(
        RuntimeError, match=r"^BucketedBatchSampler: a state was loaded during this pass"
    ) as info:
        next(running)
    assert "\n" not in str(info.value)
    assert t.state_dict()["consumed"] == 5  # the stale pass did not move the resume point
    rest = list(t)
    assert done + rest == list(s)
    assert sorted(i for b in done + rest for i in b) == list(range(64))


def test_state_from_another_setup_is_refused():
    lengths = _lengths(8, 100)
    s = BucketedBatchSampler(lengths, [0, 50, 300], batch_size=4, world_size=2)
    state = s.state_dict(1)
    with pytest.raises(ValueError, match="world_size"):
        BucketedBatchSampler(lengths, [0, 50, 300], batch_size=4, world_size=3).load_state_dict(state)
    with pytest.raises(ValueError, match="fingerprint"):
        BucketedBatchSampler(lengths, [0, 60, 300], batch_size=4, world_size=2).load_state_dict(state)
    with pytest.raises(ValueError, match="consumed"):
        s.state_dict(len(s) + 1)
    with pytest.raises(ValueError, match="fingerprint"):  # other batch sizes
        BucketedBatchSampler(lengths, [0, 50, 300], batch_size=5, world_size=2).load_state_dict(state)
    with pytest.raises(ValueError, match="fingerprint"):  # other lengths
        BucketedBatchSampler(lengths + 1, [0, 50, 301], batch_size=4, world_size=2).load_state_dict(state)
    with pytest.raises(ValueError, match="sync_buckets"):
        BucketedBatchSampler(
            lengths, [0, 50, 300], batch_size=4, world_size=2, sync_buckets=False
        ).load_state_dict(state)
    with pytest.raises(ValueError, match="drop_last"):
        BucketedBatchSampler(
            lengths, [0, 50, 300], batch_size=4, world_size=2, drop_last=True
        ).load_state_dict(state)
    no_format = {k: v for k, v in state.items() if k != "format"}
    foreign = [  # (state, the key the message must name)
        (None, "dict"),
        ([1, 2], "dict"),
        ({"format": "analysis.BucketedBatchSampler/0", **no_format}, "format"),
        ({k: v for k, v in state.items() if k != "epoch"}, "'epoch'"),
        ({**state, "extra": 1}, "'extra'"),
        ({**state, "consumed": "3"}, "consumed"),
        ({**state, "consumed": 2.9}, "consumed"),
        ({**state, "consumed": 3.0}, "consumed"),
        ({**state, "consumed": True}, "consumed"),
        ({**state, "consumed": np.float64(1)}, "consumed"),
        ({**state, "consumed": len(s) + 1}, "consumed"),
        ({**state, "consumed": -1}, "consumed"),
        ({**state, "drop_last": 1}, "drop_last"),
        ({**state, "sync_buckets": "yes"}, "sync_buckets"),
        ({**state, "epoch": -1}, "epoch"),
        ({**state, "epoch": 1.5}, "epoch"),
        ({**state, "seed": -1}, "seed"),
        ({**state, "seed": "0"}, "seed"),
        ({**state, "world_size": 2.0}, "world_size"),
        ({**state, "world_size": 3}, "world_size"),
        ({**state, "fingerprint": 5}, "fingerprint"),
        ({**state, "fingerprint": "0" * 16}, "fingerprint"),
    ]
    for bad, key in foreign:
        t = BucketedBatchSampler(lengths, [0, 50, 300], batch_size=4, world_size=2, seed=7)
        t.set_epoch(2)
        before = (t.seed, t.epoch, len(t), t.state_dict())
        with pytest.raises(ValueError) as info:
            t.load_state_dict(bad)
        message = str(info.value)
        assert "\n" not in message and "state" in message and key in message, (bad, message)
        assert (t.seed, t.epoch, len(t), t.state_dict()) == before  # nothing changed
    # numpy integers (a state that went through numpy) are integers
    t = BucketedBatchSampler(lengths, [0, 50, 300], batch_size=4, world_size=2)
    t.load_state_dict({**state, "consumed": np.int64(1), "epoch": np.int32(0)})
    assert t.state_dict() == state


def test_zero_length_message_suggests_only_what_exists():
    import inspect

    with pytest.raises(ValueError) as info:
        BucketedBatchSampler([3, 0, 2], [0, 4], batch_size=2)
    message = str(info.value)
    assert message.startswith("lengths: row 1: zero length 0") and "\n" not in message
    # every keyword the message names is one the sampler takes
    named = set(re.findall(r"(\w+)=", message))
    assert named <= set(inspect.signature(BucketedBatchSampler).parameters), message
    assert "allow_zero" not in message


def test_len_after_load_state_dict_counts_what_is_left():
    lengths = _lengths(8, 100)
    s = BucketedBatchSampler(lengths, [0, 50, 300], batch_size=4)
    s.set_epoch(3)
    n = len(s)
    it = iter(s)
    done = [next(it) for _ in range(5)]
    assert s.yielded == 5 and s.state_dict() == s.state_dict(consumed=5)
    t = BucketedBatchSampler(lengths, [0, 50, 300], batch_size=4)
    t.load_state_dict(s.state_dict())
    assert (len(t), t.epoch, t.state_dict()["consumed"]) == (n - 5, 3, 5)  # re-saving keeps the point
    rest = list(t)
    assert len(rest) == len(t) == n - 5 and done + rest == list(s)
    assert t.state_dict()["consumed"] == n
    t.set_epoch(4)
    assert len(t) == n and t.state_dict()["consumed"] == 0
    # a finished epoch loaded into a sampler already set to a later one: nothing to resume
    u = BucketedBatchSampler(lengths, [0, 50, 300], batch_size=4)
    u.set_epoch(4)
    u.load_state_dict(s.state_dict(consumed=n))
    assert (u.epoch, len(u)) == (4, n) and list(u) == list(t)


# ------------------------------------------------------------------ torch DataLoader
def test_dataloader_with_two_workers_and_resume_after_prefetch():
    lengths = _lengths(9, 600)
    edges = [0, 50, 120, 300]

    def make():
        return BucketedBatchSampler(lengths, edges, batch_size=8, seed=2)

    sampler = make()
    sampler.set_epoch(1)
    expected = list(sampler)
    loader = torch.utils.data.DataLoader(
        IndexDataset(lengths.size), batch_sampler=sampler, num_workers=2, prefetch_factor=2
    )
    assert len(loader) == len(sampler)
    assert [b.tolist() for b in loader] == expected
    # interrupt after 5 consumed batches: the workers had been handed more
    it = iter(loader)
    consumed = [next(it).tolist() for _ in range(5)]
    assert sampler.yielded > 5  # prefetch: what the sampler yielded is not what was consumed
    state = json.loads(json.dumps(sampler.state_dict(consumed=5)))
    del it
    resumed = make()
    resumed.load_state_dict(state)
    loader = torch.utils.data.DataLoader(
        IndexDataset(lengths.size), batch_sampler=resumed, num_workers=2, prefetch_factor=2
    )
    assert consumed + [b.tolist() for b in loader] == expected


_DDP_WORKER = textwrap.dedent("""
    import json, os, sys
    import numpy as np
    import torch
    import torch.distributed as dist
    from analysis import BucketedBatchSampler
    from analysis.batching import bucket_index

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", rank=rank, world_size=world)
    lengths = np.load(sys.argv[1])
    edges = json.loads(sys.argv[2])
    sampler = BucketedBatchSampler(lengths, edges, batch_size=8, seed=5, rank=rank,
                                   world_size=world)
    sampler.set_epoch(1)
    data = torch.arange(lengths.size)
    loader = torch.utils.data.DataLoader(data, batch_sampler=sampler)
    seen, steps = [], 0
    for batch in loader:
        bucket = torch.tensor([int(bucket_index(lengths[batch.numpy()], edges)[0])])
        gathered = [torch.zeros(1, dtype=torch.int64) for _ in range(world)]
        dist.all_gather(gathered, bucket)  # a synchronous step: hangs if step counts differ
        assert len({int(g) for g in gathered}) == 1, gathered
        seen += batch.tolist()
        steps += 1
    dist.barrier()
    dist.destroy_process_group()
    with open(sys.argv[3], "w") as f:
        json.dump({"steps": steps, "len": len(sampler), "seen": seen}, f)
""")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_two_process_gloo_epoch_equal_steps_and_full_coverage(tmp_path):
    lengths = _lengths(10, 501)
    edges = [0, 45, 110, 300]
    np.save(tmp_path / "lengths.npy", lengths)
    script = tmp_path / "worker.py"
    script.write_text(_DDP_WORKER)
    env = {
        **os.environ,
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(_free_port()),
        "WORLD_SIZE": "2",
        "PYTHONPATH": str(ROOT),
        "OMP_NUM_THREADS": "1",
    }
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(script),
                str(tmp_path / "lengths.npy"),
                json.dumps(edges),
                str(tmp_path / f"rank{r}.json"),
            ],
            env={**env, "RANK": str(r)},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for r in range(2)
    ]
    try:
        outputs = [p.communicate(timeout=120)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert [p.returncode for p in procs] == [0, 0], outputs
    results = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert results[0]["steps"] == results[1]["steps"] == results[0]["len"] == results[1]["len"]
    seen = results[0]["seen"] + results[1]["seen"]
    assert set(seen) == set(range(lengths.size))
    expected = BucketedBatchSampler(lengths, edges, batch_size=8, world_size=2).global_epoch(1)
    assert len(seen) - lengths.size == expected.n_repeated


# ------------------------------------------------------------------ Lhotse
def test_lhotse_sampler_from_the_plan_keeps_our_buckets(tmp_path):
    from lhotse import CutSet, MonoCut

    lengths = _lengths(11, 400)
    plan = optimize_edges(LengthHistogram.from_lengths(lengths), 3, batch_size=6)
    # durations = our lengths (the default constraint measures cut.duration); read lazily, as
    # DynamicBucketingSampler expects (an eager CutSet makes it warn)
    CutSet.from_cuts(
        MonoCut(id=f"c{i}", start=0.0, duration=float(n), channel=0) for i, n in enumerate(lengths.tolist())
    ).to_jsonl(tmp_path / "cuts.jsonl")
    cuts = CutSet.from_jsonl_lazy(tmp_path / "cuts.jsonl")
    sampler = exports.lhotse_sampler(cuts, plan, shuffle=True, seed=0)
    ours = bucket_index(lengths, plan.edges)
    seen = []
    for batch in sampler:
        idx = [int(c.id[1:]) for c in batch]
        assert len(set(ours[idx].tolist())) == 1
        assert len(idx) <= plan.batch_sizes[int(ours[idx[0]])]
        seen += idx
    assert sorted(seen) == list(range(lengths.size))


# ------------------------------------------------------------------ transformers
def test_length_grouped_matches_the_trainers_sampler_index_for_index(monkeypatch):
    from transformers import trainer_pt_utils

    lengths = _lengths(12, 700, top=40)  # many ties
    batch_size, accumulation = 4, 3
    perm = np.random.default_rng(13).permutation(lengths.size)
    monkeypatch.setattr(trainer_pt_utils.torch, "randperm", lambda n, generator=None: torch.as_tensor(perm))
    # Trainer._get_train_sampler: LengthGroupedSampler(train_batch_size * accumulation_steps)
    hf = trainer_pt_utils.get_length_grouped_indices(lengths.tolist(), batch_size * accumulation)
    ours = build_epoch(
        lengths,
        "length_grouped",
        rng=np.random.default_rng(13),
        batch_size=batch_size,
        gradient_accumulation_steps=accumulation,
    )
    assert ours.indices.tolist() == hf
    assert ours.sizes.tolist()[:-1] == [batch_size] * (len(ours) - 1)
