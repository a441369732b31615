"""The one table of strategies, and the builder that prepares one for a dataset."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from typing import TypedDict, Unpack

import numpy as np

from analysis._validate import as_length_array, check_rng, known_name, positive_int
from analysis.batching import BatchRule, as_rule, check_edges
from analysis.lengths import LengthHistogram, count_distinct
from analysis.padding.waste import EXACT_STRATEGIES
from analysis.simulation.strategies._epoch import Epoch, Setup, StrategyState
from analysis.simulation.strategies._fixed import (
    prepare_bucketed,
    prepare_length_grouped,
    prepare_random,
    prepare_sorted,
)
from analysis.simulation.strategies._packers import prepare_bfd, prepare_first_fit, prepare_next_fit
from analysis.simulation.strategies._token import PADDING_NOISE, prepare_packing, prepare_token_budget


@dataclass(frozen=True)
class Strategy:
    """One batching strategy: its name, how it prepares a dataset, and what kind it is.

    Attributes
    ----------
    name : str
    prepare : callable
        The per-dataset work: the builder's inputs in, the strategy's frozen state (whose
        ``epoch(rng)`` draws an epoch) out.
    token : bool
        Fills batches up to a token budget instead of a sample count.
    """

    name: str
    prepare: Callable[[Setup], StrategyState] = field(repr=False)
    token: bool = False

    @property
    def exact(self) -> bool:
        """Whether the histogram gives its expected padding exactly (:mod:`analysis.padding.waste`)."""
        return self.name in EXACT_STRATEGIES


_TABLE = {
    s.name: s
    for s in (
        Strategy("sorted", prepare_sorted),
        Strategy("random", prepare_random),
        Strategy("bucketed", prepare_bucketed),
        Strategy("length_grouped", prepare_length_grouped),
        Strategy("token_budget", prepare_token_budget, token=True),
        Strategy("packing", prepare_packing, token=True),
        Strategy("packing_bfd", prepare_bfd, token=True),
        Strategy("packing_first_fit", prepare_first_fit, token=True),
        Strategy("packing_next_fit", prepare_next_fit, token=True),
    )
}
#: Every strategy name, in table order.
ALL_STRATEGIES = tuple(_TABLE)
#: The strategies tables and figures show when none are named, in that order (the field's
#: packers below are priced beside them by name: ``predict_strategy_throughput``).
STRATEGIES = ALL_STRATEGIES[:6]
#: The field's packers, strategies of their own (:mod:`analysis.simulation.strategies._packers`).
FIELD_PACKERS = ALL_STRATEGIES[6:]
#: The strategies that fill batches up to a token budget instead of a sample count.
TOKEN_STRATEGIES = tuple(name for name, s in _TABLE.items() if s.token)
#: The strategies that pack several samples into one row of the token budget (a step is a row).
PACKED_STRATEGIES = tuple(name for name in _TABLE if name.startswith("packing"))


def strategy_rule(strategy: str, rule: BatchRule, longest: int) -> BatchRule:
    """The batch rule ``strategy`` actually runs with on data whose longest sample is ``longest``.

    ``bucketed`` runs ``rule`` itself; the token strategies fill batches up to
    ``rule.token_budget(longest)`` (``token_budget`` by padded length, rounded to
    ``pad_to_multiple_of``; the packers' rows hold no padding); the others take one batch size for the epoch
    (``rule.fixed_batch_size(longest)``).

    Examples
    --------
    >>> rule = BatchRule(max_tokens=4096)
    >>> [strategy_rule(name, rule, 1000).text for name in ("bucketed", "packing", "sorted")]
    ['max_tokens 4,096', 'max_tokens 4,096', 'batch_size 4']
    """
    if strategy in PACKED_STRATEGIES:  # a packed row holds no padding
        return BatchRule(max_tokens=rule.token_budget(longest))
    if strategy in TOKEN_STRATEGIES:  # token_budget pads its batches as the rule says
        return BatchRule(None, rule.token_budget(longest), rule.pad_to_multiple_of)
    if strategy == "bucketed":
        return rule
    return BatchRule(rule.fixed_batch_size(longest), None, rule.pad_to_multiple_of)


@dataclass(frozen=True, eq=False)
class EpochBuilder(Setup):
    """A strategy prepared for one dataset: call :meth:`epoch` once per epoch.

    Make one with :func:`epoch_builder`.  Attributes: ``strategy``, ``lengths`` (per-sample,
    ``int64``), ``hist`` (their :class:`~analysis.lengths.LengthHistogram`), ``rule`` (the
    batch rule as given), ``edges`` (``bucketed`` only), ``batch_sizes`` (samples per batch:
    one value, or one per bucket for ``bucketed``; empty for the token strategies),
    ``max_tokens`` (the token strategies' budget, else None), ``gradient_accumulation_steps``,
    ``world_size``, ``sync_buckets``.
    """

    _state: StrategyState = field(repr=False)

    def epoch(self, rng: np.random.Generator) -> Epoch:
        """Build one epoch with ``rng`` (the only source of randomness)."""
        check_rng(rng)
        return self._state.epoch(rng)


def epoch_builder(
    lengths: Sequence[int] | np.ndarray | LengthHistogram,
    strategy: str,
    rule: BatchRule | None = None,
    *,
    batch_size: int | None = None,
    max_tokens: int | None = None,
    edges: Sequence[int] | None = None,
    gradient_accumulation_steps: int = 1,
    world_size: int = 1,
    sync_buckets: bool = True,
    padding_noise: float = PADDING_NOISE,
) -> EpochBuilder:
    """Prepare ``strategy`` for per-sample ``lengths`` (the per-dataset work, done once).

    Parameters
    ----------
    lengths : array-like of int or LengthHistogram
        Per-sample lengths (positive integers), 1-D; a histogram is expanded (sample ``i``
        is the ``i``-th shortest).
    strategy : str
        One of :data:`ALL_STRATEGIES`.
    rule : BatchRule, optional
        The batch rule (or ``batch_size=`` / ``max_tokens=``); see the module docstring for
        how each strategy uses it.
    edges : sequence of int, optional
        Bucket edges, required by ``bucketed`` (must cover the data), ignored otherwise.
    gradient_accumulation_steps : int, default 1
        ``length_grouped`` only: the Trainer's megabatches are built from
        ``batch_size * gradient_accumulation_steps``.
    world_size : int, default 1
        ``bucketed`` only: ranks the epoch is built for (steps of ``world_size`` batches,
        completed with repeats; see :mod:`analysis.simulation.bucketed`).  Other strategies ignore it.
    sync_buckets : bool, default True
        ``bucketed`` with ``world_size > 1`` only: every step's batches come from one bucket.
    padding_noise : float, default PADDING_NOISE
        ``token_budget`` only: the relative noise on its sort key (``U(-x, x)``, ``0 <= x < 1``).

    Examples
    --------
    >>> import numpy as np
    >>> b = epoch_builder([10, 20, 30, 40], "bucketed", batch_size=2, edges=[0, 25, 40])
    >>> b.batch_sizes
    (2, 2)
    >>> ep = b.epoch(np.random.default_rng(1))
    >>> sorted(sorted(x.tolist()) for x in ep.batches()), sorted(ep.buckets.tolist())
    ([[0, 1], [2, 3]], [0, 1])
    >>> epoch_builder([1, 2], "shuffled", batch_size=2)
    Traceback (most recent call last):
    ...
    ValueError: unknown strategy 'shuffled'; choose one of sorted, random, bucketed, length_grouped,
    token_budget, packing, packing_bfd, packing_first_fit, packing_next_fit
    """
    known_name(strategy, ALL_STRATEGIES, "strategy")
    rule = as_rule(rule, batch_size=batch_size, max_tokens=max_tokens)
    arr = as_length_array(
        lengths.expand() if isinstance(lengths, LengthHistogram) else lengths,
        allow_zero=False,
        source="lengths",
        zero_hint="a batch holds only non-empty samples: remove empty ones from data and lengths alike",
    )
    if arr.size == 0:
        raise ValueError("lengths is empty: no samples")
    arr.setflags(write=False)
    hist = lengths if isinstance(lengths, LengthHistogram) else LengthHistogram(*count_distinct(arr))
    accumulation = positive_int(gradient_accumulation_steps, "gradient_accumulation_steps")
    if (
        isinstance(padding_noise, bool)
        or not isinstance(padding_noise, int | float)
        or not 0 <= padding_noise < 1
    ):
        raise ValueError(f"padding_noise must be a number in [0, 1), got {padding_noise!r}")
    world_size = positive_int(world_size, "world_size")
    edges_out, budget = None, None
    if strategy == "bucketed":
        if edges is None:
            raise ValueError("strategy 'bucketed' needs edges")
        edges_out = tuple(check_edges(edges, hist))
        sizes = tuple(rule.batch_sizes(edges_out))
    elif strategy in TOKEN_STRATEGIES:
        sizes, budget = (), rule.token_budget(hist.max)
    else:
        sizes = (rule.fixed_batch_size(hist.max),)
    setup = Setup(
        strategy,
        arr,
        hist,
        rule,
        edges_out,
        sizes,
        budget,
        accumulation,
        world_size,
        bool(sync_buckets),
        float(padding_noise),
    )
    state = _TABLE[strategy].prepare(setup)
    return EpochBuilder(**{f.name: getattr(setup, f.name) for f in fields(setup)}, _state=state)


class BuilderOptions(TypedDict, total=False):
    """The keywords of :func:`epoch_builder` after ``rule`` (what :func:`build_epoch` passes on)."""

    batch_size: int | None
    max_tokens: int | None
    edges: Sequence[int] | None
    gradient_accumulation_steps: int
    world_size: int
    sync_buckets: bool
    padding_noise: float


def build_epoch(
    lengths: Sequence[int] | np.ndarray,
    strategy: str,
    rule: BatchRule | None = None,
    *,
    rng: np.random.Generator,
    **options: Unpack[BuilderOptions],
) -> Epoch:
    """One epoch of ``strategy`` over per-sample ``lengths``; see :func:`epoch_builder` (whose
    keywords ``options`` are).

    Examples
    --------
    >>> import numpy as np
    >>> ep = build_epoch([3, 9, 4, 8, 2], "packing", rng=np.random.default_rng(0), max_tokens=12)
    >>> sorted(sorted(b.tolist()) for b in ep.batches())
    [[0, 1], [2, 3], [4]]
    """
    return epoch_builder(lengths, strategy, rule, **options).epoch(rng)
