"""The batching vocabulary every module speaks: edges, bucket membership, rounding, the rule.

- ``edges`` ``[e0, e1, ..., eK]``: strictly increasing integers; bucket ``i`` holds lengths
  ``e_i < L <= e_{i+1}``; ``e0`` is below the shortest length, ``eK`` at or above the longest.
- :class:`BatchRule`: ``batch_size`` samples per batch, or a ``max_tokens`` budget (bucket
  ``i`` then takes ``max(1, max_tokens // round_up(e_{i+1}, m))`` samples), and
  ``pad_to_multiple_of`` ``m`` (a batch's longest is rounded up to a multiple of it).  Built
  once where user input comes in (:meth:`BatchRule.resolve`) and passed down as a value.
- The defaults (:data:`DEFAULT_BATCH_SIZE`, :data:`DEFAULT_N_BUCKETS`, ...) live here only.

Each rule is written once, here; nothing else re-implements it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, overload

import numpy as np

from analysis._validate import positive_int

if TYPE_CHECKING:
    from analysis.lengths import LengthHistogram

__all__ = [
    "BatchRule",
    "check_edges",
    "cover_edges",
    "parse_edges",
    "bucket_index",
    "bucket_bounds",
    "round_up",
    "check_budget",
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_N_BUCKETS",
    "DEFAULT_MAX_BUCKETS",
    "DEFAULT_MIN_GAIN",
    "DEFAULT_SEED",
    "DEFAULT_EPOCHS",
    "DEFAULT_METHOD",
    "MAX_RULE_VALUE",
    "parse_rule_value",
]

#: Samples per batch when the user gives no batch rule (the case trained with 8).
DEFAULT_BATCH_SIZE = 8
#: Buckets of a recommended plan (the case ran 6).
DEFAULT_N_BUCKETS = 6
#: Bucket counts swept when choosing K: ``1..DEFAULT_MAX_BUCKETS``.
DEFAULT_MAX_BUCKETS = 16
#: The gain rule: stop adding buckets once one more gains less than this efficiency.
DEFAULT_MIN_GAIN = 0.01
#: Seed of every random generator a face makes.
DEFAULT_SEED = 1701
#: Simulated epochs per strategy.
DEFAULT_EPOCHS = 3
#: Edge placement method.
DEFAULT_METHOD = "optimal"


#: Largest ``batch_size``, ``max_tokens`` and ``pad_to_multiple_of`` (2**62): every product the
#: engine forms with one of them stays exact.  A batch larger than the data is one batch per
#: bucket, so nothing is lost by the limit.
MAX_RULE_VALUE = 2**62
_INT64_MAX = 2**63 - 1


def parse_rule_value(text: str) -> int:
    """A positive integer typed by a person (``"65536"``, ``"65_536"``, ``"65,536"``), at most
    :data:`MAX_RULE_VALUE`, or a one-line ``ValueError``: the one rule the CLI's integer
    options and the explorer's batch-rule box read their text with (each names the option).

    Examples
    --------
    >>> parse_rule_value("65_536"), parse_rule_value(" 3,386,800 ")
    (65536, 3386800)
    >>> parse_rule_value("4.6e18")
    Traceback (most recent call last):
    ...
    ValueError: expected a positive integer, got '4.6e18'
    >>> parse_rule_value("46000000000000000000")
    Traceback (most recent call last):
    ...
    ValueError: 46,000,000,000,000,000,000 exceeds the limit 2**62 = 4,611,686,018,427,387,904
    """
    cleaned = str(text).strip().replace("_", "").replace(",", "")
    if not (cleaned.isascii() and cleaned.isdigit()):  # digits only: no sign, point, exponent
        raise ValueError(f"expected a positive integer, got {text!r}")
    value = int(cleaned)
    if value < 1:
        raise ValueError(f"expected a positive integer, got {text!r}")
    if value > MAX_RULE_VALUE:
        raise ValueError(f"{value:,} exceeds the limit 2**62 = {MAX_RULE_VALUE:,}")
    return value


def _rule_int(value: object, name: str) -> int:
    """A positive int at most :data:`MAX_RULE_VALUE`, or a one-line ``ValueError``."""
    out = positive_int(value, name)
    if out > MAX_RULE_VALUE:
        raise ValueError(f"{name} = {out:,} exceeds the limit 2**62 = {MAX_RULE_VALUE:,}")
    return out


@overload
def round_up(values: int, multiple: int) -> int: ...
@overload
def round_up(values: np.integer[Any], multiple: int) -> np.integer[Any]: ...
@overload
def round_up(values: np.ndarray, multiple: int) -> np.ndarray: ...
def round_up(values: int | np.integer[Any] | np.ndarray, multiple: int) -> int | np.integer[Any] | np.ndarray:
    """``values`` (an int or an integer array) rounded up to a multiple of ``multiple``.

    Examples
    --------
    >>> round_up(13, 8), round_up(np.array([1, 8, 9]), 8).tolist()
    (16, [8, 8, 16])
    """
    if multiple == 1:
        return values
    if isinstance(values, np.ndarray) and values.size and values.dtype.kind in "iu":
        top = int(values.max())
        if top > _INT64_MAX - (multiple - 1):
            raise ValueError(
                f"pad_to_multiple_of / edge_multiple = {multiple:,} rounds the length "
                f"{top:,} past the int64 limit 2**63 - 1; use a smaller multiple"
            )
    return (values + (multiple - 1)) // multiple * multiple


def check_edges(edges: Sequence[int] | np.ndarray, hist: LengthHistogram | None = None) -> list[int]:
    """Validate bucket ``edges`` and return them as a list of Python ints.

    Raises a one-line ``ValueError`` naming the problem: not a 1-D sequence, fewer than 2
    values, non-integers, not strictly increasing, negative, or (given ``hist``) not
    covering the data (``e0`` below the shortest length, ``eK`` at or above the longest).

    Examples
    --------
    >>> check_edges([0, 770, 1216, 1728, 2432, 3296, 8192])
    [0, 770, 1216, 1728, 2432, 3296, 8192]
    >>> check_edges([0, 10, 10])
    Traceback (most recent call last):
    ...
    ValueError: edges must be strictly increasing: edges[1] = 10 >= edges[2] = 10
    """
    if edges is None or isinstance(edges, str | bytes) or not hasattr(edges, "__len__"):
        raise ValueError(f"edges must be a sequence of integers, got {type(edges).__name__}")
    if isinstance(edges, np.ndarray):
        if edges.ndim != 1:
            raise ValueError(f"edges must be 1-D, got an array of shape {edges.shape}")
        edges = edges.tolist()
    values = list(edges)
    if len(values) < 2:
        raise ValueError(f"edges need at least 2 values (one bucket), got {len(values)}")
    out = []
    for i, e in enumerate(values):
        if isinstance(e, float) and e.is_integer():
            e = int(e)
        if isinstance(e, bool | np.bool_) or not isinstance(e, int | np.integer):
            raise ValueError(f"edges[{i}] = {e!r} is not an integer")
        out.append(int(e))
    for i in range(len(out) - 1):
        if out[i] >= out[i + 1]:
            raise ValueError(
                f"edges must be strictly increasing: edges[{i}] = {out[i]} >= edges[{i + 1}] = {out[i + 1]}"
            )
    if out[0] < 0:
        raise ValueError(f"edges[0] = {out[0]} is negative")
    if hist is not None:
        if out[0] >= hist.min:
            raise ValueError(
                f"edges do not cover the data: edges[0] = {out[0]} must be below "
                f"the shortest length {hist.min}"
            )
        if out[-1] < hist.max:
            raise ValueError(
                f"edges do not cover the data: edges[-1] = {out[-1]} is below the longest length {hist.max}"
            )
    return out


def cover_edges(edges: Sequence[int] | np.ndarray, hist: LengthHistogram) -> list[int]:
    """``edges`` stretched just enough to cover ``hist``: the first edge lowered below the
    shortest length, the last raised to the longest; interior edges are kept (for published
    edges fitted to other data; interior edges beyond the data leave empty buckets).

    Examples
    --------
    >>> from analysis import LengthHistogram
    >>> cover_edges([0, 770, 8192], LengthHistogram.from_lengths([100, 9000]))
    [0, 770, 9000]
    >>> cover_edges([200, 770, 8192], LengthHistogram.from_lengths([100, 500]))
    [99, 770, 8192]
    """
    out = check_edges(edges)
    out[0] = min(out[0], hist.min - 1)
    out[-1] = max(out[-1], hist.max)
    return check_edges(out, hist)


_EDGE_SEPARATORS = re.compile(r"[\s,]+")


def parse_edges(text: str) -> list[int]:
    """Edges typed by a person: integers separated by commas and/or spaces, ``_`` allowed
    as a digit separator (the CLI's ``--edges`` and the explorer's text box).

    Examples
    --------
    >>> parse_edges("0, 770 1216,8_192")
    [0, 770, 1216, 8192]
    >>> parse_edges("0, ten")
    Traceback (most recent call last):
    ...
    ValueError: edges: 'ten' is not an integer (type integers like 0,770,1216,8192)
    """
    if not isinstance(text, str):
        raise ValueError(f"edges text must be a string, got {type(text).__name__}")
    values = []
    for part in _EDGE_SEPARATORS.split(text.strip()):
        if not part:
            continue
        try:
            values.append(int(part))
        except ValueError:
            raise ValueError(
                f"edges: {part!r} is not an integer (type integers like 0,770,1216,8192)"
            ) from None
    return check_edges(values)


#: Above this many values, :func:`bucket_index` of integer lengths uses a lookup table.
_TABLE_MIN_VALUES = 4096


def bucket_index(values: np.ndarray, edges: Sequence[int]) -> np.ndarray:
    """Bucket of each length: ``i`` such that ``edges[i] < L <= edges[i+1]`` (``int64``).

    Assumes ``edges`` already cover ``values`` (see :func:`check_edges`).

    Examples
    --------
    >>> bucket_index(np.array([1, 10, 11, 30]), [0, 10, 30]).tolist()
    [0, 0, 1, 1]
    """
    inner = np.asarray(edges[1:-1], dtype=np.int64)
    arr = np.asarray(values)
    if arr.dtype.kind in "iu" and arr.size > _TABLE_MIN_VALUES:
        # many integer lengths: look each up in a table of the buckets of 0..max (a binary
        # search per sample costs ~8x more), when the table is small beside the data
        lo, hi = int(arr.min()), int(arr.max())
        if lo >= 0 and hi < arr.size:
            table = np.searchsorted(inner, np.arange(hi + 1, dtype=np.int64), side="left")
            out: np.ndarray = table[arr]
            return out
    return np.searchsorted(inner, values, side="left").astype(np.int64, copy=False)


def bucket_bounds(lengths: np.ndarray, edges: Sequence[int]) -> tuple[list[int], list[int]]:
    """Bucket membership in histogram form: bucket ``i`` holds the distinct ``lengths``
    (ascending) ``lengths[starts[i]:stops[i]]``.

    Examples
    --------
    >>> bucket_bounds(np.array([1, 10, 11, 30]), [0, 10, 20, 30])
    ([0, 2, 3], [2, 3, 4])
    """
    bounds = np.searchsorted(lengths, np.asarray(edges[1:-1], dtype=np.int64), side="right").tolist()
    return [0, *bounds], [*bounds, int(lengths.size)]


@dataclass(frozen=True)
class BatchRule:
    """How batches are cut: exactly one of ``batch_size`` and ``max_tokens``, plus rounding.

    ``batch_size``: samples per batch.  ``max_tokens``: a token budget per batch; a bucket
    takes ``max(1, max_tokens // round_up(upper_edge, m))`` samples and a strategy without
    buckets ``max(1, max_tokens // round_up(longest, m))`` (:meth:`budget_batch_size`), so
    a batch of its longest possible sample, padded, fits the budget; only a lone sample
    padded beyond it passes.  ``pad_to_multiple_of`` (``m``): a batch's
    longest is rounded up to a multiple of this (as Hugging Face's
    ``DataCollatorWithPadding(pad_to_multiple_of=...)`` does).

    Examples
    --------
    >>> rule = BatchRule(max_tokens=16384)
    >>> rule.batch_sizes([0, 1000, 4000]), rule.fixed_batch_size(4000)
    ([16, 4], 4)
    >>> BatchRule(max_tokens=8192, pad_to_multiple_of=64).batch_sizes([0, 315, 682])  # 320, 704
    [25, 11]
    >>> BatchRule.resolve(), BatchRule.resolve(max_tokens=4096).text
    (BatchRule(batch_size=8, max_tokens=None, pad_to_multiple_of=1), 'max_tokens 4,096')
    >>> BatchRule(batch_size=8, max_tokens=4096)
    Traceback (most recent call last):
    ...
    ValueError: give exactly one of batch_size and max_tokens (got both)
    """

    batch_size: int | None = None
    max_tokens: int | None = None
    pad_to_multiple_of: int = 1

    def __post_init__(self) -> None:
        if (self.batch_size is None) == (self.max_tokens is None):
            which = "neither" if self.batch_size is None else "both"
            raise ValueError(f"give exactly one of batch_size and max_tokens (got {which})")
        if self.batch_size is not None:
            object.__setattr__(self, "batch_size", _rule_int(self.batch_size, "batch_size"))
        else:
            object.__setattr__(self, "max_tokens", _rule_int(self.max_tokens, "max_tokens"))
        object.__setattr__(
            self, "pad_to_multiple_of", _rule_int(self.pad_to_multiple_of, "pad_to_multiple_of")
        )

    @classmethod
    def resolve(
        cls,
        batch_size: int | None = None,
        max_tokens: int | None = None,
        pad_to_multiple_of: int | None = None,
    ) -> BatchRule:
        """The rule from user input, with the defaults: neither given means
        ``batch_size = DEFAULT_BATCH_SIZE``; both given is an error (no precedence)."""
        if batch_size is None and max_tokens is None:
            batch_size = DEFAULT_BATCH_SIZE
        return cls(batch_size, max_tokens, 1 if pad_to_multiple_of is None else pad_to_multiple_of)

    def budget_batch_size(self, longest: np.ndarray) -> np.ndarray:
        """The one rule of a token budget's batch size: ``max(1, max_tokens //
        round_up(longest, m))`` for each longest possible length (an ``int64`` array), so
        that many samples padded to it fit ``max_tokens``.

        Examples
        --------
        >>> rule = BatchRule(max_tokens=100, pad_to_multiple_of=8)
        >>> rule.budget_batch_size(np.array([10, 17, 99, 120])).tolist()  # 16, 24, 104, 120
        [6, 4, 1, 1]
        """
        assert self.max_tokens is not None
        padded = round_up(np.asarray(longest, dtype=np.int64), self.pad_to_multiple_of)
        out: np.ndarray = np.maximum(1, self.max_tokens // np.maximum(padded, 1))
        return out

    def batch_sizes(self, edges: Sequence[int]) -> list[int]:
        """Samples per batch in each bucket of ``edges`` (validated edges): ``batch_size``,
        or :meth:`budget_batch_size` at each upper edge."""
        if self.batch_size is not None:
            return [self.batch_size] * (len(edges) - 1)
        if self.pad_to_multiple_of == 1:  # exact for any int, however large
            assert self.max_tokens is not None
            return [max(1, self.max_tokens // int(upper)) for upper in edges[1:]]
        return [int(v) for v in self.budget_batch_size(np.asarray(edges[1:], dtype=np.int64)).tolist()]

    def fixed_batch_size(self, longest: int) -> int:
        """One batch size for a whole epoch (sorted, random, length-grouped batching):
        ``batch_size``, or the largest that fits ``max_tokens`` at the ``longest`` sample
        padded (:meth:`budget_batch_size`)."""
        if self.batch_size is not None:
            return self.batch_size
        return self.batch_sizes([0, int(longest)])[0]

    def token_budget(self, longest: int) -> int:
        """Tokens per batch of the token strategies (token_budget, packing): ``max_tokens``,
        or the memory of a full batch of the longest sample padded (``batch_size *
        round_up(longest, pad_to_multiple_of)``)."""
        if self.max_tokens is not None:
            return self.max_tokens
        assert self.batch_size is not None
        return self.batch_size * int(round_up(int(longest), self.pad_to_multiple_of))

    def kwargs(self) -> dict[str, int]:
        """The rule as keyword arguments: ``{"batch_size": B}`` or ``{"max_tokens": T}``
        (plus ``pad_to_multiple_of`` when it is not 1)."""
        out = (
            {"batch_size": self.batch_size}
            if self.batch_size is not None
            else {"max_tokens": self.max_tokens}
        )
        if self.pad_to_multiple_of != 1:
            out["pad_to_multiple_of"] = self.pad_to_multiple_of
        return {k: int(v) for k, v in out.items() if v is not None}

    @property
    def text(self) -> str:
        """The rule in words for titles and tables, e.g. ``"batch_size 8"``."""
        words = [
            f"batch_size {self.batch_size:,}"
            if self.batch_size is not None
            else f"max_tokens {self.max_tokens:,}"
        ]
        if self.pad_to_multiple_of != 1:
            words.append(f"pad_to_multiple_of {self.pad_to_multiple_of:,}")
        return ", ".join(words)


def check_budget(hist: LengthHistogram, rule: BatchRule) -> None:
    """Refuse, in one line, samples longer than a token budget: what every face that plans or
    simulates under ``max_tokens`` accepts (the CLI's ``optimize``, ``compare`` and ``report``
    alike; packing could not place them, and a bucket would run each as a batch over the
    budget).  Nothing to check under ``batch_size``.

    Examples
    --------
    >>> from analysis.lengths import LengthHistogram
    >>> check_budget(LengthHistogram.from_lengths([3, 9, 12, 12]), BatchRule(max_tokens=10))
    Traceback (most recent call last):
    ...
    ValueError: 2 samples are longer than max_tokens = 10 (the longest has 12 tokens): raise
    max_tokens or clip the lengths at max_len (--max-tokens, --max-len)
    """
    budget = rule.max_tokens
    if budget is None or hist.max <= budget:
        return
    n = sum(hist.counts[hist.lengths > budget].tolist())
    raise ValueError(
        f"{n:,} sample{'s are' if n != 1 else ' is'} longer than max_tokens = {budget:,} (the longest "
        f"has {hist.max:,} tokens): raise max_tokens or clip the lengths at max_len (--max-tokens, --max-len)"
    )


def as_rule(
    rule: BatchRule | None = None,
    *,
    batch_size: int | None = None,
    max_tokens: int | None = None,
    pad_to_multiple_of: int | None = None,
) -> BatchRule:
    """The :class:`BatchRule` of a public call: ``rule`` as given, or built from the keyword
    shorthand (``batch_size=`` / ``max_tokens=`` / ``pad_to_multiple_of=``), never both.
    Unlike :meth:`BatchRule.resolve` there is no default: the engine needs a rule.

    Examples
    --------
    >>> as_rule(batch_size=4)
    BatchRule(batch_size=4, max_tokens=None, pad_to_multiple_of=1)
    """
    if rule is not None:
        if not isinstance(rule, BatchRule):
            raise ValueError(f"rule must be a BatchRule, got {type(rule).__name__}")
        if batch_size is not None or max_tokens is not None or pad_to_multiple_of is not None:
            raise ValueError("give rule= or batch_size/max_tokens/pad_to_multiple_of, not both")
        return rule
    return BatchRule(batch_size, max_tokens, 1 if pad_to_multiple_of is None else pad_to_multiple_of)
