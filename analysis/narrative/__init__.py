"""Every sentence: what the notebooks, the report, the explorer and the CLI say about *your* file.

Fixed prose in a notebook may only say what holds for any data; every fact about the data comes
from one of these functions, so a report on someone else's file never repeats numbers of the
bundled one.  A sentence function reads results (an answer, a plan, a table) and computes
nothing; its numbers are written by :mod:`analysis.tables` (percentages in its ``"prose"``
style).  One module per question:

* :mod:`~analysis.narrative.lengths`: which lengths a table shows, what they look like, what
  clipping cuts (notebook 01);
* :mod:`~analysis.narrative.plan`: a plan's buckets (``6 optimal buckets``, written once), its
  warnings, the explorer's status line;
* :mod:`~analysis.narrative.recommendation`: the answer in one line, what the plan recovers, the
  K question (notebook 03, the summary page);
* :mod:`~analysis.narrative.budget`: a token budget's steps and how full they are;
* :mod:`~analysis.narrative.strategies`: the simulated strategies and which to use (notebook 02);
* :mod:`~analysis.narrative.frontier`: the padding-mixing trade-off and a floor's choice, and
  the length mixing said to be a proxy (once: ``MIXING_PROXY``);
* :mod:`~analysis.narrative.noise`: a plan in gradient noise (the effective batch it keeps,
  its steps or time to the same loss) and what the noise model measured;
* :mod:`~analysis.narrative.timing`: the step-time model, throughput, edges for time
  (notebook 04);
* :mod:`~analysis.narrative.packing`: pack or pad.
"""

from __future__ import annotations

from analysis.narrative.budget import describe_steps
from analysis.narrative.frontier import floor_sentence, frontier_sentence, pareto_check_sentence
from analysis.narrative.lengths import describe_clipping, describe_distribution, lengths_label
from analysis.narrative.noise import describe_noise_model, describe_plan_noise
from analysis.narrative.packing import describe_pack_or_pad
from analysis.narrative.plan import (
    buckets_phrase,
    describe_computing,
    describe_floor_ignored,
    describe_plan_status,
    describe_warning,
    plan_warnings,
)
from analysis.narrative.recommendation import describe_answer, describe_recommendation
from analysis.narrative.strategies import describe_choice, describe_sampler_data, describe_simulation
from analysis.narrative.timing import (
    describe_edges_for_time,
    describe_predicted_throughput,
    describe_step_time_fit,
    describe_step_time_terms,
    describe_validation,
)

__all__ = [
    "lengths_label",
    "describe_distribution",
    "describe_clipping",
    "buckets_phrase",
    "describe_warning",
    "plan_warnings",
    "describe_plan_status",
    "describe_computing",
    "describe_floor_ignored",
    "describe_answer",
    "describe_recommendation",
    "describe_steps",
    "describe_simulation",
    "describe_choice",
    "describe_sampler_data",
    "frontier_sentence",
    "pareto_check_sentence",
    "floor_sentence",
    "describe_step_time_terms",
    "describe_step_time_fit",
    "describe_predicted_throughput",
    "describe_edges_for_time",
    "describe_validation",
    "describe_pack_or_pad",
    "describe_plan_noise",
    "describe_noise_model",
]
