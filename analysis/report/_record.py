"""What ``recommendation.json`` holds beside the plan: notebook 04's results (from the same call
notebook 04 makes), the predicted tokens/s, and the values made JSON-ready."""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from analysis.answers.recommendation import (
    DEFAULT_TIME_EPOCHS,
    DEFAULT_TIME_MAX_BUCKETS,
    Recommendation,
    TimeRecommendation,
    recommend_for_time,
)
from analysis.batching import BatchRule
from analysis.lengths import LengthHistogram
from analysis.loaders import load_step_times
from analysis.timing.proportional import THROUGHPUT_RULE
from analysis.timing.step_time import StepTimeModel


@dataclass(frozen=True)
class ReportResult:
    """What :func:`~analysis.report.run_report` wrote: the folder, every file (sorted), the
    recommendation, and the floor's sentence (:func:`analysis.narrative.frontier.floor_sentence`)."""

    out_dir: Path
    files: tuple[Path, ...]
    recommendation: dict[str, Any] = field(repr=False)
    floor_text: str | None = None  # what the floor chose and proves (None: no floor)


#: What ``throughput`` says it used when step times are given and no calibration is.
STEP_TIME_RULE = (
    "analysis.predict_strategy_throughput: the step-time model fitted to the --step-times "
    "file (notebook 04; bucketed on the edges optimised for time, step_time.time_plan)"
)


def time_results(
    hist: LengthHistogram,
    step_times: Path | None,
    n_buckets: int,
    rule: BatchRule,
    *,
    seed: int,
    world_size: int,
) -> TimeRecommendation | None:
    """Notebook 04's results, from the same call with the same inputs it gets (its rng seeded
    with the report's seed and drawn from first), or ``None`` without step times."""
    if step_times is None:
        return None
    return recommend_for_time(
        hist,
        StepTimeModel.fit(load_step_times(step_times)),
        n_buckets,
        rule,
        rng=np.random.default_rng(seed),
        epochs=DEFAULT_TIME_EPOCHS,
        world_size=world_size,
        max_buckets=DEFAULT_TIME_MAX_BUCKETS,
    )


def throughput_record(
    rec: Recommendation,
    tokens_per_s: float | None,
    reference_strategy: str | None,
    step_time: TimeRecommendation | None,
) -> dict[str, Any] | None:
    """Predicted useful tokens/s of each strategy: from one measured reference when a
    calibration is given (padded tokens), else from the step-time model when step times are
    (the ``tokens_per_s`` of ``step_time.strategies``), else ``None``."""
    if tokens_per_s is not None:
        reference = str(reference_strategy)
        return {
            "reference_strategy": reference,
            "reference_tokens_per_s": float(tokens_per_s),
            "model": THROUGHPUT_RULE,
            "predicted_tokens_per_s": rec.predicted_tokens_per_s(tokens_per_s, reference),
        }
    if step_time is not None:
        return {
            "reference_strategy": None,
            "reference_tokens_per_s": None,
            "model": STEP_TIME_RULE,
            "predicted_tokens_per_s": {
                str(name): float(v) for name, v in step_time.strategies["tokens_per_s"].items()
            },
        }
    return None


def clean(value: Any) -> Any:
    """JSON-ready: numpy scalars to Python, tuples to lists."""
    if isinstance(value, Mapping):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, str | bytes):
        return value.item()
    return value


def summary_dict(series: Any) -> dict[str, Any]:
    cleaned: dict[str, Any] = clean({str(k): v for k, v in series.items()})
    return cleaned


def write_json(path: Path, value: dict[str, Any]) -> Path:
    path.write_text(json.dumps(value, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    return path


def default_command() -> str:
    """The command line that ran this process, as ``recommendation.json`` records it."""
    return shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]]) if sys.argv else ""
