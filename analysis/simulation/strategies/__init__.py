"""Batching strategies: real epochs of index batches built from per-sample lengths.

Every strategy turns per-sample ``lengths`` and an explicit ``rng`` into one epoch: a
sequence of batches, each an ``int64`` array of sample indices, in the order a trainer
would consume them.  Every sample appears exactly once per epoch, except in ``bucketed``
epochs for ``world_size > 1``, whose last steps are completed with counted repeats.

=================  ==========================================================================
strategy           what it does (and who does it)
=================  ==========================================================================
``sorted``         stable sort by length, cut batches from the shortest, shuffle only the
                   *order* of the batches each epoch: the same compositions every epoch
                   (fairseq, ESPnet).
``random``         a random permutation cut into batches (PyTorch ``DataLoader(shuffle=True)``).
``bucketed``       the case's bucketed shuffle: shuffle inside each bucket of ``edges``, cut
                   batches of that bucket's batch size, interleave all buckets' batches in a
                   random order.  Built by :mod:`analysis.simulation.bucketed`, the core of
                   :class:`~analysis.sampler.BucketedBatchSampler`: with ``world_size``
                   and ``sync_buckets`` the epoch is the sampler's global epoch (batch ``b``
                   is step ``b // world_size`` of rank ``b % world_size``), and
                   ``builder.epoch(epoch_rng(seed, e))`` is the sampler's epoch ``e``.
``length_grouped`` Hugging Face ``TrainingArguments(train_sampling_strategy="group_by_length")``
                   (transformers 4.x: ``group_by_length=True``).  The Trainer builds its
                   ``LengthGroupedSampler`` with ``train_batch_size * gradient_accumulation_steps``
                   (``Trainer._get_train_sampler``), so with ``G = gradient_accumulation_steps``:
                   a permutation split into megabatches of ``mult * batch_size * G`` samples
                   (``mult = min(n // (4 * batch_size * G), 50)``, at least 1), each stably
                   sorted by length descending; the longest sample is swapped to the very first
                   position (so an out-of-memory error shows up at step 1); then cut into
                   batches of ``batch_size``.  This replicates ``get_length_grouped_indices``.
``token_budget``   AllenNLP-style: sort by ``length * (1 + U(-0.1, 0.1))``
                   (fresh noise each epoch), fill each batch while
                   ``(size + 1) * longest <= max_tokens``, ``longest`` rounded up to
                   ``pad_to_multiple_of`` (the batch's padded tokens), shuffle batch order.
                   Needs ``max_tokens``; a sample padded beyond ``max_tokens`` goes alone.
``packing``        first-fit-decreasing packing into bins of ``max_tokens`` (no padding inside
                   a bin, a bin costs ``max_tokens``).  Needs ``max_tokens``; which samples of
                   a given length fill which bin, and the order of bins, are random per epoch.
``packing_bfd``    TRL's ``pack_dataset(..., strategy="bfd")`` (SFTTrainer's default packing):
                   best fit decreasing over batches of 1,000 samples in dataset order; the
                   rows are fixed, their order shuffled each epoch.
``packing_first_   axolotl's multipack: first fit over a fresh random permutation each epoch,
fit``              in groups of 100,000 samples.
``packing_next_    torchtune's ``PackedDataset``: next fit in dataset order (a row closes when
fit``              the next sample does not fit); fixed rows, shuffled each epoch.
=================  ==========================================================================

The four ``packing*`` strategies (:data:`PACKED_STRATEGIES`) put several samples in one row of
the token budget, a step being one row; their attention is restricted to each sample (a
variable-length kernel), which is how :mod:`analysis.answers.throughput` prices them.  The packers
are in :mod:`analysis.simulation.strategies._packers`.

The batch rule is a :class:`~analysis.batching.BatchRule`: ``bucketed`` takes its
per-bucket sizes (``rule.batch_sizes(edges)``), the other fixed-size strategies one size for
the epoch (``rule.fixed_batch_size(longest)``), the token strategies a token budget
(``rule.token_budget(longest)``: ``max_tokens``, or ``batch_size`` samples of the
longest padded, the same activation memory).

An epoch is stored flat (:class:`Epoch`: ``indices`` plus batch ``offsets``), built with a
handful of vectorised NumPy calls; ``Epoch.batches()`` gives the list of arrays.
:class:`EpochBuilder` does the per-dataset
work once (sorting, bucket assignment, the packing plan) and then builds any number of
epochs, which is how :func:`analysis.simulate` uses it.

One table (:class:`Strategy` records, by name) says what each strategy is; each one's
``prepare`` returns a typed, frozen state whose ``epoch`` method draws an epoch.  The sample-count
strategies live in :mod:`analysis.simulation.strategies._fixed`, the token strategies and :func:`ffd_plan`
in :mod:`analysis.simulation.strategies._token`.
"""

from analysis.padding.waste import EXACT_STRATEGIES
from analysis.simulation.strategies._epoch import Epoch, StrategyState
from analysis.simulation.strategies._packers import (
    MULTIPACK_GROUP,
    TRL_MAP_BATCH,
    pack_bfd,
    pack_first_fit,
    pack_next_fit,
)
from analysis.simulation.strategies._table import (
    ALL_STRATEGIES,
    FIELD_PACKERS,
    PACKED_STRATEGIES,
    STRATEGIES,
    TOKEN_STRATEGIES,
    BuilderOptions,
    EpochBuilder,
    Strategy,
    build_epoch,
    epoch_builder,
    strategy_rule,
)
from analysis.simulation.strategies._token import PADDING_NOISE, ffd_plan

__all__ = [
    "ALL_STRATEGIES",
    "EXACT_STRATEGIES",
    "FIELD_PACKERS",
    "MULTIPACK_GROUP",
    "PACKED_STRATEGIES",
    "PADDING_NOISE",
    "TRL_MAP_BATCH",
    "STRATEGIES",
    "TOKEN_STRATEGIES",
    "BuilderOptions",
    "Epoch",
    "EpochBuilder",
    "Strategy",
    "StrategyState",
    "epoch_builder",
    "build_epoch",
    "ffd_plan",
    "pack_bfd",
    "pack_first_fit",
    "pack_next_fit",
    "strategy_rule",
]
