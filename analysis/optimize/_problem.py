"""The optimiser's problem: the histogram as prefix arrays, and what it reads of a step-time
model (:class:`StepTimeLike`).

Index ``t = 1..m`` is the t-th distinct length; a bucket is a range ``(i, j]`` of them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from analysis._validate import known_name, positive_int
from analysis.batching import BatchRule, round_up
from analysis.lengths import LengthHistogram


@runtime_checkable
class StepTimeLike(Protocol):
    """What the optimiser reads of a step-time model (:class:`analysis.StepTimeModel` is one):
    the seconds a sample adds to its batch, whole or as the parts a token budget needs apart,
    and the seconds of each step: the parts of the one price of a padded batch
    (:func:`analysis.timing.price.step_seconds`), so the time objective is the priced epoch."""

    @property
    def per_step(self) -> float:
        """Seconds added per batch."""

    def sample_seconds(self, length: np.ndarray, batch_size: int) -> np.ndarray:
        """Seconds each sample of a batch of ``batch_size`` padded to ``length`` adds."""

    def sample_seconds_parts(self, length: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``sample_seconds`` as ``(a, q)``: ``a + batch_size * q``."""


@dataclass(frozen=True, kw_only=True)
class Problem:
    """Arrays the optimiser works on (index ``t = 1..m`` is the t-th distinct length)."""

    lengths: np.ndarray  # (m,) int64
    cum: np.ndarray  # (m+1,) int64: samples with length <= v_t; cum[0] = 0
    weight: np.ndarray  # (m+1,) float: g(v_t), the padded length (or its seconds); weight[0] unused
    step: np.ndarray  # (m+1,) float: weight[t+1] - weight[t] for 1 <= t < m, else 0
    upper: np.ndarray  # (m+1,) int64: upper edge of a bucket ending at t
    size: np.ndarray  # (m+1,) int64: batch size of a bucket ending at t
    ends: np.ndarray  # allowed bucket ends (ascending, last = m)
    # with a token budget and a step-time model with a working-set term, each sample also
    # costs size[j] * weight2 in a bucket ending at j (B follows the end); zeros otherwise
    weight2: np.ndarray  # (m+1,) float
    step2: np.ndarray  # (m+1,) float
    rule: BatchRule
    edge_multiple: int
    per_batch: float = 0.0  # added per batch: per_step (time), max_tokens (steps), 0 (padding)
    step_time: StepTimeLike | None = None
    objective: str = "padding"  # what the DP minimises: "padding", "steps" or "time"
    # with a fixed B and a step-time model's working-set term, what a sample's weight gains per
    # sample of its batch (``weight = a + B * member``): a short batch of r samples weighs
    # ``weight - (B - r) * member``; None otherwise (a token budget's is weight2)
    member: np.ndarray | None = None

    @property
    def m(self) -> int:
        return int(self.lengths.size)


