"""The report's folders: the inputs resolved and checked, the output folder prepared."""

from __future__ import annotations

import os
from pathlib import Path

from analysis.lengths import LengthHistogram
from analysis.loaders import load_step_times, save_histogram
from analysis.paths import NOTEBOOKS_DIR, REPORT_FIGURES, REPORT_HISTOGRAM
from analysis.report._context import _Run
from analysis.report._notebooks import _notebooks, report_notebooks


def _resolve_inputs(
    out_dir: str | os.PathLike[str],
    notebooks_dir: str | os.PathLike[str] | None,
    step_times: str | os.PathLike[str] | None,
) -> _Run:
    """Absolute folders, the step-time file checked, the notebooks to run and those skipped."""
    out = Path(out_dir).resolve()
    nb_dir = Path(notebooks_dir if notebooks_dir is not None else NOTEBOOKS_DIR).resolve()
    times_path = None
    if step_times is not None:
        times_path = Path(step_times).resolve()
        load_step_times(times_path)  # a bad file fails here, in one line, not in a notebook
    notebooks = _notebooks(nb_dir, times_path is not None)
    skipped = [p.name for p in report_notebooks(nb_dir, step_times=True) if p not in notebooks]
    if out == nb_dir:
        raise ValueError(
            f"{out}: the output folder is the notebooks folder; the executed "
            "copies would overwrite the reference notebooks (choose another --out)"
        )
    return _Run(out, nb_dir, notebooks, skipped, times_path)


def _prepare_output(out: Path, raw: LengthHistogram) -> tuple[Path, Path]:
    """Create ``out`` and its figures folder, and write the histogram every notebook reads:
    the figures folder and the CSV."""
    out.mkdir(parents=True, exist_ok=True)
    figures = out / REPORT_FIGURES
    figures.mkdir(exist_ok=True)
    (out / REPORT_HISTOGRAM).parent.mkdir(parents=True, exist_ok=True)
    return figures, save_histogram(raw, out / REPORT_HISTOGRAM)


def _new_figures(figures: Path, started: float) -> list[Path]:
    """The figures written since ``started`` (sorted; older files in the folder are stale)."""
    return sorted(p for p in figures.iterdir() if p.is_file() and p.stat().st_mtime >= started)
