"""Measure simulated epochs: every batch, the metrics of each epoch, and the
:class:`SimulationResult` that holds them (:func:`simulate_epochs`, which
:func:`analysis.simulation.epochs.simulate` and :func:`~analysis.simulation.epochs.compare_strategies` run).

Metrics of one epoch (columns of ``SimulationResult.epochs``):

- ``efficiency``: useful tokens / padded tokens; ``useful_tokens``, ``padded_tokens``,
  ``waste_tokens`` (exact ints).  A batch's padded tokens are ``size * longest`` with the
  longest rounded up to ``pad_to_multiple_of``; a ``packing*`` row costs ``max_tokens``.
- ``batches``; ``steps``: optimizer steps, ``ceil(batches / world_size)``.  Consecutive
  batches go to ranks ``0, 1, ..., world_size - 1`` round-robin; one step is one batch per rank.
- ``tokens_per_step_mean`` / ``tokens_per_step_cv``: useful tokens per optimizer step (all
  ranks), their mean and coefficient of variation (population std / mean).  A large CV means
  the loss is averaged over very different token counts from step to step.
- ``within_batch_cv``: the mean over batches of the coefficient of variation of the lengths
  inside a batch (population std / mean; 0 for a one-sample batch).  Low = batches of
  look-alike samples.
- ``mixing``, ``mixing_se``: the share of the data's length variance a batch sees
  (:mod:`analysis.padding.mixing`).
- ``lag1_autocorr``: Pearson correlation between successive optimizer steps' mean lengths
  (one batch per step with one rank; all ranks' batches of the step with several), in order
  (NaN when undefined).  Near 0 = the order of steps carries no length pattern.
- ``composition_repeat``: share of this epoch's batches whose exact set of samples already
  formed a batch in an earlier epoch (0 for the first epoch; 1 for ``sorted`` afterwards,
  ~0 for ``random``).  Batches are compared by a 64-bit set hash (the wrapping sum of a
  SplitMix64 mix of each index), so the chance of a false match is ~1e-10 per epoch pair.
- ``straggler_factor`` (only when ``world_size > 1``): the mean over steps of the slowest
  rank's padded tokens over the mean of the ranks' padded tokens (ranks that got a batch in
  that step).  1 = balanced; the step waits for its slowest rank.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from analysis.batching import round_up
from analysis.padding.mixing import batch_mixing, length_variance
from analysis.simulation.strategies import PACKED_STRATEGIES, Epoch, EpochBuilder

#: A progress wrapper a face may pass: takes an iterable (and a description), yields its items.
Progress = Callable[..., Iterable[Any]]

__all__ = ["EPOCH_METRICS", "Progress", "SimulationResult", "simulate_epochs"]


# -- statistics of simulated batches (per-batch sums in, one number out) --


def share_seen(queries: np.ndarray, seen: np.ndarray) -> float:
    """Share of the sorted ``queries`` present in the sorted array ``seen``."""
    if seen.size == 0:
        return 0.0
    at = np.minimum(np.searchsorted(seen, queries), seen.size - 1)
    return float(np.mean(seen[at] == queries))


def coefficient_of_variation(x: np.ndarray) -> float:
    """Population coefficient of variation (NaN when the mean is 0)."""
    mean = float(x.mean())
    return float(x.std()) / mean if mean else float("nan")


def int64_squares(size: np.ndarray, longest: int) -> bool:
    """Whether ``size * sum(L**2)`` of every batch fits ``int64`` (``longest``: the longest
    length, or a bound on it)."""
    return int(size.max()) ** 2 * longest * longest < 2**62


def within_cv(square_sums: np.ndarray, size: np.ndarray, useful: np.ndarray) -> float:
    """Mean over batches of std/mean of the lengths in the batch (population std), from the
    batches' exact ``int64`` sums of squares and sums:
    ``std / mean = sqrt(size * sum(L**2) - sum(L)**2) / sum(L)``."""
    spread = (size * square_sums - useful * useful).astype(float)
    return float(np.mean(np.sqrt(spread) / useful))


def within_batch_cv(
    lengths: np.ndarray, starts: np.ndarray, size: np.ndarray, useful: np.ndarray, longest: np.ndarray
) -> float:
    """:func:`within_cv` from the samples' ``lengths`` (the batches starting at ``starts``);
    ``useful`` and ``longest`` are the batches' sums and maxima.  Exact in ``int64`` when it
    cannot overflow, else in floats."""
    if int64_squares(size, int(longest.max())):
        return within_cv(np.add.reduceat(lengths * lengths, starts), size, useful)
    lf = lengths.astype(float)  # batches of more than ~10^4 samples of ~10^5 tokens
    sq = np.add.reduceat(lf * lf, starts)
    spread = np.maximum(size * sq - useful.astype(float) ** 2, 0.0)
    return float(np.mean(np.sqrt(spread) / useful))


def lag1_autocorr(x: np.ndarray) -> float:
    """Pearson correlation of ``x[:-1]`` and ``x[1:]`` (NaN when undefined)."""
    if x.size < 3:
        return float("nan")
    a, b = x[:-1] - x[:-1].mean(), x[1:] - x[1:].mean()
    # elementwise sums, not BLAS dot products: on shared cores a multi-threaded dot of a
    # 100k-vector costs more than it saves
    den = math.sqrt(float(np.sum(a * a)) * float(np.sum(b * b)))
    return float(np.sum(a * b)) / den if den > 0 else float("nan")


#: Columns of ``SimulationResult.epochs`` that are averaged over epochs in summaries.
EPOCH_METRICS = (
    "efficiency",
    "waste_tokens",
    "batches",
    "steps",
    "tokens_per_step_mean",
    "tokens_per_step_cv",
    "within_batch_cv",
    "mixing",
    "lag1_autocorr",
    "composition_repeat",
    "straggler_factor",
)


@dataclass(frozen=True, eq=False)
class SimulationResult:
    """Every batch of a simulation, and the metrics of each epoch.

    Attributes
    ----------
    strategy : str
    batches : pandas.DataFrame
        One row per batch, in consumption order: ``epoch, step, rank, bucket, size,
        longest, useful, padded`` (all ``int64``; ``bucket`` is -1 unless ``bucketed``) and
        ``square_sum`` (sum of squared lengths, a packed row's attention; float64 if huge).
    epochs : pandas.DataFrame
        One row per epoch (index ``epoch``, from 1): the metrics described in
        :mod:`analysis.simulation.epochs` (``straggler_factor`` only when ``world_size > 1``).
    world_size, pad_to_multiple_of : int
    batch_sizes : tuple of int
        Samples per batch used (one per bucket for ``bucketed``; empty for
        ``token_budget`` and ``packing``).
    n_samples, population_samples : int
        Samples simulated, and samples of the data they stand for: equal, unless the data
        were a histogram over :data:`~analysis.simulation.epochs.SIMULATION_SAMPLE_LIMIT` samples,
        simulated through a uniform subsample (see :attr:`subsampled`, :attr:`efficiency_se`).
    """

    strategy: str
    batches: pd.DataFrame
    epochs: pd.DataFrame
    world_size: int
    pad_to_multiple_of: int
    batch_sizes: tuple[int, ...]
    n_samples: int = 0
    population_samples: int = 0

    @property
    def subsampled(self) -> bool:
        """Whether a uniform subsample of the data was simulated (not every sample)."""
        return self.population_samples > self.n_samples

    @property
    def efficiency_se(self) -> float:
        """Standard error of :attr:`efficiency` as an estimate of the full data's, from the
        subsample: the ratio estimator's over batches (``sqrt(sum (u - e p)**2) / sum p``),
        times the finite-population factor; 0.0 when every sample was simulated."""
        if not self.subsampled:
            return 0.0
        u = self.batches["useful"].to_numpy(dtype=float)
        p = self.batches["padded"].to_numpy(dtype=float)
        e = self.efficiency
        fpc = 1.0 - self.n_samples / self.population_samples
        return float(math.sqrt(float(np.sum((u - e * p) ** 2)) * fpc) / float(p.sum()))

    @property
    def mixing_se(self) -> float:
        """Standard error of the mean of the epochs' ``mixing``: over epochs, ``std / sqrt(n)``
        (0.0 where the epochs agree, as a strategy whose batches are the same sets every
        epoch: the packers), or with one epoch the batch-level one of that epoch
        (:func:`analysis.padding.mixing.batch_mixing`); for a subsample, the batch-level
        one pooled over epochs, times the finite-population factor, is added in quadrature.

        Examples
        --------
        >>> import numpy as np
        >>> from analysis.simulation.strategies import epoch_builder
        >>> builder = epoch_builder([1, 2, 9, 10], "sorted", batch_size=2)
        >>> simulate_epochs(builder, np.random.default_rng(0), 3, 1, None).mixing_se
        0.0
        """
        mixing = self.epochs["mixing"].to_numpy(dtype=float)
        within = self.epochs["mixing_se"].to_numpy(dtype=float)
        if mixing.size == 1:
            return float(within[0])
        spread = float(np.std(mixing, ddof=1))
        se = spread / math.sqrt(mixing.size) if spread > 1e-12 * max(1.0, abs(float(mixing.mean()))) else 0.0
        if self.subsampled:
            fpc = 1.0 - self.n_samples / self.population_samples
            se = math.sqrt(se**2 + float(np.mean(within**2)) / mixing.size * fpc)
        return se

    @property
    def n_epochs(self) -> int:
        """Number of simulated epochs."""
        return len(self.epochs)

    @property
    def useful_tokens(self) -> int:
        """Useful tokens over all epochs (exact ``int``)."""
        return sum(self.epochs["useful_tokens"].tolist())

    @property
    def padded_tokens(self) -> int:
        """Padded tokens over all epochs (exact ``int``)."""
        return sum(self.epochs["padded_tokens"].tolist())

    @property
    def waste_tokens(self) -> int:
        """Padding over all epochs (exact ``int``)."""
        return self.padded_tokens - self.useful_tokens

    @property
    def efficiency(self) -> float:
        """Useful over padded tokens, all epochs pooled."""
        return self.useful_tokens / self.padded_tokens

    def summary(self) -> pd.Series:
        """Means over epochs of the epoch metrics, plus the exact pooled totals.

        ``composition_repeat`` is averaged over the epochs after the first (the first has
        nothing to repeat); NaN for a one-epoch simulation.
        """
        cols = [c for c in EPOCH_METRICS if c in self.epochs.columns]
        out: dict[str, Any] = {"strategy": self.strategy, "epochs": self.n_epochs}
        out.update({c: float(self.epochs[c].mean()) for c in cols})
        later = self.epochs["composition_repeat"].iloc[1:]
        out["composition_repeat"] = float(later.mean()) if later.size else float("nan")
        out.update(useful_tokens=self.useful_tokens, padded_tokens=self.padded_tokens)
        return pd.Series(out, dtype=object, name=self.strategy)

    def to_frame(self) -> pd.DataFrame:
        """The per-epoch table (a copy of :attr:`epochs`)."""
        return self.epochs.copy()

    def by_bucket(self) -> pd.DataFrame:
        """Per bucket, means per epoch: ``batches``, ``useful_tokens``, ``padded_tokens``, and
        the pooled ``efficiency`` (useful / padded over all epochs).  For ``bucketed``; other
        strategies have one row, bucket -1.

        Examples
        --------
        >>> import numpy as np
        >>> from analysis.simulation.strategies import epoch_builder
        >>> builder = epoch_builder([1, 2, 9, 10], "bucketed", batch_size=2, edges=[0, 5, 10])
        >>> res = simulate_epochs(builder, np.random.default_rng(0), 1, 1, None)
        >>> res.by_bucket()
                batches  useful_tokens  padded_tokens  efficiency
        bucket
        0           1.0            3.0            4.0        0.75
        1           1.0           19.0           20.0        0.95
        """
        groups = self.batches.groupby("bucket")
        useful, padded = groups["useful"].sum(), groups["padded"].sum()
        frame = pd.DataFrame(
            {
                "batches": groups.size() / self.n_epochs,
                "useful_tokens": useful / self.n_epochs,
                "padded_tokens": padded / self.n_epochs,
                "efficiency": useful / padded,
            }
        )
        return frame


def simulate_epochs(
    builder: EpochBuilder,
    rng: np.random.Generator,
    epochs: int,
    world_size: int,
    progress: Progress | None,
    population: int | None = None,
) -> SimulationResult:
    """Draw ``epochs`` epochs of ``builder`` with ``rng`` and measure them (batches dealt to
    ``world_size`` ranks round-robin); ``population``: the samples the data stand for (default:
    the builder's).  The caller has checked that the totals fit ``int64``.

    Examples
    --------
    >>> import numpy as np
    >>> from analysis.simulation.strategies import epoch_builder
    >>> builder = epoch_builder([1, 2, 3, 4], "sorted", batch_size=2)
    >>> res = simulate_epochs(builder, np.random.default_rng(0), 2, 1, None)
    >>> res.padded_tokens, res.epochs["composition_repeat"].tolist()  # 2 + 2 + 4 + 4, twice
    (24, [0.0, 1.0])
    """
    n = builder.lengths.size
    # a random gather of 900k lengths from an int64 table misses the cache ~2x as often as
    # from a uint16 copy: the batches' lengths are read from the narrowest copy
    narrow = _narrowest(builder.lengths)
    seen = np.empty(0, dtype=np.uint64)  # sorted hashes of the earlier epochs' batches
    frames, rows = [], []
    numbers: Iterable[int] = range(1, epochs + 1)
    if progress is not None:
        numbers = progress(numbers, f"simulating {builder.strategy}")
    for e in numbers:
        batch_frame, row, hashes = _measure_epoch(
            builder, builder.epoch(rng), e, world_size, builder.rule.pad_to_multiple_of, narrow
        )
        if e > 1 or e < epochs:
            hashes = np.sort(hashes)
        if e > 1:
            row["composition_repeat"] = share_seen(hashes, seen)
        if e < epochs:  # the last epoch's hashes are never looked up
            seen = np.sort(np.concatenate([seen, hashes]), kind="stable")  # merges two sorted runs
        frames.append(batch_frame)
        rows.append(row)
    batches = pd.concat(frames, ignore_index=True)
    table = pd.DataFrame(rows).set_index("epoch")
    return SimulationResult(
        builder.strategy,
        batches,
        table,
        world_size,
        builder.rule.pad_to_multiple_of,
        builder.batch_sizes,
        int(n),
        int(n if population is None else population),
    )


def _narrowest(lengths: np.ndarray) -> np.ndarray:
    """Positive ``int64`` lengths in the narrowest of ``uint16``, ``uint32``, ``int64``."""
    top = int(lengths.max())
    for dtype in (np.uint16, np.uint32):
        if top <= np.iinfo(dtype).max:
            return lengths.astype(dtype)
    return lengths


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser, elementwise on ``uint64`` (wrapping arithmetic), as a new array."""
    out = np.array(x, dtype=np.uint64)
    tmp = np.empty(min(out.size, _BLOCK), dtype=np.uint64)
    for start in range(0, out.size, _BLOCK):
        _mix_in_place(out[start : start + _BLOCK], tmp)
    return out


def _mix_in_place(z: np.ndarray, tmp: np.ndarray) -> None:
    """:func:`_splitmix64` of the ``uint64`` array ``z`` in place (``tmp``: scratch, as long)."""
    t = tmp[: z.size]
    z += np.uint64(0x9E3779B97F4A7C15)
    np.right_shift(z, np.uint64(30), out=t)
    z ^= t
    z *= np.uint64(0xBF58476D1CE4E5B9)
    np.right_shift(z, np.uint64(27), out=t)
    z ^= t
    z *= np.uint64(0x94D049BB133111EB)
    np.right_shift(z, np.uint64(31), out=t)
    z ^= t


#: Samples per block of the per-batch sums: ten passes over a block that stays in the cache
#: cost about half of ten passes over a 900k-sample epoch.
_BLOCK = 1 << 14


def _batch_sums(
    narrow: np.ndarray, indices: np.ndarray, offsets: np.ndarray, squares: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray]:
    """Per batch of an epoch (``indices`` cut at ``offsets``; ``narrow``: the samples' lengths):
    the longest length, the sum of the lengths and, when ``squares``, the sum of their squares
    (``int64``, exact: the caller checked they fit), and the wrapping sum of the
    :func:`_splitmix64`-mixed indices (``uint64``).  Block by block of whole batches, so every
    pass reads data still in the cache."""
    m = offsets.size - 1
    longest, useful = np.empty(m, dtype=np.int64), np.empty(m, dtype=np.int64)
    square_sums = np.empty(m, dtype=np.int64) if squares else None
    mixed = np.empty(m, dtype=np.uint64)
    # blocks start at the batches holding samples 0, _BLOCK, 2 * _BLOCK, ...
    marks = np.arange(0, int(offsets[-1]), _BLOCK, dtype=np.int64)
    cuts = [*np.unique(np.searchsorted(offsets, marks, side="right") - 1).tolist(), m]
    tmp = np.empty(_BLOCK, dtype=np.uint64)
    for b0, b1 in zip(cuts[:-1], cuts[1:]):
        a, z = int(offsets[b0]), int(offsets[b1])
        local = offsets[b0:b1] - a
        block = indices[a:z]
        lengths = narrow[block].astype(np.int64)
        longest[b0:b1] = np.maximum.reduceat(lengths, local)
        useful[b0:b1] = np.add.reduceat(lengths, local)
        if square_sums is not None:
            np.multiply(lengths, lengths, out=lengths)
            square_sums[b0:b1] = np.add.reduceat(lengths, local)
        mix = block.astype(np.uint64)
        if mix.size > tmp.size:
            tmp = np.empty(mix.size, dtype=np.uint64)
        _mix_in_place(mix, tmp)
        mixed[b0:b1] = np.add.reduceat(mix, local)
    return longest, useful, square_sums, mixed


def _exact_sum(x: np.ndarray) -> int:
    """Exact sum of non-negative ``int64`` values as a Python int (NumPy's when it cannot wrap)."""
    if x.size == 0:
        return 0
    if int(x.max()) * x.size < 2**63:
        return int(x.sum())
    return sum(x.tolist())  # pragma: no cover - epochs of more than ~2**63 tokens


def _measure_epoch(
    builder: EpochBuilder,
    epoch: Epoch,
    number: int,
    world_size: int,
    multiple: int,
    narrow: np.ndarray,
) -> tuple[pd.DataFrame, dict[str, Any], np.ndarray]:
    """Per-batch table, per-epoch metrics and batch hashes (in batch order) of one epoch;
    ``composition_repeat`` is left at 0.0 for the caller, which knows the earlier epochs.
    ``narrow`` is ``builder.lengths`` in a narrow dtype (:func:`_narrowest`)."""
    starts = epoch.offsets[:-1]
    size = np.diff(epoch.offsets)
    exact_squares = int64_squares(size, builder.hist.max)
    longest, useful, square_sums, mixed = _batch_sums(narrow, epoch.indices, epoch.offsets, exact_squares)
    if builder.strategy in PACKED_STRATEGIES:
        padded = np.full(size.size, builder.max_tokens, dtype=np.int64)
    else:
        padded = size * round_up(longest, multiple)
    n_batches = size.size
    position = np.arange(n_batches, dtype=np.int64)
    step, rank = position // world_size, position % world_size
    frame = pd.DataFrame(
        {
            "epoch": np.full(n_batches, number, dtype=np.int64),
            "step": step,
            "rank": rank,
            "bucket": epoch.buckets.astype(np.int64),
            "size": size,
            "longest": longest,
            "useful": useful,
            "padded": padded,
            "square_sum": (
                square_sums
                if square_sums is not None
                else np.add.reduceat(narrow[epoch.indices].astype(float) ** 2, starts)
            ),
        }
    )

    useful_total = _exact_sum(useful)
    padded_total = _exact_sum(padded)
    step_starts = np.arange(0, n_batches, world_size, dtype=np.int64)
    if world_size == 1:  # a step is a batch
        per_step, step_size = useful.astype(float), size
    else:
        per_step = np.add.reduceat(useful, step_starts).astype(float)
        step_size = np.add.reduceat(size, step_starts)
    # a batch's hash: the wrapping sum of its samples' mixed indices, mixed with its size
    hashes = mixed ^ _splitmix64(size)
    if square_sums is None:  # pragma: no cover - batches of more than ~10^4 samples of ~10^5 tokens
        within = within_batch_cv(narrow[epoch.indices].astype(np.int64), starts, size, useful, longest)
        mixing = (math.nan, math.nan)
    else:
        within = within_cv(square_sums, size, useful)
        mixing = batch_mixing(square_sums, size, useful, length_variance(builder.hist))
    row: dict[str, Any] = {
        "epoch": number,
        "efficiency": useful_total / padded_total,
        "useful_tokens": useful_total,
        "padded_tokens": padded_total,
        "waste_tokens": padded_total - useful_total,
        "batches": n_batches,
        "steps": int(step_starts.size),
        "tokens_per_step_mean": float(per_step.mean()),
        "tokens_per_step_cv": coefficient_of_variation(per_step),
        "within_batch_cv": within,
        # per optimizer step (all ranks' batches together), in order: with one rank, per batch
        "lag1_autocorr": lag1_autocorr(per_step / step_size),
        "composition_repeat": 0.0,
    }
    row["mixing"], row["mixing_se"] = mixing
    if world_size > 1:
        slowest = np.maximum.reduceat(padded, step_starts).astype(float)
        ranks = np.diff(np.append(step_starts, n_batches)).astype(float)
        mean = np.add.reduceat(padded, step_starts) / ranks
        row["straggler_factor"] = float(np.mean(slowest / mean))
    return frame, row, hashes
