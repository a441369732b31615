"""Whether batches are sized for a few outliers: the one rule every face applies before it
suggests ``--max-len`` (:func:`heavy_tail`; its sentence is
:func:`analysis.narrative.tail.describe_heavy_tail`).

The rule: the longest sample is more than :data:`TAIL_RATIO` times the 99th percentile of the
lengths, or under ``batch_size`` a full batch of the longest sample holds more than
:data:`BUDGET_LIMIT` tokens (the budget the token strategies then take).  Either way a
trainer's memory is sized for samples that 1 % of the data does not reach, or for a batch no
accelerator holds.  (A ``max_tokens`` the user gave is theirs: clipping would not change it.)
"""

from __future__ import annotations

from dataclasses import dataclass

from analysis.batching import BatchRule, round_up
from analysis.lengths import LengthHistogram

__all__ = ["BUDGET_LIMIT", "TAIL_RATIO", "HeavyTail", "heavy_tail"]

#: The longest sample over the 99th percentile beyond which the tail is heavy.
TAIL_RATIO = 4
#: Tokens per batch beyond which a batch is too large for any accelerator's memory.
BUDGET_LIMIT = 1_000_000


@dataclass(frozen=True, kw_only=True)
class HeavyTail:
    """The facts behind a ``--max-len`` hint: the longest sample, the 99th percentile (the
    ``max_len`` suggested), and the tokens of a full batch of the longest sample under
    ``batch_size`` (0 under ``max_tokens``)."""

    longest: int
    p99: int
    batch_tokens: int

    @property
    def too_long(self) -> bool:
        """The longest sample is beyond :data:`TAIL_RATIO` times the 99th percentile."""
        return self.longest > TAIL_RATIO * self.p99

    @property
    def too_large(self) -> bool:
        """A full batch of the longest sample (under ``batch_size``) is over :data:`BUDGET_LIMIT`."""
        return self.batch_tokens > BUDGET_LIMIT

    @property
    def ratio(self) -> float:
        """The longest sample over the 99th percentile."""
        return self.longest / max(self.p99, 1)


def heavy_tail(hist: LengthHistogram, rule: BatchRule) -> HeavyTail | None:
    """The heavy tail of ``hist`` under ``rule`` (see the module), or ``None``.

    Examples
    --------
    >>> h = LengthHistogram.from_counts([100, 200, 50_000], [990, 9, 1])
    >>> heavy_tail(h, BatchRule(batch_size=8))
    HeavyTail(longest=50000, p99=100, batch_tokens=400000)
    >>> short = LengthHistogram.from_lengths([100, 120, 300])
    >>> heavy_tail(short, BatchRule(batch_size=8)) is None
    True
    >>> heavy_tail(short, BatchRule(max_tokens=2_000_000)) is None  # the user's own budget
    True
    >>> heavy_tail(LengthHistogram.from_lengths([90_000] * 99 + [100_000]), BatchRule(batch_size=16))
    HeavyTail(longest=100000, p99=90000, batch_tokens=1600000)
    """
    longest = int(hist.max)
    p99 = int(hist.quantile(0.99))
    # under max_tokens the budget is the user's own: only the tail counts
    tokens = 0 if rule.batch_size is None else rule.batch_size * round_up(longest, rule.pad_to_multiple_of)
    tail = HeavyTail(longest=longest, p99=p99, batch_tokens=tokens)
    return tail if tail.too_long or tail.too_large else None
