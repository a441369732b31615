"""Shared figure helpers."""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure

__all__ = ["save_figure"]


def save_figure(fig: Figure, name: str, figures_dir: str | Path,
                formats: tuple[str, ...] = ("png",)) -> list[Path]:
    """Save ``fig`` as ``figures_dir/name.<fmt>`` for each format; return the paths.

    The folder is created when missing.  PNGs are written at 150 dpi.
    """
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
