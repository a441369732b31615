"""Figures: functions that take results and return a ``matplotlib.figure.Figure``.

Figures are made with ``Figure()`` (not pyplot), so a notebook cell that ends with one
shows it exactly once, and :func:`save_figure` writes the same object for a design review.
No computation lives here: every number comes from the engine.
"""

from analysis.plots import _common, buckets, distribution, edges, frontier, packing, strategies, throughput
from analysis.plots._common import *  # noqa: F403
from analysis.plots.buckets import *  # noqa: F403
from analysis.plots.distribution import *  # noqa: F403
from analysis.plots.edges import *  # noqa: F403
from analysis.plots.frontier import *  # noqa: F403
from analysis.plots.packing import *  # noqa: F403
from analysis.plots.strategies import *  # noqa: F403
from analysis.plots.throughput import *  # noqa: F403

__all__ = [
    *_common.__all__,
    *distribution.__all__,
    *strategies.__all__,
    *buckets.__all__,
    *edges.__all__,
    *throughput.__all__,
    *frontier.__all__,
    *packing.__all__,
]
