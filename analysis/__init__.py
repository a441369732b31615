"""The padding workbench: how much padding your batching costs, and where bucket edges go.

The engine (everything named here) is NumPy/pandas/SciPy: it never imports matplotlib,
Jupyter or a progress bar.  Figures are in :mod:`analysis.plots`, trainer configs in
:mod:`analysis.exports`, the faces in :mod:`analysis.cli`, :mod:`analysis.report` and
:mod:`analysis.explorer` (``analysis.explore``, loaded on first use).
"""

from typing import Any

from analysis._version import __version__
from analysis.batching import BatchRule, check_edges, cover_edges, parse_edges
from analysis.case import CASE_EDGES, CASE_GEOMETRIC_EDGES
from analysis.lengths import LengthHistogram
from analysis.loaders import load_lengths, save_histogram
from analysis.measure import measure_lengths
from analysis.optimize import (
    METHODS,
    BucketPlan,
    evaluate_edges,
    optimize_edges,
    recommend_n_buckets,
    sweep_bucket_counts,
)
from analysis.recommendation import Recommendation, compare_edge_sets, recommend
from analysis.sampler import BucketedBatchSampler
from analysis.simulation import SimulationResult, compare_strategies, simulate
from analysis.step_time import (
    StepTimeModel,
    calibration_shapes,
    measure_step_times,
    predict_strategy_throughput,
)
from analysis.strategies import STRATEGIES
from analysis.throughput import predict_throughput
from analysis.waste import (
    WasteEstimate,
    expected_padding,
    expected_strategies,
    random_padding,
    sorted_padding,
)

__all__ = [
    # the data
    "LengthHistogram",
    "load_lengths",
    "save_histogram",
    "measure_lengths",
    # the vocabulary
    "BatchRule",
    "check_edges",
    "cover_edges",
    "parse_edges",
    # exact padding
    "WasteEstimate",
    "expected_padding",
    "random_padding",
    "sorted_padding",
    "expected_strategies",
    # edges
    "BucketPlan",
    "METHODS",
    "optimize_edges",
    "evaluate_edges",
    "sweep_bucket_counts",
    "recommend_n_buckets",
    "Recommendation",
    "recommend",
    "compare_edge_sets",
    # simulation and throughput
    "STRATEGIES",
    "SimulationResult",
    "simulate",
    "compare_strategies",
    "predict_throughput",
    # step times on your hardware
    "StepTimeModel",
    "measure_step_times",
    "calibration_shapes",
    "predict_strategy_throughput",
    # training
    "BucketedBatchSampler",
    # the case
    "CASE_EDGES",
    "CASE_GEOMETRIC_EDGES",
    "__version__",
]  # plus the lazy `explore` (it loads ipywidgets)


def __getattr__(name: str) -> Any:
    """``analysis.explore`` imports ipywidgets only when the explorer is first used."""
    if name == "explore":
        from analysis.explorer import explore

        return explore
    raise AttributeError(f"module 'analysis' has no attribute {name!r}")
