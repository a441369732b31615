"""Pack or pad in one figure (from :func:`analysis.answers.pack_or_pad.pack_or_pad`'s ``table`` and
``sweep``): predicted tokens/s and seconds per epoch of every padded and packed strategy, and
the best of each side against the batch size.  No computation here beyond picking columns."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from analysis.plots._common import GREY, OKABE_ITO, format_count

__all__ = ["plot_pack_or_pad"]

# Okabe-Ito: padded strategies blue, packers vermillion (hatched too, for greyscale).
_PADDED, _PACKED = OKABE_ITO["blue"], OKABE_ITO["vermillion"]


def plot_pack_or_pad(
    table: pd.DataFrame, sweep: pd.DataFrame, rule_budget: int, *, title: str | None = None
) -> Figure:
    """Left: predicted useful tokens/s of each strategy (bars, fastest on top; packers
    hatched), labelled with seconds per epoch.  Right: the fastest exact padded strategy and
    FFD packing against the batch size (or token budget) of the sweep, log axes, yours marked.

    ``table`` needs ``packed``, ``tokens_per_s`` and ``seconds``; ``sweep`` the columns of
    :class:`~analysis.answers.pack_or_pad.PackOrPad`'s sweep.
    """
    fig = Figure(figsize=(11, max(3.6, 0.42 * len(table) + 1.6)), layout="constrained")
    left, right = fig.subplots(1, 2, width_ratios=[1.25, 1])
    order = table.sort_values("tokens_per_s")
    y = np.arange(len(order))
    packed = order["packed"].to_numpy(dtype=bool)
    bars = left.barh(
        y, order["tokens_per_s"], color=np.where(packed, _PACKED, _PADDED), edgecolor="white", height=0.7
    )
    for bar, is_packed in zip(bars, packed, strict=True):
        if is_packed:
            bar.set_hatch("//")
    top = float(order["tokens_per_s"].max())
    for yi, (tps, sec) in enumerate(zip(order["tokens_per_s"], order["seconds"], strict=True)):
        left.text(
            tps + 0.01 * top,
            yi,
            f"{format_count(tps)}/s · {format_count(sec)} s/epoch",
            va="center",
            fontsize=8,
        )
    left.set_yticks(y, order.index.tolist())
    left.set_xlim(0, top * 1.45)
    left.xaxis.set_major_formatter(FuncFormatter(lambda v, _: format_count(v)))
    left.set_xlabel("predicted useful tokens/s (label: tokens/s · seconds per epoch)")
    left.set_title("padded (solid) and packed (hatched) strategies", fontsize=10)

    by_batch = sweep["batch_size"].notna().all()
    x = sweep["batch_size" if by_batch else "max_tokens"].to_numpy(dtype=float)
    right.plot(x, sweep["padded_tokens_per_s"], "o-", color=_PADDED, label="best padded (exact)")
    right.plot(x, sweep["packed_tokens_per_s"], "s--", color=_PACKED, label="packing (FFD rows)")
    here = sweep["token_budget"] == rule_budget
    if here.any():
        right.axvline(float(x[np.flatnonzero(here.to_numpy())[0]]), color=GREY, lw=0.8, ls=":")
        right.text(
            float(x[np.flatnonzero(here.to_numpy())[0]]),
            0.02,
            " yours",
            transform=right.get_xaxis_transform(),
            color=GREY,
            fontsize=8,
        )
    right.set_xscale("log", base=2)
    right.set_yscale("log")
    right.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    right.yaxis.set_minor_formatter(NullFormatter())
    right.yaxis.set_major_formatter(FuncFormatter(lambda v, _: format_count(v)))
    right.xaxis.set_major_formatter(FuncFormatter(lambda v, _: format_count(v)))
    right.set_xlabel("batch size (samples)" if by_batch else "max_tokens (tokens per step)")
    right.set_ylabel("predicted useful tokens/s")
    right.set_title("when the answer flips", fontsize=10)
    right.legend(fontsize=8, loc="best")
    if title:
        fig.suptitle(title)
    return fig
