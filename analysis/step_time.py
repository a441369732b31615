"""Step times measured on your model and hardware: a fitted model and the throughput it predicts.

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

The model is linear in its coefficients, so the expected time of an epoch is exact from the
same order statistics as :func:`analysis.expected_padding`: a bucket of ``n`` samples cut into
batches of ``B`` costs ``per_step * ceil(n / B) + per_sample * n + E[sum over batches of
B * g_B(longest)]`` with ``g_B(L) = per_token * T(L) + (attention + working_set * B) * T(L)**2``
(:meth:`StepTimeModel.sample_seconds`)
(:func:`expected_epoch_time`, for ``sorted``, ``random`` and ``bucketed``).  Other strategies
are priced batch by batch over simulated epochs (:func:`simulated_epoch_times`); with
``world_size > 1`` a step lasts as long as its slowest rank.
:func:`predict_strategy_throughput` puts both beside the padded-token prediction, and
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
import pandas as pd

from analysis._order_stats import expected_batch_sum
from analysis._validate import known_name
from analysis.batching import BatchRule, as_rule, bucket_bounds, check_edges, positive_int, round_up
from analysis.lengths import LengthHistogram
from analysis.optimize import sweep_bucket_counts
from analysis.simulation import simulate
from analysis.strategies import EXACT_STRATEGIES, STRATEGIES, strategy_rule
from analysis.throughput import predict_throughput
from analysis.waste import bucketed_estimate, random_padding, sorted_padding

__all__ = [
    "STEP_TIME_COLUMNS",
    "STEP_TIME_TERMS",
    "measure_step_times",
    "calibration_shapes",
    "check_step_times",
    "StepTimeModel",
    "expected_epoch_time",
    "simulated_epoch_times",
    "predict_strategy_throughput",
    "sweep_throughput",
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
#: The strategies whose expected epoch time is exact (order statistics or deterministic).
_DEFAULT_STRATEGIES = ("sorted", "random", "bucketed", "length_grouped", "token_budget")


# --------------------------------------------------------------------------------- measuring
def _check_shapes(shapes: Any) -> list[tuple[int, int]]:
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
    step: Callable[[int, int], Any],
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


def _plain(value: Any) -> Any:
    """A NumPy scalar as the Python value (for error messages)."""
    return value.item() if isinstance(value, np.generic) else value


def check_step_times(frame: Any, source: str | None = None) -> pd.DataFrame:
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
def _tiled(length: Any, tile: int) -> np.ndarray:
    """Padded lengths (float64) rounded up to the kernel ``tile``."""
    return np.asarray(round_up(np.asarray(length, dtype=float), tile))


def _features(batch_size: Any, length: Any, tile: int) -> np.ndarray:
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

    def predict(self, batch_size: Any, length: Any) -> Any:
        """Predicted seconds of steps of ``batch_size`` samples padded to ``length``
        (broadcast; a float for scalars, else an array)."""
        out = _features(batch_size, length, self.tile) @ self.coefficients
        return float(out) if np.ndim(out) == 0 else out

    def sample_seconds(self, length: Any, batch_size: Any) -> np.ndarray:
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

    def sample_seconds_parts(self, length: Any) -> tuple[np.ndarray, np.ndarray]:
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


# ------------------------------------------------------------------------------- prediction
def _check_model(model: Any) -> StepTimeModel:
    if not isinstance(model, StepTimeModel):
        raise ValueError(f"model must be a StepTimeModel, got {type(model).__name__}")
    return model


def _as_hist(lengths: Any) -> LengthHistogram:
    return lengths if isinstance(lengths, LengthHistogram) else LengthHistogram.from_lengths(lengths)


def _sorted_batches(hist: LengthHistogram, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Sizes and longest samples of the ``sorted`` strategy's batches (deterministic)."""
    n = hist.n_samples
    n_batches = -(-n // size)
    last = np.minimum(np.arange(1, n_batches + 1, dtype=np.int64) * size, n) - 1
    longest = hist.lengths[np.searchsorted(hist.cumulative_counts(), last, side="right")]
    sizes = np.full(n_batches, size, dtype=np.int64)
    sizes[-1] = n - size * (n_batches - 1)
    return sizes, longest


def _bucketed_seconds(
    hist: LengthHistogram, model: StepTimeModel, edges: list[int], rule: BatchRule
) -> float:
    """Exact expected seconds of a bucketed shuffle on validated ``edges`` (one rank)."""
    alone, per_b = model.sample_seconds_parts(round_up(hist.lengths, rule.pad_to_multiple_of))
    total = []
    for lo, hi, size in zip(*bucket_bounds(hist.lengths, edges), rule.batch_sizes(edges), strict=True):
        if lo == hi:
            continue
        cum = np.cumsum(hist.counts[lo:hi])
        n = int(cum[-1])
        total.append(model.per_step * -(-n // size) + model.per_sample * n)
        total.append(expected_batch_sum(alone[lo:hi], cum, size, per_b[lo:hi]))
    return math.fsum(total)


def expected_epoch_time(
    hist: LengthHistogram | Sequence[int] | np.ndarray,
    model: StepTimeModel,
    strategy: str = "bucketed",
    rule: BatchRule | None = None,
    *,
    edges: Sequence[int] | None = None,
    batch_size: int | None = None,
    max_tokens: int | None = None,
    pad_to_multiple_of: int | None = None,
) -> float:
    """Exact expected seconds of one epoch of ``sorted``, ``random`` or ``bucketed`` (one rank).

    ``bucketed`` (needs ``edges``): per bucket of ``n`` samples and batch size ``B`` (from the
    rule), ``per_step * ceil(n/B) + per_sample * n`` plus the expected sum over its batches of
    ``B * g_B(longest)`` (:meth:`StepTimeModel.sample_seconds`; order statistics of a
    shuffle: full batches and the partial one, as in :func:`~analysis.expected_padding`; ``T``
    rounds the longest up to ``pad_to_multiple_of`` and then to the model's ``tile``).
    ``random`` is one bucket; ``sorted`` is deterministic.  Both use one batch size for the
    epoch (``rule.fixed_batch_size``).

    Examples
    --------
    >>> model = StepTimeModel(per_step=1.0, per_token=0.1)
    >>> expected_epoch_time([1, 1, 3], model, "random", batch_size=2)  # 2 steps + 0.1 * 19/3
    2.6333333333333333
    >>> expected_epoch_time([1, 1, 3], model, "sorted", batch_size=2)  # {1,1} {3}: 2 + 0.1 * 5
    2.5
    """
    model = _check_model(model)
    hist = _as_hist(hist)
    rule = as_rule(rule, batch_size=batch_size, max_tokens=max_tokens, pad_to_multiple_of=pad_to_multiple_of)
    if strategy not in EXACT_STRATEGIES:
        raise ValueError(
            f"no exact expected time for {strategy!r}; choose one of "
            f"{', '.join(EXACT_STRATEGIES)} (or use simulated_epoch_times)"
        )
    if strategy == "bucketed":
        if edges is None:
            raise ValueError("strategy 'bucketed' needs edges")
        return _bucketed_seconds(hist, model, check_edges(edges, hist), rule)
    fixed = BatchRule(rule.fixed_batch_size(hist.max), None, rule.pad_to_multiple_of)
    if strategy == "random":
        return _bucketed_seconds(hist, model, [hist.min - 1, hist.max], fixed)
    assert fixed.batch_size is not None
    sizes, longest = _sorted_batches(hist, fixed.batch_size)
    return math.fsum(model.predict(sizes, round_up(longest, rule.pad_to_multiple_of)).tolist())


def simulated_epoch_times(
    lengths: LengthHistogram | Sequence[int] | np.ndarray,
    model: StepTimeModel,
    strategy: str,
    rule: BatchRule | None = None,
    *,
    rng: np.random.Generator,
    epochs: int = 3,
    world_size: int = 1,
    edges: Sequence[int] | None = None,
    sync_buckets: bool = True,
    batch_size: int | None = None,
    max_tokens: int | None = None,
    pad_to_multiple_of: int | None = None,
) -> pd.DataFrame:
    """Seconds and useful tokens of simulated epochs, the model applied to every batch.

    The epochs are :func:`~analysis.simulate`'s (same rule, ``edges``, ``world_size``,
    ``sync_buckets``).  A step lasts as long as its slowest rank's batch.  A ``packing`` bin
    is priced as one sequence of the token budget (dense attention over the bin).

    Returns
    -------
    pandas.DataFrame
        Index ``epoch``; columns ``seconds``, ``useful_tokens``, ``padded_tokens``, ``steps``,
        ``tokens_per_s``.

    Examples
    --------
    >>> model = StepTimeModel(per_step=1.0, per_token=0.1)
    >>> out = simulated_epoch_times([1, 2, 3, 4], model, "sorted", rng=np.random.default_rng(0),
    ...                             epochs=2, batch_size=2)
    >>> out["seconds"].tolist()  # 2 steps + 0.1 * (2 * 2 + 2 * 4)
    [3.2, 3.2]
    """
    model = _check_model(model)
    rule = as_rule(rule, batch_size=batch_size, max_tokens=max_tokens, pad_to_multiple_of=pad_to_multiple_of)
    res = simulate(
        lengths,
        strategy,
        rule,
        rng=rng,
        epochs=epochs,
        world_size=world_size,
        edges=edges,
        sync_buckets=sync_buckets,
    )
    batches = res.batches
    if strategy == "packing":
        budget = rule.token_budget(_as_hist(lengths).max)  # as the simulated builder's
        seconds = model.predict(np.ones(len(batches)), np.full(len(batches), budget))
    else:
        padded = round_up(batches["longest"].to_numpy(), rule.pad_to_multiple_of)
        seconds = model.predict(batches["size"].to_numpy(), padded)
    steps = pd.DataFrame({"epoch": batches["epoch"], "step": batches["step"], "seconds": seconds})
    per_step = steps.groupby(["epoch", "step"])["seconds"].max()
    out = pd.DataFrame(
        {
            "seconds": per_step.groupby(level="epoch").sum(),
            "useful_tokens": res.epochs["useful_tokens"].astype(float),
            "padded_tokens": res.epochs["padded_tokens"].astype(float),
            "steps": per_step.groupby(level="epoch").size(),
        }
    )
    out["tokens_per_s"] = out["useful_tokens"] / out["seconds"]
    out.index.name = "epoch"
    return out


def predict_strategy_throughput(
    lengths: LengthHistogram | Sequence[int] | np.ndarray,
    model: StepTimeModel,
    rule: BatchRule | None = None,
    *,
    edges: Sequence[int],
    rng: np.random.Generator,
    strategies: Sequence[str] = _DEFAULT_STRATEGIES,
    world_size: int = 1,
    epochs: int = 3,
    reference: str = "sorted",
    reference_tokens_per_s: float | None = None,
    batch_size: int | None = None,
    max_tokens: int | None = None,
    pad_to_multiple_of: int | None = None,
) -> pd.DataFrame:
    """Predicted useful tokens/s of each strategy: the step-time model beside padded tokens.

    ``sorted``, ``random`` and ``bucketed`` are exact (:func:`expected_epoch_time`) when
    ``world_size == 1``; the others, and every strategy when ``world_size > 1`` (a step waits
    for its slowest rank), come from ``epochs`` simulated epochs
    (:func:`simulated_epoch_times`; tokens/s is pooled over them, ``tokens_per_s_se`` is the
    standard error across epochs).  Each strategy reads the rule as
    :func:`~analysis.compare_strategies` does (the token strategies get
    ``rule.token_budget(longest)``); ``batch_rule`` says what each row used.

    The padded-token prediction (:func:`~analysis.predict_throughput`) scales the
    ``reference`` strategy's tokens/s by efficiency; that reference is
    ``reference_tokens_per_s`` when given (a measured run), else the step-time model's own
    prediction for it.

    Returns
    -------
    pandas.DataFrame
        Index ``strategy``; columns ``batch_rule``, ``exact``, ``batches``, ``useful_tokens``,
        ``efficiency``, ``seconds`` (per epoch, all ranks in parallel), ``tokens_per_s``,
        ``tokens_per_s_se`` (0 when exact), ``padded_tokens_per_s``.

    Examples
    --------
    >>> model = StepTimeModel(per_step=0.05, per_token=1e-5, attention=1e-8)
    >>> lengths = np.random.default_rng(0).integers(10, 500, size=300)
    >>> table = predict_strategy_throughput(lengths, model, edges=[0, 100, 250, 499],
    ...     batch_size=8, strategies=["sorted", "random", "bucketed"], rng=np.random.default_rng(1))
    >>> table[["exact", "tokens_per_s", "padded_tokens_per_s"]].round(-1)
              exact  tokens_per_s  padded_tokens_per_s
    strategy
    sorted     True       26680.0              26680.0
    random     True       20660.0              16060.0
    bucketed   True       24010.0              21420.0
    """
    model = _check_model(model)
    hist = _as_hist(lengths)
    rule = as_rule(rule, batch_size=batch_size, max_tokens=max_tokens, pad_to_multiple_of=pad_to_multiple_of)
    edges = check_edges(edges, hist)
    world_size = positive_int(world_size, "world_size")
    names = list(strategies)
    for name in names:
        known_name(name, STRATEGIES, "strategy")
    if reference not in names:
        raise ValueError(f"reference {reference!r} is not among the strategies")
    exact = {
        "random": lambda: random_padding(hist, rule),
        "sorted": lambda: sorted_padding(hist, rule),
        "bucketed": lambda: bucketed_estimate(hist, edges, rule),
    }
    rows: list[dict[str, Any]] = []
    for name in names:
        label = strategy_rule(name, rule, hist.max).text
        if world_size == 1 and name in EXACT_STRATEGIES:
            seconds = expected_epoch_time(hist, model, name, rule, edges=edges)
            est = exact[name]()
            rows.append(
                {
                    "strategy": name,
                    "batch_rule": label,
                    "exact": True,
                    "batches": float(est.n_batches),
                    "useful_tokens": float(hist.total_tokens),
                    "efficiency": float(est.efficiency),
                    "seconds": seconds,
                    "tokens_per_s": hist.total_tokens / seconds,
                    "tokens_per_s_se": 0.0,
                }
            )
            continue
        sim = simulated_epoch_times(
            lengths,
            model,
            name,
            rule,
            rng=rng,
            epochs=epochs,
            world_size=world_size,
            edges=edges if name == "bucketed" else None,
        )
        se = float(sim["tokens_per_s"].std(ddof=1) / math.sqrt(len(sim))) if len(sim) > 1 else float("nan")
        rows.append(
            {
                "strategy": name,
                "batch_rule": label,
                "exact": False,
                "batches": float(sim["steps"].mean() * world_size),
                "useful_tokens": float(sim["useful_tokens"].mean()),
                "efficiency": float(sim["useful_tokens"].sum() / sim["padded_tokens"].sum()),
                "seconds": float(sim["seconds"].mean()),
                "tokens_per_s": float(sim["useful_tokens"].sum() / sim["seconds"].sum()),
                "tokens_per_s_se": se,
            }
        )
    table = pd.DataFrame(rows).set_index("strategy")
    ref = rows[names.index(reference)]
    table["padded_tokens_per_s"] = predict_throughput(
        table["efficiency"].to_numpy(),
        reference_tokens_per_s=float(
            ref["tokens_per_s"] if reference_tokens_per_s is None else reference_tokens_per_s
        ),
        reference_efficiency=float(ref["efficiency"]),
    )
    return table


def sweep_throughput(
    hist: LengthHistogram,
    model: StepTimeModel,
    n_buckets: Iterable[int] = range(1, 9),
    rule: BatchRule | None = None,
    *,
    batch_size: int | None = None,
    max_tokens: int | None = None,
    pad_to_multiple_of: int | None = None,
    candidates: int | str | None = "auto",
) -> pd.DataFrame:
    """Predicted tokens/s against the number of buckets, for optimal edges of two objectives.

    For each ``K`` in ``n_buckets``: the edges minimising padding and the edges minimising
    expected time under ``model`` (:func:`~analysis.sweep_bucket_counts` with ``step_time``;
    one DP pass each), both priced exactly by :func:`expected_epoch_time`.

    Returns
    -------
    pandas.DataFrame
        Columns ``n_buckets``, ``objective`` (``"padding"`` or ``"time"``), ``edges``,
        ``efficiency``, ``seconds``, ``tokens_per_s``.

    Examples
    --------
    >>> hist = LengthHistogram.from_counts([10, 20, 200, 400], [30, 30, 20, 20])
    >>> model = StepTimeModel(per_step=0.5, per_token=1e-3, attention=1e-5)
    >>> sweep_throughput(hist, model, [1, 2], batch_size=4)[["n_buckets", "objective", "edges"]]
       n_buckets objective          edges
    0          1   padding       [0, 400]
    1          1      time       [0, 400]
    2          2   padding   [0, 20, 400]
    3          2      time  [0, 200, 400]
    """
    model = _check_model(model)
    rule = as_rule(rule, batch_size=batch_size, max_tokens=max_tokens, pad_to_multiple_of=pad_to_multiple_of)
    ks = list(n_buckets)
    sweeps = {
        objective: sweep_bucket_counts(
            hist, ks, ["optimal"], rule, candidates=candidates, step_time=step_time
        )
        for objective, step_time in (("padding", None), ("time", model))
    }
    rows = []
    for k in ks:
        for objective, sweep in sweeps.items():
            row = sweep[sweep["n_buckets"] == k].iloc[0]
            seconds = expected_epoch_time(hist, model, "bucketed", rule, edges=row["edges"])
            rows.append(
                {
                    "n_buckets": k,
                    "objective": objective,
                    "edges": row["edges"],
                    "efficiency": float(row["efficiency"]),
                    "seconds": seconds,
                    "tokens_per_s": hist.total_tokens / seconds,
                }
            )
    return pd.DataFrame(rows)
