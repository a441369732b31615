"""The one-line hint to clip a heavy tail with ``--max-len`` (:func:`describe_heavy_tail`),
on every face that builds batches (``optimize``, ``compare``, ``frontier``, ``report``)."""

from __future__ import annotations

from analysis.answers.tail import BUDGET_LIMIT, HeavyTail

__all__ = ["describe_heavy_tail"]


def describe_heavy_tail(tail: HeavyTail) -> str:
    """Why the batches are sized for a few outliers, and the ``--max-len`` to try, in one line.

    Examples
    --------
    >>> print(describe_heavy_tail(HeavyTail(longest=50_000, p99=200, batch_tokens=400_000)))
    ... # doctest: +NORMALIZE_WHITESPACE
    the longest sample (50,000 tokens) is 250.0x the 99th percentile (200): batches are sized
    for a few outliers; try --max-len 200 (summary --max-len shows what it cuts)

    Where the 99th percentile is the longest sample itself (a handful of samples), no length is
    offered: clipping there would cut nothing.

    >>> print(describe_heavy_tail(HeavyTail(longest=2**40, p99=2**40, batch_tokens=2**43)))
    ... # doctest: +NORMALIZE_WHITESPACE
    a full batch of the longest sample holds 8,796,093,022,208 tokens (over 1,000,000); --max-len
    clips the longest samples (summary --max-len shows what it cuts)
    """
    reasons = []
    if tail.too_long:
        reasons.append(
            f"the longest sample ({tail.longest:,} tokens) is {tail.ratio:,.1f}x the 99th percentile "
            f"({tail.p99:,}): batches are sized for a few outliers"
        )
    if tail.too_large:
        reasons.append(
            f"a full batch of the longest sample holds {tail.batch_tokens:,} tokens (over {BUDGET_LIMIT:,})"
        )
    if tail.p99 >= tail.longest:  # too few samples for a percentile below the longest
        clip = "--max-len clips the longest samples"
        return f"{'; '.join(reasons)}; {clip} (summary --max-len shows what it cuts)"
    return f"{'; '.join(reasons)}; try --max-len {tail.p99:,} (summary --max-len shows what it cuts)"
