"""A bucket plan in the words of the training frameworks that will use it.

Our ``edges`` ``[e0, e1, ..., eK]`` put a length ``L`` in bucket ``i`` when
``e_i < L <= e_{i+1}`` (upper bound *inclusive*).  Frameworks spell boundaries differently:

=============  =====================================  ==========================================
target         parameters                             bucket of ``L``
=============  =====================================  ==========================================
Lhotse 1.33    ``duration_bins`` (K-1 values),        ``bisect_left(duration_bins, L)``:
               ``FixedBucketBatchSizeConstraint``     ``bins[i-1] < L <= bins[i]``
               (build with :func:`lhotse_sampler`)    (``SamplingConstraint.select_bucket``)
NeMo (lhotse)  ``bucket_duration_bins``,              first ``i`` with ``L <= bins[i]``
               ``bucket_batch_size`` (K values each)  (``bisect_left``; older NeMo: bisect_right)
tf.data        ``bucket_boundaries`` (K-1 ints),      ``bounds[i-1] <= L < bounds[i]``
               ``bucket_batch_sizes`` (K ints)
Hugging Face   no bucket sampler ships: put           first ``i`` with
               :class:`~analysis.BucketedBatchSampler` ``L <= bucket_upper_bounds[i]``
               under a ``Trainer`` (:func:`to_hf`)
=============  =====================================  ==========================================

Lengths are integers (tokens, frames), so "``L <= e``" is "``L < e + 1``" and also
"``L < e + 0.5``".  Lhotse and NeMo compare floats and their rules changed sides between
versions (Lhotse 1.33 uses ``bisect_left``, earlier exports here assumed ``bisect_right``), so
they get half-integer bounds ``e + 0.5``, which no integer length equals: the bucket is the same
whichever side a version uses.  tf.data wants ``list<int>``: it gets
``e + 1``.  The exports put every length ``e0 < L <= eK`` in the same bucket as our edges
(tests/faces/test_exports.py checks it with each target's rule); lengths above ``eK`` are the
trainer's to truncate or drop.

Every function takes a :class:`~analysis.optimize.BucketPlan` (anything with ``edges`` and
``batch_sizes``: the :class:`PlanLike` protocol) and returns plain ``dict``/``str`` values:
no framework is imported, except by :func:`lhotse_sampler`, which imports Lhotse when called
and returns a ready sampler.  Exports import the engine; the engine never imports them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from analysis.batching import check_edges

__all__ = [
    "PlanLike",
    "PlanRecord",
    "to_lhotse",
    "lhotse_sampler",
    "to_nemo",
    "to_tf_data",
    "to_hf",
    "export_all",
    "to_json",
]


class PlanLike(Protocol):
    """What an export needs of a plan: its edges and per-bucket batch sizes."""

    @property
    def edges(self) -> Sequence[int]: ...

    @property
    def batch_sizes(self) -> Sequence[int]: ...


class PlanRecord(PlanLike, Protocol):
    """What :func:`to_json` needs of a plan: the exports' edges and batch sizes, and its own
    JSON-ready dictionary (:meth:`analysis.BucketPlan.to_dict`)."""

    def to_dict(self) -> dict[str, Any]: ...


def _edges_and_sizes(plan: PlanLike) -> tuple[list[int], list[int]]:
    """Validated ``edges`` and per-bucket ``batch_sizes`` of ``plan``."""
    try:
        edges, sizes = plan.edges, plan.batch_sizes
    except AttributeError as exc:
        raise ValueError(f"expected a BucketPlan (edges and batch_sizes), got {type(plan).__name__}") from exc
    edges = check_edges(edges)
    sizes = [int(s) for s in sizes]
    if len(sizes) != len(edges) - 1:
        raise ValueError(f"plan has {len(edges) - 1} buckets but {len(sizes)} batch sizes")
    if any(s < 1 for s in sizes):
        raise ValueError(f"batch sizes must be positive, got {sizes}")
    return edges, sizes


def _half(e: int) -> float:
    return e + 0.5


def to_lhotse(plan: PlanLike) -> dict[str, Any]:
    """Lhotse ``DynamicBucketingSampler`` settings, as JSON-ready values.

    Lhotse 1.33 (``lhotse/dataset/sampling/base.py``, ``SamplingConstraint.select_bucket``)
    puts a cut of length ``L`` in bucket ``bisect_left(duration_bins, L)``: with ``K - 1``
    ``duration_bins`` there are ``K`` buckets, bucket ``i`` holding ``bins[i-1] < L <= bins[i]``
    (the same call picks the batch size in ``FixedBucketBatchSizeConstraint`` over its ``K``
    ``max_seq_len_buckets``).  We give ``e_i + 0.5``, so every integer length lands in our
    bucket whichever side a version compares.  The length is the constraint's
    ``measure_length(cut)``, ``cut.duration`` by default: export a plan made from lengths in the
    unit the constraint measures (or subclass the constraint).

    The sampler needs the constraint as an *object* (``DynamicBucketingSampler(cuts,
    constraint={...})`` builds but fails at the first batch), so this dict is not its keyword
    arguments: :func:`lhotse_sampler` builds the sampler from it in one call.

    Returns ``{"duration_bins", "num_buckets", "constraint": {"class", "max_seq_len_buckets",
    "batch_sizes"}}``.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> plan = SimpleNamespace(edges=[0, 100, 400, 1000], batch_sizes=[32, 8, 3])
    >>> out = to_lhotse(plan)
    >>> out["duration_bins"], out["num_buckets"]
    ([100.5, 400.5], 3)
    >>> out["constraint"]["max_seq_len_buckets"], out["constraint"]["batch_sizes"]
    ([100.5, 400.5, 1000.5], [32, 8, 3])
    """
    edges, sizes = _edges_and_sizes(plan)
    return {
        "duration_bins": [_half(e) for e in edges[1:-1]],
        "num_buckets": len(sizes),
        "constraint": {
            "class": "lhotse.dataset.sampling.dynamic_bucketing.FixedBucketBatchSizeConstraint",
            "max_seq_len_buckets": [_half(e) for e in edges[1:]],
            "batch_sizes": sizes,
        },
    }


def lhotse_sampler(cuts: Iterable[Any], plan: PlanLike, **kwargs: Any) -> Any:
    """Lhotse's ``DynamicBucketingSampler`` over ``cuts`` with the plan's buckets and batch sizes.

    ``DynamicBucketingSampler(cuts, duration_bins=..., num_buckets=K,
    constraint=FixedBucketBatchSizeConstraint(max_seq_len_buckets, batch_sizes), **kwargs)``
    from :func:`to_lhotse`; ``kwargs`` are the sampler's own (``shuffle``, ``seed``,
    ``world_size``, ``rank``, ``sync_buckets``, ``drop_last``, ``buffer_size``...).  Imports
    Lhotse (a training dependency, not the workbench's) when called.  Cuts longer than the last
    edge make Lhotse's constraint raise: filter them first.
    """
    from lhotse.dataset.sampling.dynamic_bucketing import (
        DynamicBucketingSampler,
        FixedBucketBatchSizeConstraint,
    )

    cfg = to_lhotse(plan)
    constraint = FixedBucketBatchSizeConstraint(
        max_seq_len_buckets=cfg["constraint"]["max_seq_len_buckets"],
        batch_sizes=cfg["constraint"]["batch_sizes"],
    )
    return DynamicBucketingSampler(
        cuts,
        duration_bins=cfg["duration_bins"],
        num_buckets=cfg["num_buckets"],
        constraint=constraint,
        **kwargs,
    )


def to_nemo(plan: PlanLike) -> dict[str, Any]:
    """NeMo's Lhotse dataloader config keys for bucketing with per-bucket batch sizes.

    NeMo's ``LhotseDataLoadingConfig`` (``nemo/collections/common/data/lhotse/dataloader.py``)
    takes ``use_bucketing``, ``num_buckets``, ``bucket_duration_bins`` (``K`` upper bounds) and
    ``bucket_batch_size`` (``K`` ints).  Its ``FixedBucketBatchSizeConstraint2D``
    (``sampling.py``, ``find_smallest_bucket``) puts a 1-D length ``L`` in the *first bucket
    whose bound is >= L* (``bisect_left``: inclusive upper bounds, like ours; older releases
    deferred to Lhotse's ``bisect_right``) and drops lengths above the last bound.  We give
    ``bucket_duration_bins = e_{i+1} + 0.5``: the same buckets under either rule.  The bins are
    in the unit NeMo measures (seconds for audio cuts, tokens for text with
    ``use_multimodal_sampling``): export a plan made from lengths in that unit.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> to_nemo(SimpleNamespace(edges=[0, 100, 400, 1000], batch_sizes=[32, 8, 3]))
    {'use_bucketing': True, 'num_buckets': 3, 'bucket_duration_bins': [100.5, 400.5, 1000.5],
     'bucket_batch_size': [32, 8, 3]}
    """
    edges, sizes = _edges_and_sizes(plan)
    return {
        "use_bucketing": True,
        "num_buckets": len(sizes),
        "bucket_duration_bins": [_half(e) for e in edges[1:]],
        "bucket_batch_size": sizes,
    }


def to_tf_data(plan: PlanLike) -> dict[str, Any]:
    """Arguments for ``tf.data.experimental.bucket_by_sequence_length``
    (also ``tf.data.Dataset.bucket_by_sequence_length``).

    TensorFlow's ``bucket_boundaries`` (``list<int>``) are *exclusive* upper bounds: with
    boundaries ``[b1, ..., b_{K-1}]`` the buckets are ``[0, b1), [b1, b2), ..., [b_{K-1},
    inf)``, and ``bucket_batch_sizes`` needs ``len(bucket_boundaries) + 1`` values.  Our
    inclusive ``L <= e`` is ``L < e + 1``, so ``bucket_boundaries = e_i + 1`` for the
    interior edges and ``bucket_batch_sizes`` are our ``K`` sizes.  Use the default
    ``pad_to_bucket_boundary=False`` (padding to the batch's longest, as our model assumes).

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> to_tf_data(SimpleNamespace(edges=[0, 100, 400, 1000], batch_sizes=[32, 8, 3]))
    {'bucket_boundaries': [101, 401], 'bucket_batch_sizes': [32, 8, 3], 'pad_to_bucket_boundary': False}
    """
    edges, sizes = _edges_and_sizes(plan)
    return {
        "bucket_boundaries": [e + 1 for e in edges[1:-1]],
        "bucket_batch_sizes": sizes,
        "pad_to_bucket_boundary": False,
    }


def to_hf(plan: PlanLike, *, length_column: str = "length") -> dict[str, Any]:
    """What a Hugging Face ``datasets``/``transformers`` (5.x) user needs to bucket with this plan.

    Transformers ships no bucket sampler: ``TrainingArguments(train_sampling_strategy=
    "group_by_length")`` (4.x: ``group_by_length=True``) sorts shuffled megabatches and takes no
    boundaries.  So the export is ``training_args`` that ``TrainingArguments(**...)`` accepts
    (``length_column_name``: the column holding per-sample lengths, added with ``Dataset.map``),
    the bucket bounds and batch sizes, and the recipe below, which puts
    :class:`~analysis.BucketedBatchSampler` (same edges, same rule) under a ``Trainer``.  Bucket
    of ``L``: the first ``i`` with ``L <= bucket_upper_bounds[i]``
    (``numpy.searchsorted(bounds, L, side="left")``), which is our ``e_i < L <= e_{i+1}``.

    Recipe (transformers 5.x: ``Trainer._get_dataloader`` hands only its own
    ``BatchRebalanceSampler`` to the ``DataLoader`` as a ``batch_sampler``, so override
    ``Trainer.get_train_dataloader``)::

        from torch.utils.data import DataLoader
        from transformers import Trainer
        from analysis import BucketedBatchSampler

        class BucketedTrainer(Trainer):
            def get_train_dataloader(self):
                dataset = self.train_dataset  # a datasets.Dataset with a "length" column
                sampler = BucketedBatchSampler(
                    dataset["length"], plan, seed=self.args.seed,
                    rank=self.args.process_index, world_size=self.args.world_size)
                loader = self.accelerator.prepare(DataLoader(
                    dataset.remove_columns("length"), batch_sampler=sampler,
                    collate_fn=self.data_collator, num_workers=self.args.dataloader_num_workers))
                shard = getattr(loader, "batch_sampler", None)  # multi-process: accelerate's
                if getattr(shard, "batch_sampler", None) is sampler:  # BatchSamplerShard
                    shard.num_processes, shard.process_index = 1, 0  # must not re-shard
                return loader

    The Trainer calls ``set_epoch`` on the sampler each epoch.  Resuming,
    ``trainer.train(resume_from_checkpoint=...)``, needs nothing more: transformers 5.x saves
    no dataloader state, it rebuilds the loader, sets the checkpoint's epoch and skips the
    batches already trained in it (Accelerate's ``skip_first_batches``); the sampler's epochs
    are deterministic in ``(seed, epoch)``, so the batches after the resume are those of an
    uninterrupted run (``tests/integration/test_resume.py`` runs this recipe and checks it).  This override
    bypasses the Trainer's ``remove_unused_columns``: the recipe drops the length column
    itself, and the dataset must hold only what the collator takes (tokenize into the model's
    inputs, or pass a collator that drops the rest).

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> hf = to_hf(SimpleNamespace(edges=[0, 100, 400, 1000], batch_sizes=[32, 8, 3]))
    >>> hf["training_args"], hf["bucket_upper_bounds"], hf["bucket_batch_sizes"]
    ({'length_column_name': 'length'}, [100, 400, 1000], [32, 8, 3])
    """
    edges, sizes = _edges_and_sizes(plan)
    if not isinstance(length_column, str) or not length_column:
        raise ValueError(f"length_column must be a non-empty string, got {length_column!r}")
    return {
        "training_args": {"length_column_name": length_column},
        "bucket_lower_bound": edges[0],
        "bucket_upper_bounds": edges[1:],
        "bucket_batch_sizes": sizes,
        "bucket_rule": "bucket = first i with length <= bucket_upper_bounds[i]",
        "add_length_column": f"dataset.map(lambda ex: {{'{length_column}': len(ex['input_ids'])}})",
        "sampler": f"analysis.BucketedBatchSampler(dataset['{length_column}'], plan, "
        "seed=args.seed, rank=args.process_index, world_size=args.world_size)",
    }


def export_all(plan: PlanLike) -> dict[str, dict[str, Any]]:
    """Every export of ``plan``, by target name.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> sorted(export_all(SimpleNamespace(edges=[0, 10, 30], batch_sizes=[8, 8])))
    ['hf', 'lhotse', 'nemo', 'tf_data']
    """
    return {"lhotse": to_lhotse(plan), "nemo": to_nemo(plan), "tf_data": to_tf_data(plan), "hf": to_hf(plan)}


def to_json(plan: PlanRecord, *, indent: int | None = 2) -> str:
    """The plan (``plan.to_dict()``, :meth:`analysis.BucketPlan.to_dict`) with every export
    under ``"exports"``, as JSON text: the one serialisation of a plan.

    Examples
    --------
    >>> import json
    >>> from analysis import LengthHistogram, optimize_edges
    >>> plan = optimize_edges(LengthHistogram.from_lengths([1, 2, 9, 30]), 2, batch_size=2)
    >>> json.loads(to_json(plan))["exports"]["tf_data"]["bucket_boundaries"]
    [10]
    """
    return json.dumps({**plan.to_dict(), "exports": export_all(plan)}, indent=indent, allow_nan=False)
