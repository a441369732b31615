"""Step times measured on your model and hardware, and the step-time model fitted to them.

The padded-token model (:mod:`analysis.timing.proportional`) says a step costs time proportional to
``batch_size * longest``.  Real steps also pay a fixed cost (optimizer, launch, data), a cost
per sample, attention grows with the square of each row's span, and a batch whose
activations outgrow the caches pays more per token.  Here a handful of measured steps fit

    seconds = per_step + per_sample * S + per_token * N + attention * sum(span**2)
              + working_set * N**2 + per_segment * P

over the step's rows (:mod:`analysis.timing.shapes`): ``S`` samples, ``N`` tokens of the
tensor (real plus padding), each padded row spanning ``T(L)`` (its padded length ``L``
rounded up to the kernel ``tile``; 1: no rounding), each packed segment its own length, and
``P`` packed samples.  For a padded batch of ``B`` samples padded to ``L`` that is
``per_step + per_sample * B + per_token * B * T(L) + attention * B * T(L)**2 +
working_set * (B * T(L))**2``, and ``per_segment`` is fitted only when packed steps were
measured.  All coefficients are non-negative (non-negative least squares on relative errors,
so short steps count as much as long ones).  The ``working_set`` term is the cost per token
growing with the tokens in the batch: in the CPU calibration committed in
``data/step_times_cpu.csv`` (``benchmarks/bench_step_time.py``) every shape of 8,192 tokens
ran 3.1 to 6.8 % slower than the best model without it, and the shapes of 4,096 to 7,504
tokens -3.2 to +1.8 %; with it, -0.6 to +5.0 %.

A batch's price, padded or packed, is :func:`analysis.timing.price.step_seconds` (every
prediction calls it); what the model predicts (the expected and simulated time of an epoch,
tokens/s per strategy) is in :mod:`analysis.timing.epoch` and :mod:`analysis.answers.throughput`;
``optimize_edges(..., step_time=model)`` places edges for time.

Nothing here imports torch (:func:`measure_step_times` calls the user's own ``step``) and
nothing reads a file: :func:`analysis.loaders.load_step_times` reads a CSV of step times.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from analysis._validate import positive_int
from analysis.batching import BatchRule, as_rule, round_up
from analysis.lengths import LengthHistogram
from analysis.timing.shapes import (
    SEGMENT_COLUMN,
    SEGMENT_TERMS,
    STEP_TIME_COLUMNS,
    STEP_TIME_TERMS,
    check_shapes,
    check_step_times,
    packed_features,
    padded_features,
)

__all__ = [
    "STEP_TIME_COLUMNS",
    "STEP_TIME_TERMS",
    "SEGMENT_TERMS",
    "measure_step_times",
    "calibration_shapes",
    "check_step_times",
    "StepTimeModel",
]

#: Every term of the model: the padded ones and the packed steps' own.
_ALL_TERMS = {**STEP_TIME_TERMS, **SEGMENT_TERMS}
#: Terms a fit cannot tell apart when every shape has one length.
_LENGTH_COLLINEAR = {"per_sample", "per_token", "attention"}


# --------------------------------------------------------------------------------- measuring
def measure_step_times(
    step: Callable[..., object],
    shapes: Sequence[tuple[int, ...]],
    *,
    repeats: int = 5,
    warmup: int = 2,
    clock: Callable[[], float] = time.perf_counter,
) -> pd.DataFrame:
    """Time ``step`` on each shape: one row per timed call.

    ``step`` runs one full training step (forward, backward, optimizer) on a batch of that
    shape and returns when it is done (on a GPU it must synchronise).  A padded shape
    ``(batch_size, length)`` calls ``step(batch_size, length)``: ``batch_size`` samples padded
    to ``length``.  A packed shape ``(batch_size, length, segment_length)`` calls
    ``step(batch_size, length, segment_length=segment_length)``: ``batch_size`` rows of
    ``length`` tokens, each holding ``length // segment_length`` samples back to back, with
    attention restricted to each sample (that keyword is how ``step`` knows the step is
    packed).  Every shape first runs ``warmup`` untimed steps; then ``repeats`` rounds time
    each shape once per round, so slow drift (thermal, other jobs) spreads over all shapes
    instead of biasing one.

    :mod:`analysis.timing.shapes` shows a PyTorch ``step`` that builds a packed step as
    transformers' ``DataCollatorWithFlattening`` does.

    Returns
    -------
    pandas.DataFrame
        Columns ``batch_size``, ``length`` (int64) and ``seconds`` (float64), and
        ``segment_length`` (int64, 0 for a padded step) when a shape is packed.

    Examples
    --------
    >>> ticks = iter(range(100))
    >>> frame = measure_step_times(lambda b, n: None, [(2, 8), (4, 16)], repeats=2,
    ...                            warmup=1, clock=lambda: float(next(ticks)))
    >>> frame
       batch_size  length  seconds
    0           2       8      1.0
    1           4      16      1.0
    2           2       8      1.0
    3           4      16      1.0
    >>> calls = []
    >>> frame = measure_step_times(lambda b, n, segment_length=None: calls.append(segment_length),
    ...                            [(2, 8), (1, 16, 4)], repeats=1, warmup=0)
    >>> calls, frame["segment_length"].tolist()
    ([None, 4], [0, 4])
    """
    if not callable(step):
        raise ValueError(f"step must be callable, got {type(step).__name__}")
    checked = check_shapes(shapes)
    repeats = positive_int(repeats, "repeats")
    if isinstance(warmup, bool) or not isinstance(warmup, int | np.integer) or warmup < 0:
        raise ValueError(f"warmup must be an integer >= 0, got {warmup!r}")

    def run(b: int, n: int, seg: int) -> None:
        if seg:
            step(b, n, segment_length=seg)
        else:
            step(b, n)

    for b, n, seg in checked:
        for _ in range(int(warmup)):
            run(b, n, seg)
    rows = []
    for _ in range(repeats):
        for b, n, seg in checked:
            start = clock()
            run(b, n, seg)
            rows.append((b, n, clock() - start, seg))
    frame = pd.DataFrame(rows, columns=[*STEP_TIME_COLUMNS, SEGMENT_COLUMN])
    frame = frame.astype(
        {"batch_size": np.int64, "length": np.int64, "seconds": float, SEGMENT_COLUMN: np.int64}
    )
    return frame if frame[SEGMENT_COLUMN].any() else frame.drop(columns=SEGMENT_COLUMN)


def calibration_shapes(
    hist: LengthHistogram,
    rule: BatchRule | None = None,
    *,
    batch_size: int | None = None,
    max_tokens: int | None = None,
    pad_to_multiple_of: int | None = None,
    n_lengths: int = 8,
    batch_fractions: Sequence[float] = (1.0, 0.5, 0.25),
    packed: bool = False,
) -> list[tuple[int, ...]]:
    """A small design of ``(batch_size, length)`` shapes covering what the data will produce.

    Lengths: ``n_lengths`` log-spaced values from the shortest to the longest length (rounded
    up to the rule's ``pad_to_multiple_of``).  Batch sizes at each length: the rule's batch
    size (with ``max_tokens``: ``max_tokens // length``, and ``max_tokens // longest``, the
    size of the fixed-size strategies) times each of ``batch_fractions`` (at least 1), so the
    per-step and per-sample terms can be told apart.  With ``packed``, packed shapes too
    (``(1, k * length, length)``: one row of ``k`` samples of each length, ``k`` the
    packing strategies' token budget ``rule.token_budget(longest) // length`` times each
    fraction, at least 1), so the ``per_segment`` term and the spans of packed attention are
    measured.  A few dozen shapes: minutes to measure, not an epoch.

    Examples
    --------
    >>> hist = LengthHistogram.from_lengths([10, 100, 1000])
    >>> calibration_shapes(hist, batch_size=8, n_lengths=3)
    [(2, 10), (4, 10), (8, 10), (2, 100), (4, 100), (8, 100), (2, 1000), (4, 1000), (8, 1000)]
    >>> calibration_shapes(hist, max_tokens=4000, n_lengths=2, batch_fractions=[1])
    [(4, 10), (400, 10), (4, 1000)]
    >>> calibration_shapes(hist, max_tokens=4000, n_lengths=2, batch_fractions=[1, 0.5], packed=True)[-4:]
    [(2, 1000), (4, 1000), (1, 2000, 1000), (1, 4000, 1000)]
    """
    if not isinstance(hist, LengthHistogram):
        hist = LengthHistogram.from_lengths(hist)
    rule = as_rule(rule, batch_size=batch_size, max_tokens=max_tokens, pad_to_multiple_of=pad_to_multiple_of)
    n_lengths = positive_int(n_lengths, "n_lengths")
    fractions = [float(f) for f in batch_fractions]
    if not fractions or any(not (0 < f <= 1) for f in fractions):
        raise ValueError(f"batch_fractions must be in (0, 1], got {batch_fractions!r}")
    m = rule.pad_to_multiple_of
    lo, hi = int(round_up(hist.min, m)), int(round_up(hist.max, m))
    raw = np.geomspace(lo, hi, n_lengths) if n_lengths > 1 else np.array([hi])
    lengths = sorted({int(round_up(math.ceil(v - 1e-9), m)) for v in raw.tolist()} | {hi})
    shapes: set[tuple[int, ...]] = set()
    budget = rule.token_budget(hist.max)
    for length in lengths:
        tops = (
            [rule.batch_size]
            if rule.batch_size is not None
            else [rule.fixed_batch_size(length), rule.fixed_batch_size(hi)]
        )
        for top in tops:
            for f in fractions:
                shapes.add((max(1, int(top * f)), length))
        if packed and length <= budget:
            for f in fractions:
                k = max(1, int((budget // length) * f))
                shapes.add((1, k * length, length))
    return sorted(shapes, key=lambda s: (s[-1], s[1], s[0]) if len(s) == 3 else (s[1], 0, s[0]))


# ------------------------------------------------------------------------------------ model
@dataclass(frozen=True)
class StepTimeModel:
    """Step time in seconds of a padded batch (``B`` samples padded to ``L`` tokens) or of a
    packed step.

    Padded: ``per_step + per_sample * B + per_token * B * T(L) + attention * B * T(L)**2 +
    working_set * (B * T(L))**2`` with ``T(L)`` = ``L`` rounded up to ``tile``; a packed step
    of ``S`` samples, ``N`` tokens and spans ``l_i`` pays ``per_step + (per_sample +
    per_segment) * S + per_token * N + attention * sum(l_i**2) + working_set * N**2``
    (:mod:`analysis.timing.shapes`).  Build it with :meth:`fit`; ``measurements`` keeps the
    per-shape table of the fit (see :meth:`residuals`).

    Examples
    --------
    >>> model = StepTimeModel(per_step=0.01, per_token=1e-5, attention=1e-8)
    >>> round(model.predict(8, 1000), 4)  # 0.01 + 8e-5 * 1000 + 8e-8 * 1000**2
    0.17
    >>> model.predict([8, 16], 100).round(5).tolist()
    [0.0188, 0.0276]
    >>> round(model.predict(1, 8000, segment_length=1000), 4)  # one row of 8 samples: 8e-8 * 1000**2
    0.17
    """

    per_step: float = 0.0
    per_sample: float = 0.0
    per_token: float = 0.0
    attention: float = 0.0
    working_set: float = 0.0
    tile: int = 1
    measurements: pd.DataFrame | None = field(default=None, repr=False, compare=False)
    per_segment: float = 0.0

    def __post_init__(self) -> None:
        for name in _ALL_TERMS:
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float | np.number)
                or not math.isfinite(value)
                or value < 0
            ):
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
            object.__setattr__(self, name, float(value))
        object.__setattr__(self, "tile", positive_int(self.tile, "tile"))
        if not self.coefficients.any() and not self.per_segment:
            raise ValueError("a step-time model needs at least one positive coefficient")

    @property
    def coefficients(self) -> np.ndarray:
        """``[per_step, per_sample, per_token, attention, working_set]`` (``per_segment`` apart)."""
        return np.array([getattr(self, name) for name in STEP_TIME_TERMS])

    @property
    def prices_segments(self) -> bool:
        """Whether the model has a ``per_segment`` term (fitted on packed steps, or given)."""
        fitted = self.measurements is not None and SEGMENT_COLUMN in self.measurements.columns
        return fitted or self.per_segment > 0

    @classmethod
    def fit(cls, frame: pd.DataFrame, *, terms: Iterable[str] | None = None, tile: int = 1) -> StepTimeModel:
        """Fit the model to measured step times (a :func:`measure_step_times` frame).

        Each shape's median time is fitted by non-negative least squares on relative errors
        (rows weighted by ``1 / median``); coefficients not in ``terms`` are 0 (default: every
        term of :data:`STEP_TIME_TERMS`, and ``per_segment`` when the frame holds packed
        steps).  Needs every shape measured at least twice (the spread of repeats is the
        noise the residuals are judged against), more distinct shapes than terms, and shapes
        of at least two lengths when the terms would otherwise be indistinguishable.

        Examples
        --------
        >>> truth = StepTimeModel(per_step=0.02, per_token=2e-6, attention=1e-9)
        >>> shapes = [(b, n) for b in (1, 4, 16) for n in (64, 256, 1024)] * 2
        >>> frame = pd.DataFrame(shapes, columns=["batch_size", "length"])
        >>> frame["seconds"] = truth.predict(frame["batch_size"], frame["length"])
        >>> fitted = StepTimeModel.fit(frame)
        >>> fitted.to_frame()["coefficient"].round(12).tolist()
        [0.02, 0.0, 2e-06, 1e-09, 0.0]
        """
        data = check_step_times(frame)
        tile = positive_int(tile, "tile")
        packed = SEGMENT_COLUMN in data.columns and bool(data[SEGMENT_COLUMN].any())
        if not packed:
            data = data[list(STEP_TIME_COLUMNS)]
        terms = [*STEP_TIME_TERMS, *(SEGMENT_TERMS if packed else ())] if terms is None else list(terms)
        unknown = [t for t in terms if t not in _ALL_TERMS]
        if unknown or not terms:
            raise ValueError(f"terms must be a non-empty subset of {', '.join(_ALL_TERMS)}, got {terms!r}")
        if "per_segment" in terms and not packed:
            raise ValueError("the per_segment term needs packed steps (a segment_length column)")
        keys = ["batch_size", "length", *([SEGMENT_COLUMN] if packed else [])]
        groups = data.groupby(keys, sort=True)["seconds"]
        per_shape = pd.DataFrame(
            {
                "repeats": groups.size(),
                "seconds": groups.median(),
                "spread": groups.std(ddof=1) / groups.mean(),
            }
        ).reset_index()
        once = per_shape[per_shape["repeats"] < 2]
        if len(once):
            b, n = int(once["batch_size"].iloc[0]), int(once["length"].iloc[0])
            raise ValueError(
                f"shape (batch_size={b}, length={n}) was measured once; time every "
                "shape at least twice (repeats >= 2)"
            )
        if not packed and per_shape["length"].nunique() == 1 and len(_LENGTH_COLLINEAR & set(terms)) > 1:
            raise ValueError(
                f"every shape has length {int(per_shape['length'].iloc[0])}: per_sample, per_token "
                "and attention cannot be told apart; measure at least two lengths"
            )
        if len(per_shape) <= len(terms):
            raise ValueError(
                f"{len(per_shape)} distinct shapes cannot fit {len(terms)} terms; "
                f"measure at least {len(terms) + 1}"
            )
        cols = [list(_ALL_TERMS).index(t) for t in terms]
        seg = per_shape[SEGMENT_COLUMN] if packed else 0
        x5, p = padded_features(per_shape["batch_size"], per_shape["length"], tile, seg)
        x = (np.concatenate([x5, p[:, None]], axis=1) if packed else x5)[:, cols]
        y = per_shape["seconds"].to_numpy()
        scale = x.max(axis=0)  # columns of comparable size for the solver
        scale[scale == 0] = 1.0
        from scipy.optimize import nnls  # imported on first fit (~0.5 s)

        coef, _ = nnls(x / y[:, None] / scale, np.ones_like(y))
        full = np.zeros(len(_ALL_TERMS))
        full[cols] = coef / scale
        per_step, per_sample, per_token, attention, working_set, per_segment = (float(v) for v in full)
        model = cls(per_step, per_sample, per_token, attention, working_set, tile, per_segment=per_segment)
        per_shape["predicted"] = model.predict(per_shape["batch_size"], per_shape["length"], seg)
        per_shape["residual"] = per_shape["seconds"] - per_shape["predicted"]
        per_shape["relative_residual"] = per_shape["residual"] / per_shape["seconds"]
        columns = [*keys, "repeats", "seconds", "spread", "predicted", "residual", "relative_residual"]
        return dataclasses.replace(model, measurements=per_shape[columns])

    def predict(
        self, batch_size: npt.ArrayLike, length: npt.ArrayLike, segment_length: npt.ArrayLike = 0
    ) -> Any:
        """Predicted seconds of steps of ``batch_size`` samples padded to ``length``, or with
        ``segment_length > 0`` of ``batch_size`` packed rows of ``length`` tokens holding
        ``length // segment_length`` samples each (broadcast; a float for scalars, else an
        array)."""
        x, p = padded_features(batch_size, length, self.tile, segment_length)
        out = x @ self.coefficients
        if p.any():
            out = out + self.per_segment * p
        return float(out) if np.ndim(out) == 0 else out

    def predict_packed(
        self,
        samples: npt.ArrayLike,
        square_sum: npt.ArrayLike,
        row_tokens: npt.ArrayLike,
        rows: npt.ArrayLike = 1,
    ) -> np.ndarray:
        """Predicted seconds of packed steps: ``rows`` rows of ``row_tokens`` tokens (rounded
        up to the tile; padding included) holding ``samples`` segments whose lengths' squares
        sum to ``square_sum`` (attention within each segment).

        Examples
        --------
        >>> model = StepTimeModel(per_step=0.1, per_token=1e-3, attention=1e-6, per_segment=0.01)
        >>> model.predict_packed([2], [30**2 + 70**2], [128]).round(6).tolist()  # 0.1 + 0.02 + 0.128 + 0.0058
        [0.2538]
        """
        n = np.asarray(rows, dtype=float) * round_up(np.asarray(row_tokens, dtype=float), self.tile)
        s = np.asarray(samples, dtype=float)
        out = packed_features(s, n, square_sum) @ self.coefficients + self.per_segment * s
        return np.asarray(out)

    def sample_seconds(self, length: npt.ArrayLike, batch_size: npt.ArrayLike) -> np.ndarray:
        """Seconds each sample of a batch of ``batch_size`` padded to ``length`` adds through
        the length terms: ``g_B(L) = per_token * T(L) + (attention + working_set * B) * T(L)**2``
        (non-decreasing in ``L``; the optimiser's per-sample weight), so that a batch's
        length terms are ``B * g_B(L)``.

        Examples
        --------
        >>> model = StepTimeModel(per_step=0.1, per_token=1e-3, attention=1e-6, working_set=1e-8)
        >>> g = model.sample_seconds(100, 4)  # 1e-3 * 100 + (1e-6 + 4e-8) * 100**2
        >>> round(float(g), 6), round(model.predict(4, 100) - 0.1 - 4 * float(g), 12)
        (0.1104, 0.0)
        """
        alone, per_sample_of_batch = self.sample_seconds_parts(length)
        return np.asarray(alone + np.asarray(batch_size, dtype=float) * per_sample_of_batch)

    def sample_seconds_parts(self, length: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """``sample_seconds`` as ``(a, q)`` with ``g_B(L) = a(L) + B * q(L)``:
        ``a = per_token * T + attention * T**2`` and ``q = working_set * T**2`` (a token
        budget's optimiser needs them apart, its ``B`` following the bucket's edge).

        Examples
        --------
        >>> a, q = StepTimeModel(per_token=1e-3, working_set=1e-8).sample_seconds_parts([10, 20])
        >>> a.tolist(), q.round(12).tolist()
        ([0.01, 0.02], [1e-06, 4e-06])
        """
        t = np.asarray(round_up(np.asarray(length, dtype=float), self.tile))
        return np.asarray(self.per_token * t + self.attention * t * t), np.asarray(self.working_set * t * t)

    def to_frame(self) -> pd.DataFrame:
        """The coefficients: one row per term (``feature``, ``coefficient`` in seconds);
        ``per_segment`` only when the model prices segments (:attr:`prices_segments`)."""
        terms = _ALL_TERMS if self.prices_segments else STEP_TIME_TERMS
        return pd.DataFrame(
            {"feature": list(terms.values()), "coefficient": [getattr(self, t) for t in terms]},
            index=pd.Index(list(terms), name="term"),
        )

    def residuals(self) -> pd.DataFrame:
        """Per measured shape: ``repeats``, median ``seconds``, ``spread`` (std / mean of the
        repeats: the noise), ``predicted``, ``residual`` and ``relative_residual``."""
        if self.measurements is None:
            raise ValueError("this model was not fitted (no measurements): use StepTimeModel.fit")
        return self.measurements.copy()

    @property
    def rms_relative_residual(self) -> float:
        """Root mean square of the fit's relative residuals (NaN without measurements)."""
        if self.measurements is None:
            return float("nan")
        return float(np.sqrt(np.mean(self.measurements["relative_residual"] ** 2)))


def check_model(model: object) -> StepTimeModel:
    """``model`` itself, or a one-line ValueError when it is no :class:`StepTimeModel`."""
    if not isinstance(model, StepTimeModel):
        raise ValueError(f"model must be a StepTimeModel, got {type(model).__name__}")
    return model
