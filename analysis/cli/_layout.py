"""Fitting the CLI's text to the terminal: its width (:func:`terminal_width`), tables split
into blocks of columns that fit it (:func:`frame_text`), and sentences wrapped to it
(:func:`wrap`).

Every cell is formatted by :func:`analysis.tables.tidy` (the one number formatter); this module
only decides where the lines break.
"""

from __future__ import annotations

import shutil
import textwrap

import pandas as pd

from analysis.tables import tidy

__all__ = ["frame_text", "terminal_width", "wrap"]

#: Narrower than this, a table is not split further (a block holds at least one column).
MIN_WIDTH = 40


def terminal_width() -> int:
    """The width to print in: ``shutil.get_terminal_size()`` (``$COLUMNS`` first, then the
    terminal, 80 when neither says), at least :data:`MIN_WIDTH`."""
    return max(MIN_WIDTH, shutil.get_terminal_size().columns)


def _block_lines(frame: pd.DataFrame) -> list[str]:
    """``frame`` (already formatted) as lines, the index name folded into the header line
    when it fits there, trailing blanks stripped."""
    with pd.option_context("display.max_colwidth", 60):
        lines = [line.rstrip() for line in frame.to_string().splitlines()]
    name = frame.index.name
    if name is not None and len(lines) > 2 and lines[1].strip() == str(name):
        label = str(name)
        header = lines[0]
        if header[: len(label) + 1].strip() == "":
            lines = [label + header[len(label) :], *lines[2:]]
    return lines


def frame_text(frame: pd.DataFrame, width: int | None = None) -> str:
    """The frame with every cell formatted by :func:`analysis.tables.tidy`, right-aligned, in
    blocks of whole columns, each block repeating the index and no line longer than ``width``
    (default :func:`terminal_width`) unless one column alone is wider.

    Examples
    --------
    >>> frame = pd.DataFrame({"samples": [1200, 30], "efficiency": [0.7312, 0.9]},
    ...                      index=pd.Index(["a", "b"], name="bucket"))
    >>> print(frame_text(frame, width=80))
    bucket samples efficiency
    a        1,200     73.12%
    b           30     90.00%
    >>> print(frame_text(frame, width=16))
    bucket samples
    a        1,200
    b           30
    <BLANKLINE>
    bucket efficiency
    a         73.12%
    b         90.00%
    """
    width = terminal_width() if width is None else width
    shown = tidy(frame)
    blocks: list[list[str]] = []
    start = 0
    n = shown.shape[1]
    if n == 0:
        return "\n".join(_block_lines(shown))
    while start < n:
        stop = start + 1
        lines = _block_lines(shown.iloc[:, start:stop])
        while stop < n:
            wider = _block_lines(shown.iloc[:, start : stop + 1])
            if max(map(len, wider)) > width:
                break
            stop, lines = stop + 1, wider
        blocks.append(lines)
        start = stop
    return "\n\n".join("\n".join(lines) for lines in blocks)


def wrap(text: str, width: int | None = None, *, indent: str = "", subsequent: str | None = None) -> str:
    """``text`` wrapped at spaces to ``width`` (default :func:`terminal_width`); a word longer
    than the line (a path) is kept whole.

    Examples
    --------
    >>> print(wrap("Strategies on the optimal edges for 6 buckets (batch_size 8, 1 epoch)", 40))
    Strategies on the optimal edges for 6
    buckets (batch_size 8, 1 epoch)
    """
    return textwrap.fill(
        text,
        width=terminal_width() if width is None else width,
        initial_indent=indent,
        subsequent_indent=indent if subsequent is None else subsequent,
        break_long_words=False,
        break_on_hyphens=False,
    )
