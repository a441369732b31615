"""Train with the plan: a deterministic, resumable, data-parallel bucketed batch sampler.

:class:`BucketedBatchSampler` yields one rank's batches (lists of sample indices) for
``torch.utils.data.DataLoader(dataset, batch_sampler=sampler)``.  It is the case's bucketed
shuffle: shuffle inside each bucket of ``edges``, cut batches of the bucket's batch size,
interleave the buckets' batches in a random order.  The same code builds the simulator's
``bucketed`` epochs (:mod:`analysis.strategies`), so the simulated batches, the expected
padding of :func:`analysis.waste.expected_padding` and the training run agree by construction.

The epochs are those of :mod:`analysis.bucketed` (the pure core): epoch ``e`` of a sampler with
``seed`` is :func:`~analysis.bucketed.draw_epoch` with the generator
:func:`~analysis.bucketed.epoch_rng` ``(seed, e)``; nothing else is random, so every rank builds
the same global epoch and takes its own share, without communicating.  How the global epoch is
shared between ``world_size`` ranks, and what ``sync_buckets`` and ``drop_last`` do, is
described there ("Data parallelism").

With ``drop_last=False`` every sample is in some batch of every epoch (on some rank) and
``n_repeated`` sample slots are repeats; with ``drop_last=True`` nothing repeats and
``n_dropped`` samples are left out.  With ``world_size=1`` both settings of ``sync_buckets`` are
the plain bucketed shuffle, and with ``drop_last=False`` nothing repeats.

Resume contract
---------------
``state_dict(consumed)`` takes the number of this epoch's batches the training loop has
*consumed* (its step counter inside the epoch); the sampler cannot know it.  A DataLoader with
worker processes draws ``num_workers * prefetch_factor`` batches of indices from the sampler as
soon as the epoch's iterator is created and keeps that many in flight, so the batches the
sampler has *yielded* (``sampler.yielded``) run ahead of training by an amount that depends on
the loader's settings and timing; saving it would skip the prefetched batches on resume.  With
the consumed count, a sampler built with the same arguments (same lengths, edges, batch rule,
seed, world size) and given ``load_state_dict(state)`` yields exactly the batches the
uninterrupted run would have consumed next, on every rank.  The state is the same on every rank
(ranks consume in lockstep), so rank 0 can save it.  After the resumed epoch, iteration starts
from the first batch again; ``set_epoch`` to another epoch also clears the resume point.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from typing import Protocol, cast

import numpy as np

from analysis._validate import as_length_array, positive_int
from analysis.batching import BatchRule, as_rule, bucket_index, check_edges
from analysis.bucketed import BucketedEpoch, bucket_layout, bucketed_epoch, draw_epoch, epoch_rng
from analysis.lengths import LengthHistogram

__all__ = ["BucketedBatchSampler", "BucketedEpoch", "bucketed_epoch", "epoch_rng"]

_STATE_FORMAT = "analysis.BucketedBatchSampler/1"


class PlanLike(Protocol):
    """What the sampler reads of a plan (:class:`analysis.BucketPlan`): edges and batch sizes."""

    @property
    def edges(self) -> Sequence[int]: ...

    @property
    def batch_sizes(self) -> Sequence[int]: ...


#: What :meth:`BucketedBatchSampler.state_dict` returns (JSON-serialisable).
SamplerState = dict[str, int | str | bool]


def _plan_parts(
    edges_or_plan: Sequence[int] | np.ndarray | PlanLike,
) -> tuple[Sequence[int] | np.ndarray, list[int] | None]:
    """``(edges, batch_sizes or None)`` of a BucketPlan-like object or a plain edge list."""
    if hasattr(edges_or_plan, "edges") and hasattr(edges_or_plan, "batch_sizes"):
        plan = cast(PlanLike, edges_or_plan)
        return plan.edges, [int(s) for s in plan.batch_sizes]
    return edges_or_plan, None


class BucketedBatchSampler:
    """One rank's bucketed batches: ``DataLoader(dataset, batch_sampler=sampler)``.

    Parameters
    ----------
    lengths : array of int
        Per-sample lengths in dataset order (what ``measure_lengths(..., out=)`` writes);
        ``edges`` must cover them.
    edges_or_plan : sequence of int or BucketPlan
        Bucket edges (``e_i < L <= e_{i+1}``), or a plan whose ``edges`` and ``batch_sizes``
        are used.
    batch_size, max_tokens : int, optional
        The batch rule (:meth:`analysis.BatchRule.batch_sizes`), as ``rule=`` or these
        keywords; required with bare edges,
        and overriding a plan's ``batch_sizes`` when given.
    seed : int, default 0
        Epoch ``e`` is built from :func:`epoch_rng` ``(seed, e)``: the same on every rank.
    rank, world_size : int
        This process's rank and the number of data-parallel ranks.
    sync_buckets : bool, default True
        All ranks draw from the same bucket at every step (see :mod:`analysis.bucketed`).
    drop_last : bool, default False
        Complete the last steps with repeats (False) or drop what doesn't fill them (True).

    Attributes
    ----------
    edges, batch_sizes : list of int
    epoch : int
        Set by :meth:`set_epoch` (default 0).
    n_repeated, n_dropped : int
        In the current epoch, over all ranks: sample slots that repeat a sample, samples left
        out (documented in :mod:`analysis.sampler`).
    yielded : int
        Batches the current iterator has yielded (ahead of consumption under prefetch).

    Examples
    --------
    >>> lengths = [5, 1, 7, 2, 8, 3, 4]
    >>> s = BucketedBatchSampler(lengths, [0, 4, 8], batch_size=3, world_size=2, rank=1)
    >>> len(s), s.n_repeated     # bucket (4, 8] has 1 batch: a repeated batch fills its step
    (2, 3)
    >>> batches = list(s)
    >>> state = s.state_dict(consumed=1)
    >>> t = BucketedBatchSampler(lengths, [0, 4, 8], batch_size=3, world_size=2, rank=1)
    >>> t.load_state_dict(state)
    >>> list(t) == batches[1:]
    True
    """

    def __init__(
        self,
        lengths: Sequence[int] | np.ndarray,
        edges_or_plan: Sequence[int] | np.ndarray | PlanLike,
        rule: BatchRule | None = None,
        *,
        batch_size: int | None = None,
        max_tokens: int | None = None,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
        sync_buckets: bool = True,
        drop_last: bool = False,
    ) -> None:
        arr = as_length_array(lengths, allow_zero=False, source="lengths")
        if arr.size == 0:
            raise ValueError("lengths is empty: no samples")
        edges, plan_sizes = _plan_parts(edges_or_plan)
        self.edges = check_edges(edges, LengthHistogram.from_lengths(arr))
        if plan_sizes is not None and rule is None and batch_size is None and max_tokens is None:
            if len(plan_sizes) != len(self.edges) - 1:
                raise ValueError(f"plan has {len(self.edges) - 1} buckets but {len(plan_sizes)} batch sizes")
            self.batch_sizes = plan_sizes
        else:
            rule = as_rule(rule, batch_size=batch_size, max_tokens=max_tokens)
            self.batch_sizes = rule.batch_sizes(self.edges)
        self.world_size = positive_int(world_size, "world_size")
        if not isinstance(rank, int | np.integer) or not 0 <= rank < self.world_size:
            raise ValueError(f"rank must be in [0, {self.world_size}), got {rank!r}")
        if not isinstance(seed, int | np.integer) or seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
        self.rank, self.seed = int(rank), int(seed)
        self.sync_buckets, self.drop_last = bool(sync_buckets), bool(drop_last)
        self._layout = bucket_layout(
            bucket_index(arr, self.edges),
            self.batch_sizes,
            self.world_size,
            self.sync_buckets,
            self.drop_last,
        )
        digest = hashlib.sha256(np.ascontiguousarray(arr, dtype=np.int64).tobytes())
        digest.update(json.dumps([self.edges, self.batch_sizes]).encode())
        self._fingerprint = digest.hexdigest()[:16]
        self.epoch = 0
        self.yielded = 0
        self._resume_at = 0
        self._cache: tuple[int, BucketedEpoch] | None = None

    def __len__(self) -> int:
        """Batches per rank per epoch: the same on every rank and in every epoch."""
        return self._layout.n_steps

    def set_epoch(self, epoch: int) -> None:
        """Use epoch ``epoch``'s shuffle next (as ``DistributedSampler.set_epoch``).

        Another epoch than the one a loaded state points into clears the resume point.
        """
        if not isinstance(epoch, int | np.integer) or epoch < 0:
            raise ValueError(f"epoch must be a non-negative integer, got {epoch!r}")
        if int(epoch) != self.epoch:
            self._resume_at = 0
        self.epoch = int(epoch)

    def global_epoch(self, epoch: int | None = None) -> BucketedEpoch:
        """Every rank's batches of ``epoch`` (default: the current one)."""
        e = self.epoch if epoch is None else int(epoch)
        if self._cache is None or self._cache[0] != e:
            self._cache = (e, draw_epoch(self._layout, epoch_rng(self.seed, e)))
        return self._cache[1]

    @property
    def n_repeated(self) -> int:
        return self.global_epoch().n_repeated

    @property
    def n_dropped(self) -> int:
        return self.global_epoch().n_dropped

    def __iter__(self) -> Iterator[list[int]]:
        ep = self.global_epoch()
        start, self._resume_at = self._resume_at, 0
        self.yielded = start
        w, offsets, indices = self.world_size, ep.offsets, ep.indices
        for step in range(start, ep.n_steps):
            b = step * w + self.rank
            self.yielded = step + 1
            yield indices[offsets[b] : offsets[b + 1]].tolist()

    def state_dict(self, consumed: int) -> SamplerState:
        """Where to resume: ``consumed`` = batches of the current epoch the loop has used.

        JSON-serialisable and the same on every rank.  See "Resume contract" in
        :mod:`analysis.sampler` for why the count comes from the training loop.
        """
        if not isinstance(consumed, int | np.integer) or not 0 <= consumed <= len(self):
            raise ValueError(f"consumed must be an integer in [0, {len(self)}], got {consumed!r}")
        return {
            "format": _STATE_FORMAT,
            "seed": self.seed,
            "epoch": self.epoch,
            "consumed": int(consumed),
            "world_size": self.world_size,
            "sync_buckets": self.sync_buckets,
            "drop_last": self.drop_last,
            "fingerprint": self._fingerprint,
        }

    def load_state_dict(self, state: SamplerState) -> None:
        """Resume: the next iteration yields the batches after the ``consumed`` ones."""
        if state.get("format") != _STATE_FORMAT:
            raise ValueError(f"not a BucketedBatchSampler state: format {state.get('format')!r}")
        mine = self.state_dict(0)
        for key in ("world_size", "sync_buckets", "drop_last", "fingerprint"):
            if state[key] != mine[key]:
                raise ValueError(
                    f"state was saved with {key} = {state[key]!r}, this sampler has "
                    f"{mine[key]!r} (lengths, edges and batch sizes make the fingerprint)"
                )
        consumed = int(state["consumed"])
        if not 0 <= consumed <= len(self):
            raise ValueError(f"consumed = {consumed} is outside [0, {len(self)}]")
        self.seed, self.epoch, self._resume_at = int(state["seed"]), int(state["epoch"]), consumed