def build_problem(
    hist: LengthHistogram,
    rule: BatchRule,
    edge_multiple: Any = 1,
    step_time: StepTimeLike | None = None,
    objective: str | None = None,
) -> Problem:
    """The arrays of ``hist`` under ``rule`` (edges at multiples of ``edge_multiple``).

    The per-sample weight ``g`` is the padded length, or with ``step_time`` the seconds a
    sample adds to its batch of ``B`` (``per_token * T + (attention + working_set * B) *
    T**2``, ``T`` the padded length rounded to the model's tile: ``weight``, and with a token
    budget, whose ``B`` follows the bucket's end, ``weight + B * weight2``), plus
    ``per_step`` seconds per batch (``per_batch``).

    ``objective="steps"`` (a token budget, no ``step_time``): each batch costs the budget,
    ``per_batch = max_tokens``, and a sample padded beyond it (alone in its batch) adds what
    it passes by, ``max(0, padded - max_tokens)``; the padded length scaled by
    :func:`_tie_scale` breaks ties between plans of the same steps (see
    :func:`analysis.optimize.optimize_edges`).

    ``objective`` names what the DP minimises: ``"time"`` with ``step_time`` (and only with
    it), else ``"padding"`` or ``"steps"``; ``None`` is ``"time"`` with ``step_time``, else
    ``"padding"`` (a public call picks its default with :func:`resolve_objective`)."""
    if step_time is not None and not isinstance(step_time, StepTimeLike):
        raise ValueError(f"step_time must be a StepTimeModel, got {type(step_time).__name__}")
    if not isinstance(hist, LengthHistogram):
        raise ValueError(f"hist must be a LengthHistogram, got {type(hist).__name__}")
    em = positive_int(edge_multiple, "edge_multiple")
    if hist.min == 0:
        raise ValueError("zero-length samples cannot be bucketed (edges start at 0, below every length)")
    if hist.n_samples >= 2**53:
        raise ValueError("more than 2**53 samples: counts would not be exact in float64")
    lengths = hist.lengths
    m = lengths.size
    cum = np.zeros(m + 1, np.int64)
    np.cumsum(hist.counts, out=cum[1:])
    weight = np.zeros(m + 1)
    weight2 = np.zeros(m + 1)
    member: np.ndarray | None = None
    padded = round_up(lengths, rule.pad_to_multiple_of)
    objective = _check_objective(objective, step_time)
    steps = objective == "steps"
    if steps and (rule.max_tokens is None or step_time is not None):
        raise ValueError("the steps objective needs a token budget (max_tokens) and no step_time")
    if steps:
        assert rule.max_tokens is not None
        over = np.maximum(padded - rule.max_tokens, 0).astype(float)
        weight[1:] = over + padded.astype(float) * _tie_scale(hist, rule)
    elif step_time is None:
        weight[1:] = padded.astype(float)
    elif rule.batch_size is not None:
        weight[1:] = step_time.sample_seconds(padded, rule.batch_size)
        member = np.zeros(m + 1)
        member[1:] = step_time.sample_seconds_parts(padded)[1]
    else:
        weight[1:], weight2[1:] = step_time.sample_seconds_parts(padded)
    step = np.zeros(m + 1)
    step[1:m] = np.diff(weight[1:])
    step2 = np.zeros(m + 1)
    step2[1:m] = np.diff(weight2[1:])
    upper = np.zeros(m + 1, np.int64)
    upper[1:] = round_up(lengths, em)
    if rule.batch_size is not None:
        size = np.full(m + 1, rule.batch_size, np.int64)
    else:
        size = rule.budget_batch_size(upper)  # the one rule (upper[0] = 0 is never a bucket's end)
    # A bucket may end at t when its edge (upper[t]) separates v_t from v_{t+1}.
    ends = np.flatnonzero(np.r_[False, upper[1:m] < lengths[1:], True])
    per_batch = float(rule.max_tokens or 0) if steps else 0.0 if step_time is None else step_time.per_step
    return Problem(
        lengths=lengths,
        cum=cum,
        weight=weight,
        step=step,
        upper=upper,
        size=size,
        ends=ends,
        weight2=weight2,
        step2=step2,
        rule=rule,
        edge_multiple=em,
        per_batch=per_batch,
        step_time=step_time,
        objective=objective,
        member=member,
    )


#: The objectives :func:`analysis.optimize_edges` takes by name: ``"time"`` is the one
#: ``step_time`` gives (and needs).
OBJECTIVES = ("padding", "steps", "time")


def _check_objective(objective: str | None, step_time: StepTimeLike | None) -> str:
    """``objective`` checked against ``step_time`` (``None``: ``"time"`` with it, else
    ``"padding"``); a wrong pair is a one-line error."""
    if objective is None:
        return "padding" if step_time is None else "time"
    known_name(objective, OBJECTIVES, "objective")
    if step_time is not None and objective != "time":
        raise ValueError(f"objective={objective!r} and step_time: give one (step_time minimises time)")
    if step_time is None and objective == "time":
        raise ValueError("objective='time' needs step_time (a fitted StepTimeModel)")
    return objective


def resolve_objective(rule: BatchRule, step_time: StepTimeLike | None, objective: str | None) -> str:
    """The objective of a public call: ``objective`` checked, or by default ``"time"`` with
    ``step_time``, ``"steps"`` under a token budget and ``"padding"`` under a batch size."""
    if step_time is not None or objective == "time":
        return _check_objective(objective, step_time)
    if objective is None:
        return "padding" if rule.max_tokens is None else "steps"
    known_name(objective, OBJECTIVES, "objective")
    if objective == "steps" and rule.max_tokens is None:
        raise ValueError(
            "objective='steps' needs a token budget (max_tokens): under batch_size every step holds B samples"
        )
    return objective


def _tie_scale(hist: LengthHistogram, rule: BatchRule) -> float:
    """The weight of a padded token beside the steps objective's tokens: a power of two (so
    the products are exact) at most ``max_tokens / 4`` over every sample padded to the
    longest, so the padding term of any plan stays below a quarter of one step's
    ``max_tokens`` and never outweighs a step."""
    assert rule.max_tokens is not None
    most = hist.n_samples * int(round_up(hist.max, rule.pad_to_multiple_of))
    return min(1.0, 2.0 ** math.floor(math.log2(rule.max_tokens / (4 * most))))
