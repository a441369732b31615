"""Pack or pad, in sentences computed from a :class:`~analysis.answers.pack_or_pad.PackOrPad`: which
wins on your hardware and by how much, and when the answer flips (notebook 04, the report).
Pure: a result in, a short Markdown string out; no number of the bundled data in fixed prose.
"""

from __future__ import annotations

import pandas as pd

from analysis.answers.pack_or_pad import PackOrPad
from analysis.tables import format_count

__all__ = ["describe_pack_or_pad"]


def _size(row: pd.Series) -> str:
    if pd.notna(row["batch_size"]):
        return f"batch size {format_count(row['batch_size'])}"
    return f"max_tokens {format_count(row['max_tokens'])}"


def describe_pack_or_pad(result: PackOrPad) -> str:
    """Which wins here (the fastest packer against the fastest padded strategy), by how much
    in tokens/s and seconds per epoch, and the nearest batch size (or token budget) of the
    sweep at which the other side wins.

    Examples
    --------
    >>> import numpy as np
    >>> from analysis.batching import BatchRule
    >>> table = pd.DataFrame({"packed": [False, True], "tokens_per_s": [1000.0, 1500.0],
    ...                       "seconds": [60.0, 40.0]}, index=["bucketed", "packing_bfd"])
    >>> sweep = pd.DataFrame({"batch_size": [2, 8], "max_tokens": [None, None],
    ...                       "token_budget": [2048, 8192], "packing_wins": [False, True]})
    >>> sweep.attrs["rule_budget"] = 8192
    >>> print(describe_pack_or_pad(PackOrPad(table, sweep, BatchRule(batch_size=8))))
    Here packing wins: packing_bfd runs at 1,500 tokens/s, 1.50x bucketed (1,000 tokens/s, the
    fastest padded strategy), 40 s an epoch instead of 60 s. The answer flips at batch size 2
    (rows of 2,048 tokens): there the model puts padding ahead.
    """
    tps = result.table["tokens_per_s"].astype(float)
    sec = result.table["seconds"].astype(float)
    pack, pad = result.best_packed, result.best_padded
    win, lose = (pack, pad) if result.packing_wins else (pad, pack)
    side = "packing" if result.packing_wins else "padding"
    text = (
        f"Here {side} wins: {win} runs at {format_count(tps[win])} tokens/s, "
        f"{result.speedup:.2f}x {lose} ({format_count(tps[lose])} tokens/s, the "
        f"fastest {'padded strategy' if result.packing_wins else 'packer'}), "
        f"{format_count(sec[win])} s an epoch instead of {format_count(sec[lose])} s."
    )
    flip = result.flip
    if flip is None:
        return text + " Over batch sizes 1/64 to 64 times yours, the model never flips the answer."
    other = "padding" if result.packing_wins else "packing"
    return text + (
        f" The answer flips at {_size(flip)} (rows of {format_count(flip['token_budget'])} tokens): "
        f"there the model puts {other} ahead."
    )
