"""Where the project keeps things: one place for every path (cookiecutter-data-science style).

Paths are resolved from this file's location, so they point into the checkout when the
package is installed in editable mode (``pip install -e .``), which is how the Makefile and
``environment.yml`` install it.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["PROJECT_ROOT", "DATA_DIR", "BUNDLED_DATA", "NOTEBOOKS_DIR", "REPORTS_DIR", "FIGURES_DIR"]

PROJECT_ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = PROJECT_ROOT / "data"
#: The synthetic, case-like length histogram every notebook and ``make report`` use by default.
BUNDLED_DATA = DATA_DIR / "case_lengths.csv"
NOTEBOOKS_DIR = PROJECT_ROOT / "notebooks"
REPORTS_DIR = PROJECT_ROOT / "reports"
FIGURES_DIR = REPORTS_DIR / "figures"
