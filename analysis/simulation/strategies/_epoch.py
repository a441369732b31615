"""What every strategy shares: the flat :class:`Epoch`, the per-dataset inputs a strategy
prepares from, the protocol of a prepared strategy's state, and small offset helpers."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from analysis.batching import BatchRule
from analysis.lengths import LengthHistogram
from analysis.simulation.bucketed import small_keys


@dataclass(frozen=True, eq=False)
class Epoch:
    """One epoch of batches, stored flat.

    Parameters
    ----------
    indices : numpy.ndarray
        Sample indices (``int64``) of all batches, concatenated in consumption order; every
        sample appears exactly once.
    offsets : numpy.ndarray
        ``int64``, ``n_batches + 1`` values: batch ``b`` is ``indices[offsets[b]:offsets[b+1]]``.
    buckets : numpy.ndarray
        ``int64`` bucket of each batch (``bucketed`` only; ``-1`` for the other strategies).
    strategy : str
        The strategy that built it.

    Examples
    --------
    >>> import numpy as np
    >>> from analysis.simulation.strategies import build_epoch
    >>> ep = build_epoch([5, 1, 4, 2, 3], "sorted", rng=np.random.default_rng(0), batch_size=2)
    >>> sorted(b.tolist() for b in ep.batches())
    [[0], [1, 3], [4, 2]]
    >>> len(ep), ep.sizes.tolist() in ([2, 2, 1], [2, 1, 2], [1, 2, 2])
    (3, True)
    """

    indices: np.ndarray
    offsets: np.ndarray
    buckets: np.ndarray
    strategy: str

    def __len__(self) -> int:
        return int(self.offsets.size - 1)

    def __iter__(self) -> Iterator[np.ndarray]:
        return iter(self.batches())

    @property
    def sizes(self) -> np.ndarray:
        """Samples in each batch (``int64``)."""
        return np.diff(self.offsets)

    def batches(self) -> list[np.ndarray]:
        """The epoch as a list of ``int64`` index arrays, in consumption order."""
        return np.split(self.indices, self.offsets[1:-1])


@dataclass(frozen=True, eq=False)
class Setup:
    """A strategy's inputs for one dataset (the public fields of
    :class:`~analysis.simulation.strategies.EpochBuilder`, documented there)."""

    strategy: str
    lengths: np.ndarray
    hist: LengthHistogram
    rule: BatchRule
    edges: tuple[int, ...] | None
    batch_sizes: tuple[int, ...]
    max_tokens: int | None
    gradient_accumulation_steps: int
    world_size: int
    sync_buckets: bool
    padding_noise: float


class StrategyState(Protocol):
    """A strategy prepared for one dataset: what it keeps between epochs, and how it draws one."""

    def epoch(self, rng: np.random.Generator) -> Epoch:
        """One epoch, with ``rng`` the only source of randomness."""
        ...


def even_offsets(n: int, size: int) -> np.ndarray:
    """Offsets cutting ``n`` samples into batches of ``size`` (last one shorter)."""
    return np.append(np.arange(0, n, size, dtype=np.int64), np.int64(n))


def stable_order(keys: np.ndarray) -> np.ndarray:
    """Stable ascending argsort of non-negative integer ``keys`` as ``int64``."""
    return np.argsort(small_keys(keys), kind="stable").astype(np.int64, copy=False)


def no_buckets(n_batches: int) -> np.ndarray:
    return np.full(n_batches, -1, dtype=np.int64)
