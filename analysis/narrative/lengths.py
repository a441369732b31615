"""Sentences about the lengths themselves: which lengths a table describes, what they look like,
what a shuffle and sorted batches waste on them, and what clipping at ``max_len`` cuts
(notebook 01, the report)."""

from __future__ import annotations

from analysis.answers.distribution import DistributionFacts
from analysis.lengths import LengthHistogram
from analysis.tables import format_percent

__all__ = ["lengths_label", "describe_distribution", "describe_clipping"]


def lengths_label(hist: LengthHistogram, max_len: int | None, *, clipped: bool = False) -> str:
    """Which lengths a table, figure or sentence describes: ``hist`` (the lengths as in the
    file) unclipped, or (``clipped``) truncated at ``max_len`` as the trainer sees them; one
    label for both when no sample is longer than ``max_len`` (or none is given).

    Examples
    --------
    >>> h = LengthHistogram.from_lengths([2, 5, 9])
    >>> lengths_label(h, 4)
    'unclipped, as in the file (the trainer clips at max_len = 4)'
    >>> lengths_label(h, 4, clipped=True)
    'clipped at max_len = 4, as the trainer sees them'
    >>> lengths_label(h, 9) == lengths_label(h, 9, clipped=True)
    True
    >>> lengths_label(h, 9)
    'as in the file: no sample is longer than max_len = 9, so the trainer sees them unclipped'
    """
    if max_len is None:
        return "as in the file (no max_len: the trainer sees them unclipped)"
    if hist.max <= max_len:
        return (
            f"as in the file: no sample is longer than max_len = {max_len:,}, so the trainer "
            "sees them unclipped"
        )
    if clipped:
        return f"clipped at max_len = {max_len:,}, as the trainer sees them"
    return f"unclipped, as in the file (the trainer clips at max_len = {max_len:,})"


def _lengths_clause(hist: LengthHistogram) -> str:
    return (
        f"{hist.n_samples:,} samples of {hist.min:,}..{hist.max:,} tokens (median "
        f"{hist.quantile(0.5):,}, mean {hist.mean:,.0f}); the longest 1% of samples hold "
        f"{format_percent(hist.tail_token_share(0.01), 'prose')} of the tokens"
    )


def describe_distribution(facts: DistributionFacts) -> str:
    """The lengths in one sentence, and what a full shuffle and sorted batches waste (and,
    when some were, how many zero-length samples were dropped before counting): the facts of
    :func:`analysis.answers.distribution.distribution_facts`.

    With a ``max_len`` that truncates some samples, the sentence says which numbers are of the
    unclipped lengths and which of the clipped ones the trainer sees (the padding always is:
    that is what the trainer pads); the numbers are those of
    :meth:`~analysis.LengthHistogram.summary` for each.

    Examples
    --------
    >>> from analysis.answers.distribution import distribution_facts
    >>> from analysis.batching import BatchRule
    >>> h = LengthHistogram.from_lengths([1, 2, 3, 4, 50, 60, 70, 80])
    >>> print(describe_distribution(distribution_facts(h, BatchRule(2))))
        8 samples of 1..80 tokens (median 4, mean 34); the longest 1% of samples hold 29.6% of the
    tokens. A full random shuffle with batch_size 2 wastes 37.0% of every padded batch here
    (expected efficiency 63.0%); sorted batches waste 7.5%.
    >>> print(describe_distribution(distribution_facts(h, BatchRule(2), max_len=60)))
        Unclipped, as in the file: 8 samples of 1..80 tokens (median 4, mean 34); the longest 1% of
    samples hold 29.6% of the tokens. Clipped at max_len = 60, as the trainer sees them: 8 samples
    of 1..60 tokens (median 4, mean 30); the longest 1% of samples hold 25.0% of the tokens. A full
    random shuffle with batch_size 2 wastes 35.4% of every padded batch here (expected efficiency
    64.6%); sorted batches waste 4.8%.
    >>> describe_distribution(distribution_facts(h, BatchRule(2), max_len=80)).split(". ")[1]
    'No sample is longer than max_len = 80: the trainer sees them unclipped'
    >>> describe_distribution(distribution_facts(h, BatchRule(2), zero_length_dropped=1200))[-57:]
    '(1,200 zero-length samples were dropped before counting.)'
    """
    hist, seen, max_len = facts.hist, facts.seen, facts.max_len
    shuffle, ordered = facts.shuffle_efficiency, facts.sorted_efficiency
    if max_len is None or seen == hist:
        text = f"{_lengths_clause(hist)}."
        if max_len is not None:
            text += f" No sample is longer than max_len = {max_len:,}: the trainer sees them unclipped."
    else:
        text = (
            f"Unclipped, as in the file: {_lengths_clause(hist)}. Clipped at max_len = "
            f"{max_len:,}, as the trainer sees them: {_lengths_clause(seen)}."
        )
    text += (
        f" A full random shuffle with {facts.rule.text} wastes {format_percent(1 - shuffle, 'prose')} "
        f"of every padded batch here (expected efficiency {format_percent(shuffle, 'prose')}); sorted "
        f"batches waste {format_percent(1 - ordered, 'prose')}."
    )
    if facts.one_batch_size is not None:
        text += (
            f" Both take one batch size, {facts.one_batch_size:,} (the longest sample must fit the "
            f"budget): their steps are {format_percent(facts.one_budget_fill or 0.0, 'prose')} real tokens."
        )
    if facts.zero_length_dropped:
        text += f" ({facts.zero_length_dropped:,} zero-length samples were dropped before counting.)"
    return text


def describe_clipping(hist: LengthHistogram, max_len: int) -> str:
    """What truncation at ``max_len`` does to these lengths (``hist``: as in the file,
    unclipped; the shares are of its samples and tokens).

    Examples
    --------
    >>> h = LengthHistogram.from_lengths([2, 5, 9])
    >>> describe_clipping(h, 9)
    'No sample in the file is longer than max_len = 9 (the longest has 9): clipping changes nothing.'
    >>> print(describe_clipping(h, 4))
        Of the lengths as in the file (unclipped), clipping at max_len = 4 truncates 2 samples (66.7%)
    and removes 6 tokens (37.5% of all).
    """
    s = hist.clip_summary(max_len)
    if s["samples_clipped"] == 0:
        return (
            f"No sample in the file is longer than max_len = {s['max_len']:,} (the longest has "
            f"{hist.max:,}): clipping changes nothing."
        )
    samples, tokens = (
        format_percent(s[k], "prose") for k in ("share_samples_clipped", "share_tokens_removed")
    )
    return (
        f"Of the lengths as in the file (unclipped), clipping at max_len = {s['max_len']:,} "
        f"truncates {s['samples_clipped']:,} samples ({samples}) "
        f"and removes {s['tokens_removed']:,} tokens ({tokens} of all)."
    )
