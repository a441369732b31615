"""Whether batches are sized for a few outliers: the one rule every face applies before it
suggests ``--max-len`` (:func:`heavy_tail`; its sentence is
:func:`analysis.narrative.tail.describe_heavy_tail`).

The rule: the longest sample is more than :data:`TAIL_RATIO` times the 99th percentile of the
lengths, or a batch holds more than :data:`BUDGET_LIMIT` tokens (a full batch of the longest
sample under ``batch_size``, or ``max_tokens``).  Either way a trainer's memory is sized for
samples that 1 % of the data does not reach, or for a batch no accelerator holds.
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
    ``max_len`` suggested), and the tokens of the largest batch under the rule."""

    longest: int
    p99: int
    batch_tokens: int

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
    >>> heavy_tail(short, BatchRule(max_tokens=2_000_000)).batch_tokens
    2000000
    """
    longest = int(hist.max)
    p99 = int(hist.quantile(0.99))
    tokens = int(rule.token_budget(round_up(longest, rule.pad_to_multiple_of)))
    if longest > TAIL_RATIO * p99 or tokens > BUDGET_LIMIT:
        return HeavyTail(longest=longest, p99=p99, batch_tokens=tokens)
    return None
