"""Simulate epochs of a batching strategy and measure them: padding, steps, randomness.

:func:`simulate` builds real epochs with :mod:`analysis.simulation.strategies` and records every batch;
:func:`compare_strategies` runs several strategies on the same data and puts the simulated
metrics beside the exact expectation from :func:`analysis.padding.waste.expected_padding` where one
exists.

Every batch is measured by :mod:`analysis.simulation.metrics` (its docstring lists the metrics of
one epoch, the columns of ``SimulationResult.epochs``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from analysis._validate import check_rng, known_name, positive_int
from analysis.batching import BatchRule, as_rule, check_edges, round_up
from analysis.lengths import LengthHistogram, as_histogram
from analysis.padding.waste import EXACT_STRATEGIES, exact_padding
from analysis.simulation.metrics import EPOCH_METRICS, Progress, SimulationResult, simulate_epochs
from analysis.simulation.strategies import (
    ALL_STRATEGIES,
    PADDING_NOISE,
    STRATEGIES,
    EpochBuilder,
    epoch_builder,
    strategy_rule,
)
from analysis.timing.proportional import predict_from_reference

#: What the simulation reads: per-sample lengths, or a histogram of them.
Lengths = LengthHistogram | Sequence[int] | np.ndarray

__all__ = [
    "SimulationResult",
    "simulate",
    "compare_strategies",
    "EPOCH_METRICS",
    "SIMULATION_SAMPLE_LIMIT",
    "SIMULATION_SUBSAMPLE",
    "simulation_sample",
    "check_batch_tokens",
]

#: A histogram with more samples than this is not expanded: the simulation runs on a
#: uniform subsample (without replacement) of :data:`SIMULATION_SUBSAMPLE` samples, and says
#: so (``SimulationResult.population_samples``, ``efficiency_se``).
SIMULATION_SAMPLE_LIMIT = 10_000_000
#: The per-epoch counts of a table that a subsample's epoch scales to the data's epoch.
_SCALED = ("batches", "steps", "waste_tokens")
#: Samples simulated when a histogram is over :data:`SIMULATION_SAMPLE_LIMIT`.
SIMULATION_SUBSAMPLE = 1_000_000
_INT64_MAX = 2**63 - 1


def simulate(
    lengths: Lengths,
    strategy: str,
    rule: BatchRule | None = None,
    *,
    rng: np.random.Generator,
    epochs: int = 1,
    batch_size: int | None = None,
    max_tokens: int | None = None,
    pad_to_multiple_of: int | None = None,
    edges: Sequence[int] | None = None,
    world_size: int = 1,
    sync_buckets: bool = True,
    gradient_accumulation_steps: int = 1,
    progress: Progress | None = None,
    padding_noise: float = PADDING_NOISE,
) -> SimulationResult:
    """Run ``epochs`` epochs of ``strategy`` and measure every batch.

    Parameters
    ----------
    lengths : LengthHistogram or array of int
        Per-sample lengths, or a histogram (expanded: sample ``i`` is the ``i``-th shortest).
    strategy : str
        One of :data:`analysis.simulation.strategies.ALL_STRATEGIES`.
    rule : BatchRule, optional
        The batch rule (or ``batch_size=`` / ``max_tokens=`` and ``pad_to_multiple_of=``),
        used by each strategy as :mod:`analysis.simulation.strategies` says.
    rng : numpy.random.Generator
        The only source of randomness (same seed, same result).
    epochs : int, default 1
    edges, gradient_accumulation_steps, padding_noise
        Strategy options, as in :func:`analysis.simulation.strategies.epoch_builder`.
    world_size : int, default 1
        Data-parallel ranks: consecutive batches go to ranks round-robin.  ``bucketed`` epochs
        are the :class:`~analysis.sampler.BucketedBatchSampler`'s global epochs for this many
        ranks (every step complete; repeats counted in the batches): with
        ``rng=epoch_rng(seed, 0)`` and ``epochs=1`` the batches are the sampler's epoch 0.
    sync_buckets : bool, default True
        ``bucketed`` only: every step's batches from one bucket (the sampler's default);
        ``False`` interleaves batches freely, as a per-rank sampler does.  Compare the
        ``straggler_factor`` of both.
    progress : callable, optional
        Wraps the loop over epochs (e.g. ``tqdm``); the engine draws nothing itself.

    Returns
    -------
    SimulationResult

    Examples
    --------
    >>> import numpy as np
    >>> from analysis import simulate
    >>> res = simulate([1, 2, 3, 4, 5, 6], "sorted", rng=np.random.default_rng(0),
    ...                epochs=2, batch_size=2)
    >>> res.useful_tokens, res.padded_tokens      # batches {1,2} {3,4} {5,6}, twice
    (42, 48)
    >>> res.epochs[["efficiency", "steps", "composition_repeat"]]
           efficiency  steps  composition_repeat
    epoch
    1           0.875      3                 0.0
    2           0.875      3                 1.0
    """
    check_rng(rng)
    rule = as_rule(rule, batch_size=batch_size, max_tokens=max_tokens, pad_to_multiple_of=pad_to_multiple_of)
    epochs = positive_int(epochs, "epochs")
    world_size = positive_int(world_size, "world_size")
    data, population = _per_sample(lengths, rng)
    builder = epoch_builder(
        data,
        strategy,
        rule,
        edges=_cover(edges, lengths, data),
        gradient_accumulation_steps=gradient_accumulation_steps,
        world_size=world_size,
        sync_buckets=sync_buckets,
        padding_noise=padding_noise,
    )
    _check_int64(builder, world_size)
    return simulate_epochs(builder, rng, epochs, world_size, progress, population)


def simulation_sample(lengths: Lengths, rng: np.random.Generator) -> tuple[Lengths, int]:
    """What a simulation of ``lengths`` runs on, and how many samples that stands for:
    ``lengths`` itself, or for a histogram over :data:`SIMULATION_SAMPLE_LIMIT` samples the
    uniform subsample of :data:`SIMULATION_SUBSAMPLE` samples :func:`simulate` and
    :func:`compare_strategies` draw (with ``rng``, never expanding the histogram); for a
    per-sample face (a sampler shown in a notebook) that must not expand a huge histogram.

    Examples
    --------
    >>> import numpy as np
    >>> from analysis import LengthHistogram
    >>> huge = LengthHistogram([10, 20], [6 * 10**9, 4 * 10**9])
    >>> sample, population = simulation_sample(huge, np.random.default_rng(0))
    >>> sample.n_samples, population
    (1000000, 10000000000)
    """
    check_rng(rng)
    return _per_sample(lengths, rng)


def _per_sample(lengths: Lengths, rng: np.random.Generator) -> tuple[Lengths, int]:
    """The data a simulation expands, and how many samples they stand for: ``lengths``
    itself, or for a histogram over :data:`SIMULATION_SAMPLE_LIMIT` samples a uniform
    subsample (without replacement) of :data:`SIMULATION_SUBSAMPLE` samples, drawn with
    ``rng`` without expanding the histogram."""
    if not isinstance(lengths, LengthHistogram):
        return lengths, len(lengths)
    n = lengths.n_samples
    if n <= SIMULATION_SAMPLE_LIMIT:
        return lengths, n
    if n > _INT64_MAX:
        raise ValueError(
            f"the histogram holds {n:,} samples, more than 2**63 - 1 can index; "
            "use the exact model (expected_padding, sorted_padding)"
        )
    positions = rng.choice(n, size=SIMULATION_SUBSAMPLE, replace=False)
    picked = np.searchsorted(lengths.cumulative_counts(), positions, side="right")
    return LengthHistogram.from_lengths(lengths.lengths[picked]), n


def _cover(edges: Sequence[int] | None, full: Lengths, data: Lengths) -> Sequence[int] | None:
    """Edges checked against the full data, for a subsample (whose range may be narrower)."""
    if edges is None or data is full:
        return edges
    hist = as_histogram(full)
    return check_edges(edges, hist)


def check_batch_tokens(hist: LengthHistogram, rule: BatchRule, world_size: int = 1) -> None:
    """Refuse, in one line, a rule whose batches hold more tokens than an int64 counts
    (``2**63 - 1``, a step of ``world_size`` batches): the tokens of a full batch of the
    longest sample, padded (the budget of the token strategies, :meth:`BatchRule.token_budget`).
    No trainer runs such a batch, and the simulation's and sampler's totals would wrap.  The
    one check the CLI's ``optimize``, ``compare``, ``frontier`` and ``report`` run, so that each
    refuses such a rule with this same line.

    Examples
    --------
    >>> hist = LengthHistogram.from_lengths([3, 9, 12])
    >>> check_batch_tokens(hist, BatchRule(batch_size=2**58))
    >>> check_batch_tokens(hist, BatchRule(batch_size=2**62))
    Traceback (most recent call last):
    ...
    ValueError: batches of up to 55,340,232,221,128,654,848 tokens (batch_size
    4,611,686,018,427,387,904 x the longest, 12 tokens, x world_size 1) are more than an int64
    counts (2**63 - 1): lower the batch rule or world_size, or clip the lengths at max_len
    (--batch-size, --max-tokens, --pad-to-multiple-of, --world-size, --max-len)
    """
    longest = round_up(hist.max, rule.pad_to_multiple_of)
    budget = rule.token_budget(longest)
    if max(budget, longest) * world_size > _INT64_MAX:
        size = rule.batch_size
        what = f"batch_size {size:,} x the longest, {longest:,} tokens, " if size is not None else ""
        raise ValueError(
            f"batches of up to {max(budget, longest):,} tokens ({what}x world_size {world_size:,}) are "
            "more than an int64 counts (2**63 - 1): lower the batch rule or world_size, or clip the "
            "lengths at max_len (--batch-size, --max-tokens, --pad-to-multiple-of, --world-size, --max-len)"
        )


def _check_int64(builder: EpochBuilder, world_size: int) -> None:
    """Refuse a simulation whose per-batch or per-step int64 totals could wrap."""
    longest = round_up(builder.hist.max, builder.rule.pad_to_multiple_of)
    if builder.batch_sizes:
        size = min(max(builder.batch_sizes), builder.hist.n_samples)
        per_batch = size * longest
    else:
        per_batch = max(int(builder.max_tokens or 0), longest)
    if per_batch * world_size > _INT64_MAX:
        raise ValueError(
            f"a batch of up to {per_batch:,} tokens (x world_size {world_size}) "
            "overflows the simulation's int64 totals; clip the lengths "
            "(LengthHistogram.clip) or use the exact model (expected_padding, "
            "sorted_padding)"
        )


# compare_strategies takes simulate's keywords again, on purpose: each public signature spells
# out what it accepts (a deliberate twin of simulate's parameter list).
def compare_strategies(
    lengths: Lengths,
    rule: BatchRule | None = None,
    *,
    rng: np.random.Generator,
    edges: Sequence[int],
    epochs: int = 3,
    batch_size: int | None = None,
    max_tokens: int | None = None,
    pad_to_multiple_of: int | None = None,
    strategies: Sequence[str] | None = None,
    world_size: int = 1,
    reference_strategy: str | None = None,
    reference_tokens_per_s: float | None = None,
    sync_buckets: bool = True,
    progress: Progress | None = None,
) -> pd.DataFrame:
    """Simulate several strategies on the same data under one batch rule: a row per strategy.

    Each strategy reads the rule as :mod:`analysis.simulation.strategies` says (the token strategies get
    ``rule.token_budget(longest)``); the ``batch_rule`` column says what each row used.
    Columns: ``batch_rule``, the epoch metrics of :func:`simulate` averaged over epochs
    (``efficiency``, ``waste_tokens``, ``batches``, ``steps``, ``tokens_per_step_mean``,
    ``tokens_per_step_cv``, ``within_batch_cv``, ``lag1_autocorr``, ``composition_repeat``,
    and ``straggler_factor`` when ``world_size > 1``), and ``expected_efficiency``: the
    exact value where one exists (random, sorted, bucketed: :mod:`analysis.padding.waste`), NaN
    otherwise.  Strategies run in :data:`~analysis.simulation.strategies.STRATEGIES` order with one
    ``rng`` passed down; ``bucketed`` is built for ``world_size`` ranks with ``sync_buckets``
    (:class:`~analysis.sampler.BucketedBatchSampler`).  A histogram over
    :data:`SIMULATION_SAMPLE_LIMIT` samples is simulated through one uniform subsample of
    :data:`SIMULATION_SUBSAMPLE` samples (never expanded); the table then has
    ``simulated_samples`` and ``efficiency_se`` (the standard error of the simulated efficiency
    as an estimate of the full data's) columns, ``table.attrs["population_samples"]`` holds
    the full count, and ``batches``, ``steps`` and ``waste_tokens`` are the subsample's epoch
    scaled to the data's (times ``population_samples / simulated_samples``), so that every
    count in the table is of one epoch of the data.

    Given a calibration (``reference_strategy`` measured at ``reference_tokens_per_s``
    useful tokens/s on your hardware), a ``predicted_tokens_per_s`` column is added:
    :func:`~analysis.timing.proportional.predict_from_reference` with the reference's simulated
    efficiency (time proportional to padded tokens; an upper bound that ignores per-step
    overheads).

    Examples
    --------
    >>> import numpy as np
    >>> from analysis import compare_strategies
    >>> lengths = np.random.default_rng(0).integers(1, 100, size=400)
    >>> table = compare_strategies(lengths, rng=np.random.default_rng(1), edges=[0, 30, 60, 99],
    ...                            batch_size=4, strategies=["sorted", "random", "packing"])
    >>> table.index.tolist(), table.loc["packing", "batch_rule"]
    (['sorted', 'random', 'packing'], 'max_tokens 396')
    >>> bool(table.loc["sorted", "efficiency"] == table.loc["sorted", "expected_efficiency"])
    True
    """
    names = list(STRATEGIES if strategies is None else strategies)
    for name in names:
        known_name(name, ALL_STRATEGIES, "strategy")
    rule = as_rule(rule, batch_size=batch_size, max_tokens=max_tokens, pad_to_multiple_of=pad_to_multiple_of)
    epochs = positive_int(epochs, "epochs")
    world_size = positive_int(world_size, "world_size")
    hist = as_histogram(lengths)
    edges = check_edges(edges, hist)
    data, population = _per_sample(lengths, rng)
    per_sample = data.expand() if isinstance(data, LengthHistogram) else data
    if (reference_strategy is None) != (reference_tokens_per_s is None):
        raise ValueError("give both reference_strategy and reference_tokens_per_s, or neither")
    if reference_strategy is not None and reference_strategy not in names:
        raise ValueError(f"reference_strategy {reference_strategy!r} is not among the strategies compared")
    rows = []
    for name in names:
        builder = epoch_builder(
            per_sample, name, rule, edges=edges, world_size=world_size, sync_buckets=sync_buckets
        )
        _check_int64(builder, world_size)
        res = simulate_epochs(builder, rng, epochs, world_size, progress, population)
        used = strategy_rule(name, rule, builder.hist.max)
        row = res.summary().drop(["strategy", "epochs", "useful_tokens", "padded_tokens"])
        row = pd.concat([pd.Series({"batch_rule": used.text}, dtype=object), row])
        exact = exact_padding(hist, name, rule, edges) if name in EXACT_STRATEGIES else None
        row["expected_efficiency"] = float("nan") if exact is None else exact.efficiency
        if res.subsampled:  # counts of the subsample's epoch, scaled to the data's epoch
            row[list(_SCALED)] = [float(row[c]) * population / res.n_samples for c in _SCALED]
            row["simulated_samples"], row["efficiency_se"] = res.n_samples, res.efficiency_se
        rows.append(row.rename(name))
    table = pd.DataFrame(rows)
    for col in table.columns.drop("batch_rule"):
        table[col] = table[col].astype(float)
    table.index.name = "strategy"
    table.attrs["population_samples"] = population
    if reference_strategy is not None and reference_tokens_per_s is not None:
        table["predicted_tokens_per_s"] = predict_from_reference(
            table.index.tolist(),
            table["efficiency"].to_numpy(dtype=float),
            reference=reference_strategy,
            reference_tokens_per_s=reference_tokens_per_s,
        )
    return table
