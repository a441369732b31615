"""The field's packers against their references: TRL's own ``pack_dataset`` (installed, bin for
bin) and, for axolotl's multipack and torchtune's ``PackedDataset`` (not installable here:
axolotl pins CUDA builds, torchtune its own torch), independent plain-Python implementations
of their published algorithms."""

from __future__ import annotations

import numpy as np
import pytest

from analysis import LengthHistogram, simulate
from analysis.simulation.strategies import (
    MULTIPACK_GROUP,
    PACKED_STRATEGIES,
    TRL_MAP_BATCH,
    build_epoch,
    pack_bfd,
    pack_first_fit,
    pack_next_fit,
)


def _rows(indices: np.ndarray, offsets: np.ndarray) -> list[list[int]]:
    return [indices[a:b].tolist() for a, b in zip(offsets[:-1], offsets[1:])]


def _trl_rows(lengths: np.ndarray, seq_length: int) -> list[list[int]]:
    """TRL's packed rows, as the samples in each (a sample's tokens are its index)."""
    datasets = pytest.importorskip("datasets")
    from trl.data_utils import pack_dataset

    ds = datasets.Dataset.from_dict({"input_ids": [[i] * int(n) for i, n in enumerate(lengths)]})
    packed = pack_dataset(ds, seq_length, strategy="bfd")
    rows = []
    for ids, seq_lengths in zip(packed["input_ids"], packed["seq_lengths"]):
        starts = np.cumsum([0, *seq_lengths[:-1]])
        rows.append([int(ids[s]) for s in starts])
    return rows


@pytest.mark.parametrize(
    ("n", "high", "seq_length", "seed"),
    [(40, 30, 32, 0), (2500, 200, 256, 1), (1200, 9, 10, 2), (3000, 1000, 1024, 3)],
)
def test_pack_bfd_is_trl_pack_dataset_bin_for_bin(n, high, seq_length, seed):
    # many ties (short ranges of lengths) and more than one datasets.map batch of 1,000
    lengths = np.random.default_rng(seed).integers(1, high + 1, size=n)
    assert _rows(*pack_bfd(lengths, seq_length)) == _trl_rows(lengths, seq_length)


def test_trl_map_batch_is_datasets_default():
    datasets = pytest.importorskip("datasets")
    import inspect

    default = inspect.signature(datasets.Dataset.map).parameters["batch_size"].default
    assert default == TRL_MAP_BATCH


def _first_fit_spec(lengths, capacity, order, group):
    """First fit, plainly: each sample (in ``order``) scans its group's rows in opening order."""
    rows: list[list[int]] = []
    for g in range(0, len(order), group):
        rooms: list[int] = []
        mine: list[list[int]] = []
        for i in order[g : g + group]:
            for r, room in enumerate(rooms):
                if room >= lengths[i]:
                    rooms[r] -= lengths[i]
                    mine[r].append(int(i))
                    break
            else:
                rooms.append(capacity - lengths[i])
                mine.append([int(i)])
        rows += mine
    return rows


@pytest.mark.parametrize(("n", "high", "capacity", "group"), [(300, 50, 64, 1000), (500, 90, 100, 37)])
def test_pack_first_fit_is_first_fit_in_groups(n, high, capacity, group):
    rng = np.random.default_rng(n)
    lengths = rng.integers(1, high + 1, size=n)
    order = rng.permutation(n)
    got = _rows(*pack_first_fit(lengths, capacity, order, group))
    assert got == _first_fit_spec(lengths, capacity, order, group)
    assert MULTIPACK_GROUP == 100_000


def _torchtune_spec(lengths, max_seq_len):
    """torchtune's PackedDataset loop (split_across_pack=False): add the sample to the current
    pack; while the pack is over max_seq_len, close it at the previous sample boundary."""
    packs, current = [], []
    for i, n in enumerate(lengths):
        if sum(lengths[j] for j in current) + n > max_seq_len:
            packs.append(current)
            current = []
        current.append(i)
    if current:
        packs.append(current)
    return packs


def test_pack_next_fit_is_torchtunes_packed_dataset():
    lengths = np.random.default_rng(5).integers(1, 64, size=700)
    assert _rows(*pack_next_fit(lengths, 64)) == _torchtune_spec(lengths.tolist(), 64)
    assert _rows(*pack_next_fit(np.array([4, 4, 4]), 8)) == [[0, 1], [2]]  # exactly full fits


@pytest.mark.parametrize("strategy", PACKED_STRATEGIES)
def test_packed_epochs_hold_every_sample_once_within_the_budget(strategy):
    lengths = np.random.default_rng(7).integers(1, 300, size=2000)
    epoch = build_epoch(lengths, strategy, rng=np.random.default_rng(1), max_tokens=1024)
    assert np.array_equal(np.sort(epoch.indices), np.arange(lengths.size))
    fill = np.add.reduceat(lengths[epoch.indices], epoch.offsets[:-1])
    assert fill.max() <= 1024 and epoch.sizes.min() >= 1
    res = simulate(lengths, strategy, rng=np.random.default_rng(2), epochs=2, max_tokens=1024)
    assert res.padded_tokens == 1024 * len(res.batches)  # a row costs the budget
    repeat = res.epochs["composition_repeat"].iloc[1]
    # TRL's and torchtune's packed datasets are fixed; multipack and packing re-pack each epoch
    assert repeat == (
        1.0 if strategy in ("packing_bfd", "packing_next_fit") else pytest.approx(0.0, abs=0.05)
    )


