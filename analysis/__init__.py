"""The padding workbench: how much padding your batching costs, and where bucket edges go.

The engine (everything named here) is NumPy/pandas/SciPy: it never imports matplotlib,
Jupyter or a progress bar.  Figures are in :mod:`analysis.plots`, sentences about the data in
:mod:`analysis.narrative`, trainer configs in :mod:`analysis.exports`, the faces in
:mod:`analysis.cli`, :mod:`analysis.report` and :mod:`analysis.explorer` (``analysis.explore``,
loaded on first use).

One name per question (the README's table): the padding of given edges is
:func:`evaluate_edges`, of the strategies with a closed form :func:`expected_strategies`, the
K to use :func:`recommend`.  The vocabulary helpers (``check_edges``, ``cover_edges``,
``parse_edges``) stay in :mod:`analysis.batching`, the case's published numbers in
:mod:`analysis.case`, the single-strategy estimates (``expected_padding``, ``random_padding``,
``sorted_padding``) in :mod:`analysis.padding.waste`.
"""

from typing import Any

from analysis._version import __version__
from analysis.answers.frontier import frontier
from analysis.answers.recommendation import Recommendation, case_plans, recommend
from analysis.answers.throughput import predict_strategy_throughput, sweep_throughput
from analysis.batching import BatchRule
from analysis.lengths import LengthHistogram
from analysis.loaders import load_lengths, load_step_times, save_histogram
from analysis.measure import measure_lengths
from analysis.optimize import METHODS, BucketPlan, evaluate_edges, optimize_edges, sweep_bucket_counts
from analysis.padding.waste import WasteEstimate, expected_strategies
from analysis.sampler import BucketedBatchSampler
from analysis.simulation.epochs import SimulationResult, compare_strategies, simulate
from analysis.simulation.strategies import STRATEGIES
from analysis.tables import format_value, tidy
from analysis.timing.proportional import predict_throughput
from analysis.timing.step_time import StepTimeModel, calibration_shapes, measure_step_times

__all__ = [
    # the data
    "LengthHistogram",
    "load_lengths",
    "save_histogram",
    "measure_lengths",
    # the vocabulary
    "BatchRule",
    "METHODS",
    "STRATEGIES",
    # exact padding
    "WasteEstimate",
    "evaluate_edges",
    "expected_strategies",
    # edges
    "BucketPlan",
    "optimize_edges",
    "sweep_bucket_counts",
    # the recommendation
    "Recommendation",
    "recommend",
    "case_plans",
    "frontier",
    # simulation
    "SimulationResult",
    "simulate",
    "compare_strategies",
    # throughput
    "predict_throughput",
    "StepTimeModel",
    "calibration_shapes",
    "measure_step_times",
    "load_step_times",
    "predict_strategy_throughput",
    "sweep_throughput",
    # training
    "BucketedBatchSampler",
    # tables for people
    "tidy",
    "format_value",
    "__version__",
]  # plus the lazy `explore` (it loads ipywidgets) and the modules `exports` and `plots`


#: Face modules reachable as ``analysis.<name>`` after a plain ``import analysis`` (the README's
#: ``analysis.exports.to_lhotse(plan)``), imported on first use: ``import analysis`` loads no
#: matplotlib.
_LAZY_MODULES = ("exports", "plots")


def __getattr__(name: str) -> Any:
    """``analysis.explore``, ``analysis.exports`` and ``analysis.plots``, imported on first use.

    Examples
    --------
    >>> import analysis
    >>> plan = analysis.optimize_edges(analysis.LengthHistogram.from_lengths([3, 5, 8, 20]), 2, batch_size=2)
    >>> analysis.exports.to_lhotse(plan)["duration_bins"]
    [8.5]
    """
    if name == "explore":
        from analysis.explorer import explore

        return explore
    if name in _LAZY_MODULES:
        import importlib

        return importlib.import_module(f"analysis.{name}")
    raise AttributeError(f"module 'analysis' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The module's names and the lazy ones, so tab completion offers them."""
    return sorted({*globals(), "explore", *_LAZY_MODULES})
