"""Shared figure helpers."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib
from matplotlib.figure import Figure

__all__ = ["save_figure"]


def save_figure(fig: Figure, name: str, figures_dir: str | Path | None,
                formats: Sequence[str] = ("png",)) -> list[Path]:
    """Save ``fig`` as ``figures_dir/name.<fmt>`` for each format; return the paths.

    ``figures_dir=None`` saves nothing (a notebook shows its figures without writing them
    unless a folder is given).  The folder is created when missing.  PNGs are written at
    150 dpi; files are byte-for-byte reproducible (no dates, versions or random SVG ids).

    Examples
    --------
    >>> import tempfile
    >>> from matplotlib.figure import Figure
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     [p.name for p in save_figure(Figure(), "empty", folder, formats=("png", "svg"))]
    ['empty.png', 'empty.svg']
    >>> save_figure(Figure(), "empty", None)
    []
    """
    if figures_dir is None:
        return []
    if isinstance(formats, str):
        formats = [f for f in formats.split(",") if f]
    folder = Path(figures_dir)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in formats:
        fmt = fmt.strip().lower().lstrip(".")
        path = folder / f"{name}.{fmt}"
        with matplotlib.rc_context({"svg.hashsalt": name}):
            fig.savefig(path, dpi=150, bbox_inches="tight", metadata=_stable_metadata(fmt))
        paths.append(path)
    return paths


def _stable_metadata(fmt: str) -> dict[str, None] | None:
    """Drop creation dates and software versions so saved files are reproducible."""
    if fmt == "png":
        return {"Software": None}
    if fmt == "svg":
        return {"Date": None, "Creator": None}
    if fmt == "pdf":
        return {"CreationDate": None, "Producer": None, "Creator": None}
    return None
