"""Where the project keeps things: one place for every path (cookiecutter-data-science style).

Paths are resolved from this file's location, so they point into the checkout when the
package is installed in editable mode (``pip install -e .``), which is how the Makefile and
``environment.yml`` install it.  Inside a report's folder (``--out``; ``make report`` writes
into :data:`REPORTS_DIR`), the figures go to :data:`REPORT_FIGURES` and the histogram every
notebook reads to :data:`REPORT_HISTOGRAM`.

Examples
--------
>>> FIGURES_DIR == REPORTS_DIR / REPORT_FIGURES
True
"""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "PROJECT_ROOT",
    "DATA_DIR",
    "BUNDLED_DATA",
    "NOTEBOOKS_DIR",
    "REPORTS_DIR",
    "FIGURES_DIR",
    "REPORT_FIGURES",
    "REPORT_HISTOGRAM",
    "REPORT_MARKER",
]

PROJECT_ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = PROJECT_ROOT / "data"
#: The synthetic, case-like length histogram every notebook and ``make report`` use by default.
BUNDLED_DATA = DATA_DIR / "case_lengths.csv"
NOTEBOOKS_DIR = PROJECT_ROOT / "notebooks"
#: A report's figures folder and histogram CSV, relative to the report's folder.
REPORT_FIGURES = Path("figures")
REPORT_HISTOGRAM = Path("data") / "lengths.csv"
#: The file that marks a folder as a report's: a report replaces only a folder holding it, and
#: the path expander skips the files of such a folder below the folder or glob it expands.
REPORT_MARKER = ".padding-report"
#: The folder ``make report`` writes (the Makefile's ``REPORT_DIR``), and its figures.
REPORTS_DIR = PROJECT_ROOT / "reports"
FIGURES_DIR = REPORTS_DIR / REPORT_FIGURES
