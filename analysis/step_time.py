"""Step times measured on your model and hardware, and the step-time model fitted to them.

The padded-token model (:mod:`analysis.throughput`) says a step costs time proportional to
``batch_size * longest``.  Real steps also pay a fixed cost (optimizer, launch, data), a cost
per sample, attention grows with the square of the padded length, and a batch whose
activations outgrow the caches pays more per token.  Here a handful of measured steps fit

    seconds = per_step + per_sample * B + per_token * B * T(L) + attention * B * T(L)**2
              + working_set * (B * T(L))**2

with ``B`` the batch size, ``L`` the padded length of the batch tensor and ``T(L)`` that length
rounded up to the kernel ``tile`` (1: no rounding).  All coefficients are non-negative
(non-negative least squares on relative errors, so short steps count as much as long ones).
The ``working_set`` term is the cost per token growing with the tokens in the batch: in the
CPU calibration committed in ``data/step_times_cpu.csv`` (``benchmarks/bench_step_time.py``)
every shape of 8,192 tokens ran 3.1 to 6.8 % slower than the best model without it, and the
shapes of 4,096 to 7,504 tokens -3.2 to +1.8 %; with it, -0.6 to +5.0 %.

What the model predicts (the expected and simulated time of an epoch, tokens/s per
strategy) is in :mod:`analysis.epoch_time`; ``optimize_edges(..., step_time=model)`` places
edges for time.

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

__all__ = [
    "STEP_TIME_COLUMNS",
    "STEP_TIME_TERMS",
    "measure_step_times",
    "calibration_shapes",
    "check_step_times",
    "StepTimeModel",
]

#: Columns of a step-time frame (one row per timed step).
STEP_TIME_COLUMNS = ("batch_size", "length", "seconds")
#: The model's terms, in order: the feature each coefficient multiplies.
STEP_TIME_TERMS = {
    "per_step": "1",
    "per_sample": "B",
    "per_token": "B*T(L)",
    "attention": "B*T(L)**2",
    "working_set": "(B*T(L))**2",
}


# --------------------------------------------------------------------------------- measuring
def _check_shapes(shapes: object) -> list[tuple[int, int]]:
    if isinstance(shapes, str | bytes) or not isinstance(shapes, Sequence | np.ndarray):
        raise ValueError("shapes must be a sequence of (batch_size, length) pairs")
    out = []
    for i, shape in enumerate(shapes):
        if isinstance(shape, str | bytes) or len(shape) != 2:
            raise ValueError(f"shapes[{i}] = {shape!r} is not a (batch_size, length) pair")
        out.append(
            (positive_int(shape[0], f"shapes[{i}] batch_size"), positive_int(shape[1], f"shapes[{i}] length"))
        )
    if not out:
        raise ValueError("shapes is empty")
    return out


def measure_step_times(
    step: Callable[[int, int], object],
    shapes: Sequence[tuple[int, int]],
    *,
    repeats: int = 5,
    warmup: int = 2,
    clock: Callable[[], float] = time.perf_counter,
) -> pd.DataFrame:
    """Time ``step(batch_size, length)`` on each shape: one row per timed call.

    ``step`` runs one full training step (forward, backward, optimizer) on a batch of that
    shape and returns when it is done (on a GPU it must synchronise).  Every shape first runs
    ``warmup`` untimed steps; then ``repeats`` rounds time each shape once per round, so slow
    drift (thermal, other jobs) spreads over all shapes instead of biasing one.

    Returns
    -------
    pandas.DataFrame
        Columns ``batch_size``, ``length`` (int64) and ``seconds`` (float64).

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
    """
    if not callable(step):
        raise ValueError(f"step must be callable, got {type(step).__name__}")
    shapes = _check_shapes(shapes)
    repeats = positive_int(repeats, "repeats")
    if isinstance(warmup, bool) or not isinstance(warmup, int | np.integer) or warmup < 0:
        raise ValueError(f"warmup must be an integer >= 0, got {warmup!r}")
    for b, n in shapes:
        for _ in range(int(warmup)):
            step(b, n)
    rows = []
    for _ in range(repeats):
        for b, n in shapes:
            start = clock()
            step(b, n)
            rows.append((b, n, clock() - start))
    frame = pd.DataFrame(rows, columns=list(STEP_TIME_COLUMNS))
    return frame.astype({"batch_size": np.int64, "length": np.int64, "seconds": float})


def calibration_shapes(
    hist: LengthHistogram,
    rule: BatchRule | None = None,
    *,
    batch_size: int | None = None,
    max_tokens: int | None = None,
    pad_to_multiple_of: int | None = None,
    n_lengths: int = 8,
    batch_fractions: Sequence[float] = (1.0, 0.5, 0.25),
) -> list[tuple[int, int]]:
    """A small design of ``(batch_size, length)`` shapes covering what the data will produce.

    Lengths: ``n_lengths`` log-spaced values from the shortest to the longest length (rounded
    up to the rule's ``pad_to_multiple_of``).  Batch sizes at each length: the rule's batch
    size (with ``max_tokens``: ``max_tokens // length``, and ``max_tokens // longest``, the
    size of the fixed-size strategies) times each of ``batch_fractions`` (at least 1), so the
    per-step and per-sample terms can be told apart.  A few dozen shapes: minutes to measure,
    not an epoch.

    Examples
    --------
    >>> hist = LengthHistogram.from_lengths([10, 100, 1000])
    >>> calibration_shapes(hist, batch_size=8, n_lengths=3)
    [(2, 10), (4, 10), (8, 10), (2, 100), (4, 100), (8, 100), (2, 1000), (4, 1000), (8, 1000)]
    >>> calibration_shapes(hist, max_tokens=4000, n_lengths=2, batch_fractions=[1])
    [(4, 10), (400, 10), (4, 1000)]
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
    shapes = set()
    for length in lengths:
        tops = (
            [rule.batch_size]
            if rule.batch_size is not None
            else [rule.fixed_batch_size(length), rule.fixed_batch_size(hi)]
        )
        for top in tops:
            for f in fractions:
                shapes.add((max(1, int(top * f)), length))
    return sorted(shapes, key=lambda s: (s[1], s[0]))


def _plain(value: object) -> object:
    """A NumPy scalar as the Python value (for error messages)."""
    return value.item() if isinstance(value, np.generic) else value


def check_step_times(frame: pd.DataFrame, source: str | None = None) -> pd.DataFrame:
    """A validated copy of a step-time frame: columns ``batch_size``, ``length`` (positive
    integers) and ``seconds`` (finite, > 0); one-line errors naming ``source`` and the row.

    Examples
    --------
    >>> check_step_times(pd.DataFrame({"batch_size": [8], "length": [128.0], "seconds": [0.5]}))
       batch_size  length  seconds
    0           8     128      0.5
    >>> check_step_times(pd.DataFrame({"batch_size": [8], "length": [128], "seconds": [0]}), "t.csv")
    Traceback (most recent call last):
    ...
    ValueError: t.csv: row 0: seconds = 0 must be a finite time > 0
    """
    where = f"{source}: " if source else ""
    if not isinstance(frame, pd.DataFrame):
        raise ValueError(f"{where}step times must be a DataFrame, got {type(frame).__name__}")
    missing = [c for c in STEP_TIME_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(
            f"{where}step times need columns {', '.join(STEP_TIME_COLUMNS)}; missing {', '.join(missing)}"
        )
    out = frame[list(STEP_TIME_COLUMNS)].copy()
    if out.empty:
        raise ValueError(f"{where}no step times")
    for col in ("batch_size", "length"):
        values = pd.to_numeric(out[col], errors="coerce").to_numpy(dtype=float)
        bad = ~np.isfinite(values) | (values < 1) | (values != np.round(values))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f"{where}row {i}: {col} = {_plain(out[col].iloc[i])!r} is not a positive integer"
            )
        out[col] = values.astype(np.int64)
    seconds = pd.to_numeric(out["seconds"], errors="coerce").to_numpy(dtype=float)
    bad = ~np.isfinite(seconds) | (seconds <= 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"{where}row {i}: seconds = {_plain(out['seconds'].iloc[i])!r} must be a finite time > 0"
        )
    out["seconds"] = seconds
    return out.reset_index(drop=True)


# ------------------------------------------------------------------------------------ model
def _tiled(length: npt.ArrayLike, tile: int) -> np.ndarray:
    """Padded lengths (float64) rounded up to the kernel ``tile``."""
    return np.asarray(round_up(np.asarray(length, dtype=float), tile))


def _features(batch_size: npt.ArrayLike, length: npt.ArrayLike, tile: int) -> np.ndarray:
    b = np.asarray(batch_size, dtype=float)
    t = _tiled(length, tile)
    b, t = np.broadcast_arrays(b, t)
    return np.stack([np.ones_like(b), b, b * t, b * t * t, (b * t) ** 2], axis=-1)


@dataclass(frozen=True)
class StepTimeModel:
    """Step time in seconds of a batch of ``B`` samples padded to ``L`` tokens.

    ``per_step + per_sample * B + per_token * B * T(L) + attention * B * T(L)**2 +
    working_set * (B * T(L))**2`` with ``T(L)`` = ``L`` rounded up to ``tile``.  Build it with
    :meth:`fit`; ``measurements`` keeps the per-shape table of the fit (see :meth:`residuals`).

    Examples
    --------
    >>> model = StepTimeModel(per_step=0.01, per_token=1e-5, attention=1e-8)
    >>> round(model.predict(8, 1000), 4)  # 0.01 + 8e-5 * 1000 + 8e-8 * 1000**2
    0.17
    >>> model.predict([8, 16], 100).round(5).tolist()
    [0.0188, 0.0276]
    """

    per_step: float = 0.0
    per_sample: float = 0.0
    per_token: float = 0.0
    attention: float = 0.0
    working_set: float = 0.0
    tile: int = 1
    measurements: pd.DataFrame | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in STEP_TIME_TERMS:
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
        if not self.coefficients.any():
            raise ValueError("a step-time model needs at least one positive coefficient")

    @property
    def coefficients(self) -> np.ndarray:
        """``[per_step, per_sample, per_token, attention, working_set]``."""
        return np.array([getattr(self, name) for name in STEP_TIME_TERMS])

    @classmethod
    def fit(
        cls, frame: pd.DataFrame, *, terms: Iterable[str] = tuple(STEP_TIME_TERMS), tile: int = 1
    ) -> StepTimeModel:
        """Fit the model to measured step times (a :func:`measure_step_times` frame).

        Each shape's median time is fitted by non-negative least squares on relative errors
        (rows weighted by ``1 / median``); coefficients not in ``terms`` are 0.  Needs every
        shape measured at least twice (the spread of repeats is the noise the residuals are
        judged against) and more distinct shapes than terms.

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
        terms = list(terms)
        unknown = [t for t in terms if t not in STEP_TIME_TERMS]
        if unknown or not terms:
            raise ValueError(
                f"terms must be a non-empty subset of {', '.join(STEP_TIME_TERMS)}, got {terms!r}"
            )
        groups = data.groupby(["batch_size", "length"], sort=True)["seconds"]
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
        if len(per_shape) <= len(terms):
            raise ValueError(
                f"{len(per_shape)} distinct shapes cannot fit {len(terms)} terms; "
                f"measure at least {len(terms) + 1}"
            )
        cols = [list(STEP_TIME_TERMS).index(t) for t in terms]
        x = _features(per_shape["batch_size"], per_shape["length"], tile)[:, cols]
        y = per_shape["seconds"].to_numpy()
        scale = x.max(axis=0)  # columns of comparable size for the solver
        scale[scale == 0] = 1.0
        from scipy.optimize import nnls  # imported on first fit (~0.5 s)

        coef, _ = nnls(x / y[:, None] / scale, np.ones_like(y))
        full = np.zeros(len(STEP_TIME_TERMS))
        full[cols] = coef / scale
        per_step, per_sample, per_token, attention, working_set = (float(v) for v in full)
        model = cls(per_step, per_sample, per_token, attention, working_set, tile)
        per_shape["predicted"] = model.predict(per_shape["batch_size"], per_shape["length"])
        per_shape["residual"] = per_shape["seconds"] - per_shape["predicted"]
        per_shape["relative_residual"] = per_shape["residual"] / per_shape["seconds"]
        per_shape = per_shape[
            [
                "batch_size",
                "length",
                "repeats",
                "seconds",
                "spread",
                "predicted",
                "residual",
                "relative_residual",
            ]
        ]
        return dataclasses.replace(model, measurements=per_shape)

    def predict(self, batch_size: npt.ArrayLike, length: npt.ArrayLike) -> Any:
        """Predicted seconds of steps of ``batch_size`` samples padded to ``length``
        (broadcast; a float for scalars, else an array)."""
        out = _features(batch_size, length, self.tile) @ self.coefficients
        return float(out) if np.ndim(out) == 0 else out

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
        t = _tiled(length, self.tile)
        return np.asarray(self.per_token * t + self.attention * t * t), np.asarray(self.working_set * t * t)

    def to_frame(self) -> pd.DataFrame:
        """The coefficients: one row per term (``feature``, ``coefficient`` in seconds)."""
        return pd.DataFrame(
            {"feature": list(STEP_TIME_TERMS.values()), "coefficient": self.coefficients.tolist()},
            index=pd.Index(list(STEP_TIME_TERMS), name="term"),
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