@pytest.mark.parametrize("strategy", PACKED_STRATEGIES[1:])
def test_packers_refuse_a_sample_longer_than_the_budget(strategy):
    with pytest.raises(ValueError, match=f"{strategy}: 1 sample\\(s\\) longer than max_tokens = 10"):
        build_epoch([3, 11, 4], strategy, rng=np.random.default_rng(0), max_tokens=10)


def test_pack_or_pad_sweep_prices_packing_exactly_and_finds_the_flip():
    from analysis import StepTimeModel
    from analysis.answers.pack_or_pad import pack_or_pad, packed_epoch_seconds
    from analysis.answers.throughput import simulated_epoch_times
    from analysis.narrative.packing import describe_pack_or_pad

    lengths = np.random.default_rng(11).integers(10, 500, size=600)
    # a large per-step cost makes big packed rows pay; attention makes small padded batches pay
    model = StepTimeModel(per_step=0.05, per_token=1e-5, attention=1e-7, per_segment=1e-4)
    seconds, rows = packed_epoch_seconds(LengthHistogram.from_lengths(lengths), model, 2000)
    sim = simulated_epoch_times(
        lengths, model, "packing", rng=np.random.default_rng(0), epochs=1, max_tokens=2000
    )
    assert sim["steps"].iloc[0] == rows
    assert sim["seconds"].iloc[0] == pytest.approx(seconds, rel=1e-12)
    res = pack_or_pad(
        lengths, model, batch_size=8, edges=[0, 100, 250, 499], rng=np.random.default_rng(1), epochs=1
    )
    assert set(res.table.index) == set(res.table.index[res.table["packed"]]) | set(
        res.table.index[~res.table["packed"]]
    )
    wins = res.sweep["packing_wins"].to_numpy()
    flip = res.flip
    if flip is None:
        assert wins.all() or not wins.any()
    else:
        here = int(np.flatnonzero(res.sweep["token_budget"] == res.rule_budget)[0])
        assert bool(flip["packing_wins"]) != bool(wins[here])
    text = describe_pack_or_pad(res)
    assert text.startswith("Here packing wins" if res.packing_wins else "Here padding wins")
    assert f"{res.speedup:.2f}x" in text


def test_pack_or_pad_figure_hatches_the_packers():
    from analysis import StepTimeModel
    from analysis.answers.pack_or_pad import pack_or_pad
    from analysis.plots import plot_pack_or_pad

    lengths = np.random.default_rng(12).integers(10, 500, size=300)
    model = StepTimeModel(per_step=0.05, per_token=1e-5, attention=1e-7)
    res = pack_or_pad(lengths, model, batch_size=8, edges=[0, 499], rng=np.random.default_rng(1), epochs=1)
    fig = plot_pack_or_pad(res.table, res.sweep, res.rule_budget)
    bars, sweep = fig.axes
    assert len(bars.patches) == len(res.table)
    assert sum(bool(p.get_hatch()) for p in bars.patches) == int(res.table["packed"].sum()) == 4
    top = [t.get_text() for t in bars.get_yticklabels()][-1]  # fastest on top
    assert res.table.loc[top, "tokens_per_s"] == res.table["tokens_per_s"].max()
    assert len(sweep.lines) >= 2 and sweep.get_xscale() == "log"


def test_compare_strategies_measures_the_packers_like_any_strategy():
    from analysis import compare_strategies
    from analysis.simulation.strategies import FIELD_PACKERS

    lengths = np.random.default_rng(13).integers(10, 400, size=1500)
    table = compare_strategies(
        lengths,
        rng=np.random.default_rng(0),
        edges=[0, 399],
        batch_size=8,
        strategies=["packing", *FIELD_PACKERS],
    )
    assert table.index.tolist() == ["packing", *FIELD_PACKERS]
    assert (table["efficiency"] <= 1).all() and (table["efficiency"] > 0.9).all()  # real tokens / capacity
    assert (table["batch_rule"] == f"max_tokens {8 * 399:,}").all()
    assert table.loc[["packing_bfd", "packing_next_fit"], "composition_repeat"].eq(1.0).all()  # fixed rows
    assert table.loc["packing_first_fit", "composition_repeat"] < 0.05


def test_the_packers_compile_one_specialization_whatever_array_they_are_given():
    """Lists, writable and read-only int32 or int64 arrays (a histogram's arrays are
    read-only) reach each compiled packer as one type, so it compiles once (seconds each),
    and the same rows."""
    from analysis.simulation.strategies import _packers

    lengths = np.array([4, 2, 3, 1, 4, 2], dtype=np.int64)
    frozen, frozen32 = lengths.copy(), lengths.astype(np.int32)
    frozen.flags.writeable = frozen32.flags.writeable = False
    given = (lengths.tolist(), lengths, frozen, frozen32)
    for pack, kernel in (
        (lambda x: pack_bfd(x, 5), _packers._bfd_rows),
        (lambda x: pack_first_fit(x, 5, np.arange(6)), _packers._first_fit_rows),
        (lambda x: pack_next_fit(x, 5), _packers._next_fit_rows),
    ):
        rows = [_rows(*pack(x)) for x in given]
        assert rows[1:] == rows[:-1]
        assert len(kernel.signatures) == 1, kernel.signatures
    assert lengths.flags.writeable  # the caller's array is left as it was
