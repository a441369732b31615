"""One price per batch: the seconds a step costs under a fitted step-time model, padded or packed.

Every prediction of time prices its batches with :func:`step_seconds`, so two answers never
price one step two ways: the exact epochs of :mod:`analysis.timing.epoch` (sorted batches one
by one), the simulated epochs of :mod:`analysis.answers.throughput` (which
:mod:`analysis.answers.frontier` reads too) and the packed epochs of
:mod:`analysis.answers.pack_or_pad`.  A padded step's price is written in the parts the exact
expectation of a bucketed shuffle and the optimiser's time objective read per sample
(:meth:`StepTimeModel.sample_seconds_parts`): the same coefficients, one formula.

- A *padded* batch of ``B`` samples whose longest is ``L``: each row padded to ``round_up(L,
  pad_to_multiple_of)`` and then to the model's ``tile`` (``T``), costing ``per_step +
  per_sample * B + B * (a(T) + B * q(T))`` with ``a = per_token * T + attention * T**2`` and
  ``q = working_set * T**2`` (the features of :mod:`analysis.timing.shapes` summed, so
  :meth:`StepTimeModel.predict` of the padded shape gives the same).
- A *packed* row of ``row_tokens`` tokens (its capacity, padding included) holding ``S``
  segments whose lengths' squares sum to ``A``: ``per_step + (per_sample + per_segment) * S +
  per_token * N + attention * A + working_set * N**2``, ``N`` the row's tokens rounded to the
  tile: attention within each segment (:meth:`StepTimeModel.predict_packed`).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from analysis.batching import BatchRule, round_up
from analysis.timing.step_time import StepTimeModel

__all__ = ["step_seconds"]


def step_seconds(
    model: StepTimeModel,
    size: npt.ArrayLike,
    longest: npt.ArrayLike,
    rule: BatchRule,
    *,
    square_sum: npt.ArrayLike | None = None,
    row_tokens: int | None = None,
) -> np.ndarray:
    """The seconds of each step (arrays broadcast; a float64 array).

    Padded (``square_sum`` None): ``size`` samples whose longest is ``longest`` (integers),
    each padded to ``round_up(longest, rule.pad_to_multiple_of)``.  Packed (``square_sum``
    given): one row of ``row_tokens`` tokens holding ``size`` samples whose lengths' squares
    sum to ``square_sum`` (``longest`` unused: a packed row is priced by its capacity and its
    segments).

    Examples
    --------
    >>> model = StepTimeModel(per_step=0.004, per_token=2e-6, attention=5e-8)
    >>> rule = BatchRule(max_tokens=16384)
    >>> step_seconds(model, [4], [4000], rule).round(6).tolist()  # 4 rows of 4,000 tokens
    [3.236]
    >>> padded = BatchRule(max_tokens=16384, pad_to_multiple_of=64)
    >>> step_seconds(model, [4], [4000], padded).round(6).tolist()  # 4 rows of 4,032 tokens
    [3.287661]
    >>> step_seconds(model, [4], [0], rule, square_sum=[4 * 4000**2], row_tokens=16384).round(6).tolist()
    [3.236768]
    """
    b = np.asarray(size, dtype=float)
    if square_sum is None:
        padded = round_up(np.asarray(longest, dtype=np.int64), rule.pad_to_multiple_of)
        alone, per_b = model.sample_seconds_parts(padded)
        return np.asarray(model.per_step + model.per_sample * b + b * (alone + b * per_b), dtype=float)
    if row_tokens is None:
        raise ValueError("a packed step needs row_tokens (its row's capacity)")
    return model.predict_packed(b, square_sum, row_tokens)
