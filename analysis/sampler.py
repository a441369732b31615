"""Train with the plan: a deterministic, resumable, data-parallel bucketed batch sampler.

:class:`BucketedBatchSampler` yields one rank's batches (lists of sample indices) for
``torch.utils.data.DataLoader(dataset, batch_sampler=sampler)``.  It is the case's bucketed
shuffle: shuffle inside each bucket of ``edges``, cut batches of the bucket's batch size,
interleave the buckets' batches in a random order.  The same code builds the simulator's
``bucketed`` epochs (:mod:`analysis.simulation.strategies`), so the simulated batches, the expected
padding of :func:`analysis.padding.waste.expected_padding` and the training run agree by construction.

The epochs are those of :mod:`analysis.simulation.bucketed` (the pure core): epoch ``e`` of a sampler with
``seed`` is :func:`~analysis.simulation.bucketed.draw_epoch` with the generator
:func:`~analysis.simulation.bucketed.epoch_rng` ``(seed, e)``; nothing else is random, so every rank builds
the same global epoch and takes its own share, without communicating.  How the global epoch is
shared between ``world_size`` ranks, and what ``sync_buckets`` and ``drop_last`` do, is
described there ("Data parallelism").

With ``drop_last=False`` every sample is in some batch of every epoch (on some rank) and
``n_repeated`` sample slots are repeats; with ``drop_last=True`` nothing repeats and
``n_dropped`` samples are left out.  With ``world_size=1`` both settings of ``sync_buckets`` are
the plain bucketed shuffle, and with ``drop_last=False`` nothing repeats.

Resume contract
---------------
A state is a position in the sequence of epochs: ``(epoch, batches done)``, JSON-serialisable,
the same on every rank (ranks step in lockstep, so rank 0 can save it).  A sampler built with
the same arguments (same lengths, edges, batch rule, seed, world size) and given
``load_state_dict(state)`` yields exactly the batches that come after that position, on every
rank; ``len(sampler)`` then counts what is left of the epoch (until the next pass starts, or
``set_epoch`` moves to another epoch: then it is the full epoch again).  Which count to save:

- ``state_dict()`` (no argument): what the sampler has *yielded* in the current epoch.  This is
  the ``state_dict()`` / ``load_state_dict()`` protocol that ``torchdata``'s
  ``StatefulDataLoader`` (and so Accelerate's ``use_stateful_dataloader``) calls: the loader
  snapshots the sampler when it hands out each batch's indices and keeps the snapshot that
  matches the last batch it delivered, so its own ``loader.state_dict()`` is exact with
  ``num_workers > 0`` too.  Save the loader's state, not the sampler's.
- ``state_dict(consumed=n)``: a plain ``torch.utils.data.DataLoader`` with worker processes
  draws ``num_workers * prefetch_factor`` batches of indices ahead of training, so what the
  sampler yielded runs ahead of what the loop used; pass the loop's own count of this epoch's
  batches instead (with ``num_workers=0`` both counts agree).
- A ``transformers`` ``Trainer`` saves no loader state: it resumes by skipping the trained
  batches of the epoch, which needs no state at all (:func:`analysis.exports.to_hf`).

The state's ``seed`` is the run's: a sampler built with another seed takes it, and every epoch
from then on (the resumed one included, whenever the state is loaded: before or after
``set_epoch``, before the first pass or after others) is built from the state's seed, so the
resumed stream is that of an uninterrupted run with that seed, batch for batch.  A pass already
running when a state is loaded cannot continue it: its next batch raises a one-line
``RuntimeError`` (start a new pass, ``iter(sampler)``, which resumes).

A state saved at the end of an epoch (all its batches done) has nothing left to resume: loaded
into a sampler already set to a later epoch it leaves that epoch alone (as a
``StatefulDataLoader`` does when the loop calls ``set_epoch(e + 1)`` before iterating), its seed
taken all the same.  After the resumed pass, iteration starts from the epoch's first batch
again; ``set_epoch`` to another epoch also clears the resume point.

Every key of a state is checked once, at :meth:`~BucketedBatchSampler.load_state_dict`: the
format, no key missing or unknown, each value's type and range, and that it was made for this
sampler's lengths, edges, batch sizes, world size, ``sync_buckets`` and ``drop_last``; anything
else is a one-line ``ValueError`` naming the key.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from typing import Protocol, cast

import numpy as np

from analysis._validate import ZeroLengthError, as_length_array, positive_int
from analysis.batching import BatchRule, as_rule, bucket_index, check_edges
from analysis.lengths import LengthHistogram
from analysis.simulation.bucketed import BucketedEpoch, bucket_layout, bucketed_epoch, draw_epoch, epoch_rng

__all__ = ["BucketedBatchSampler", "BucketedEpoch", "bucketed_epoch", "epoch_rng"]

_STATE_FORMAT = "analysis.BucketedBatchSampler/1"
#: The keys of a state and the type of each value.
_STATE_KEYS: dict[str, type] = {
    "format": str,
    "seed": int,
    "epoch": int,
    "consumed": int,
    "world_size": int,
    "sync_buckets": bool,
    "drop_last": bool,
    "fingerprint": str,
}


def _non_negative_int(value: object, name: str) -> int:
    """``value`` as an int, or a one-line ``ValueError`` (bools and floats refused): the one
    rule for a seed or an epoch, in the constructor, :meth:`~BucketedBatchSampler.set_epoch`
    and a loaded state."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    return int(value)


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
        All ranks draw from the same bucket at every step (see :mod:`analysis.simulation.bucketed`).
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
        The current epoch's batches yielded so far (a resumed pass counts the skipped ones):
        what :meth:`state_dict` saves without an argument.

    Examples
    --------
    >>> lengths = [5, 1, 7, 2, 8, 3, 4]
    >>> s = BucketedBatchSampler(lengths, [0, 4, 8], batch_size=3, world_size=2, rank=1)
    >>> len(s), s.n_repeated     # bucket (4, 8] has 1 batch: one repeated sample fills its step
    (2, 1)
    >>> batches = list(s)
    >>> it = iter(s)
    >>> first = next(it)
    >>> state = s.state_dict()       # 1 batch yielded (a plain loop: state_dict(consumed=1))
    >>> state["epoch"], state["consumed"]
    (0, 1)
    >>> t = BucketedBatchSampler(lengths, [0, 4, 8], batch_size=3, world_size=2, rank=1)
    >>> t.load_state_dict(state)
    >>> len(t), list(t) == batches[1:], list(t) == batches, len(t)
    (1, True, True, 2)
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
        try:
            arr = as_length_array(lengths, allow_zero=False, source="lengths")
        except ZeroLengthError as exc:  # its text suggests a loader's allow_zero, not ours
            raise ValueError(
                f"{exc.where}: zero length 0: every sample the sampler batches must be non-empty "
                "(remove empty samples from the dataset and from lengths alike)"
            ) from None
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
        self.rank, self.seed = int(rank), _non_negative_int(seed, "seed")
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
        self._skip = 0  # batches the pending (or running) resumed pass skips
        self._pending = False  # a loaded state waits for the next pass
        self._cache: tuple[int, int, BucketedEpoch] | None = None  # (seed, epoch, its batches)
        self._loads = 0  # states loaded so far: a pass that began before the last one stops
        self._pass: object | None = None  # the newest pass: the one that counts `yielded`

    def __len__(self) -> int:
        """Batches per rank in the epoch: the same on every rank and in every epoch, less the
        batches a loaded state had done, from :meth:`load_state_dict` until the pass after the
        resumed one starts or :meth:`set_epoch` moves to another epoch."""
        return self._layout.n_steps - self._skip

    def set_epoch(self, epoch: int) -> None:
        """Use epoch ``epoch``'s shuffle next (as ``DistributedSampler.set_epoch``).

        Another epoch than the one a loaded state points into clears the resume point.
        """
        epoch = _non_negative_int(epoch, "epoch")
        if epoch != self.epoch:
            self._skip, self._pending, self.yielded = 0, False, 0
            self._pass = None  # a pass still running goes on with its own epoch, uncounted
        self.epoch = epoch

    def global_epoch(self, epoch: int | None = None) -> BucketedEpoch:
        """Every rank's batches of ``epoch`` (default: the current one)."""
        e = self.epoch if epoch is None else _non_negative_int(epoch, "epoch")
        if self._cache is None or self._cache[:2] != (self.seed, e):
            self._cache = (self.seed, e, draw_epoch(self._layout, epoch_rng(self.seed, e)))
        return self._cache[2]

    @property
    def n_repeated(self) -> int:
        return self.global_epoch().n_repeated

    @property
    def n_dropped(self) -> int:
        return self.global_epoch().n_dropped

    def __iter__(self) -> Iterator[list[int]]:
        ep = self.global_epoch()
        if not self._pending:
            self._skip = 0
        start, self._pending = self._skip, False
        self.yielded = start
        token, loads = object(), self._loads
        self._pass = token
        w, offsets, indices = self.world_size, ep.offsets, ep.indices
        for step in range(start, ep.n_steps):
            if self._loads != loads:
                raise RuntimeError(
                    "BucketedBatchSampler: a state was loaded during this pass; start a new pass "
                    "(iter(sampler)) to resume from it"
                )
            b = step * w + self.rank
            if self._pass is token:
                self.yielded = step + 1
            yield indices[offsets[b] : offsets[b + 1]].tolist()

    def state_dict(self, consumed: int | None = None) -> SamplerState:
        """Where to resume: the current epoch and how many of its batches are done.

        Parameters
        ----------
        consumed : int, optional
            Batches of the current epoch the training loop has used (a plain ``DataLoader``
            with workers: its prefetch runs ahead of the loop).  Default: the batches the
            sampler has yielded (:attr:`yielded`), which is what a ``StatefulDataLoader``
            asks for.  See "Resume contract" in :mod:`analysis.sampler`.

        Returns
        -------
        dict
            JSON-serialisable and the same on every rank.
        """
        n = self._layout.n_steps
        if consumed is None:
            consumed = self.yielded
        if isinstance(consumed, bool) or not isinstance(consumed, int | np.integer) or not 0 <= consumed <= n:
            raise ValueError(f"consumed must be an integer in [0, {n}], got {consumed!r}")
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
        """Resume: the next pass yields the batches after the state's ``consumed`` ones, of the
        epoch built from the state's ``seed`` (see "Resume contract" in :mod:`analysis.sampler`).

        Raises a one-line ``ValueError`` naming the key for anything but a state of a sampler
        built with the same lengths, edges, batch sizes, world size, ``sync_buckets`` and
        ``drop_last``: every key is checked (type, range, match) before anything changes.
        """
        seed, epoch, consumed = self._check_state(state)
        self._loads += 1
        self._pass = None
        if seed != self.seed:  # every epoch is the state's seed's (the cache is keyed by it)
            self.seed = seed
            self._skip, self._pending, self.yielded = 0, False, 0
        if consumed == self._layout.n_steps and epoch < self.epoch:
            return  # a finished earlier epoch: nothing of it is left, keep the epoch set
        self.epoch = epoch
        self._skip, self._pending, self.yielded = consumed, True, consumed

    def _check_state(self, state: object) -> tuple[int, int, int]:
        """``(seed, epoch, consumed)`` of a state made for this sampler, or a one-line
        ``ValueError`` naming the first key that is wrong."""
        what = "BucketedBatchSampler state"
        if not isinstance(state, dict):
            raise ValueError(f"not a {what}: a {type(state).__name__}, not a dict")
        if state.get("format") != _STATE_FORMAT:
            raise ValueError(f"not a {what}: format {state.get('format')!r}, expected {_STATE_FORMAT!r}")
        missing = [k for k in _STATE_KEYS if k not in state]
        unknown = sorted(map(repr, set(state) - set(_STATE_KEYS)))
        if missing or unknown:
            problem = f"missing key {missing[0]!r}" if missing else f"unknown key {unknown[0]}"
            raise ValueError(f"{what}: {problem} (keys: {', '.join(_STATE_KEYS)})")
        for key, kind in _STATE_KEYS.items():
            value = state[key]
            if kind is int:
                ok = isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)
            else:
                ok = isinstance(value, kind)
            if not ok:
                raise ValueError(f"{what}: {key} must be {kind.__name__}, got {value!r}")
        seed = _non_negative_int(state["seed"], f"{what}: seed")
        epoch = _non_negative_int(state["epoch"], f"{what}: epoch")
        n, consumed = self._layout.n_steps, int(state["consumed"])
        if not 0 <= consumed <= n:
            raise ValueError(f"{what}: consumed must be in [0, {n}] (batches per epoch), got {consumed}")
        mine = self.state_dict(0)
        for key in ("world_size", "sync_buckets", "drop_last", "fingerprint"):
            if state[key] != mine[key]:
                raise ValueError(
                    f"{what} was saved with {key} = {state[key]!r}, this sampler has "
                    f"{mine[key]!r} (lengths, edges and batch sizes make the fingerprint)"
                )
        return seed, epoch, consumed
