"""Shared figure helpers."""

from __future__ import annotations

import os
from pathlib import Path

from matplotlib.figure import Figure

__all__ = ["save_figure"]


#: Environment variable naming the formats :func:`save_figure` writes by default, e.g.
#: ``"png,svg"`` (``analysis.report`` sets it so a report has every figure in both).
FIGURE_FORMATS_ENV = "PADDING_FIGURE_FORMATS"


def _default_formats() -> tuple[str, ...]:
    """Formats from ``PADDING_FIGURE_FORMATS`` (comma-separated), else ``("png",)``."""
    text = os.environ.get(FIGURE_FORMATS_ENV, "")
    formats = tuple(f.strip().lower().lstrip(".") for f in text.split(",") if f.strip())
    return formats or ("png",)


def save_figure(fig: Figure, name: str, figures_dir: str | Path,
                formats: tuple[str, ...] | None = None) -> list[Path]:
    """Save ``fig`` as ``figures_dir/name.<fmt>`` for each format; return the paths.

    The folder is created when missing.  PNGs are written at 150 dpi.  ``formats=None``
    (the default) means the ``PADDING_FIGURE_FORMATS`` environment variable
    (comma-separated, e.g. ``png,svg``), or PNG alone when it is unset.

    Examples
    --------
    >>> import tempfile
    >>> from matplotlib.figure import Figure
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     [p.name for p in save_figure(Figure(), "empty", folder, formats=("png", "svg"))]
    ['empty.png', 'empty.svg']
    """
    if formats is None:
        formats = _default_formats()
    folder = Path(figures_dir)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in formats:
        path = folder / f"{name}.{fmt}"
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
