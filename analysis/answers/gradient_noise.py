"""Every strategy priced in gradient noise: simulated epochs, each batch's (and each window of
consecutive batches') expected error from a :class:`~analysis.timing.noise.GradientNoise`
model's bin means and noise.

The closed-form plans (``random``, ``sorted``, ``bucketed``) are priced exactly per step by
:func:`analysis.timing.noise.plan_noise`; here every strategy of
:mod:`analysis.simulation.strategies` is simulated, and the **window noise** is measured:
the mean squared error of the *sum* of ``W`` consecutive batch gradients, per step
(``E|Σ_t (g_t - G)|**2 / W``).  For independent steps it equals the per-step variance
whatever ``W``; where a strategy's order makes consecutive errors point the same way (the
Trainer's length grouping sorts each megabatch by length, so a run of steps sees the same
lengths) it grows with ``W``: the noise that gradient accumulation (``W`` = its steps) and an
optimiser's momentum average over.

Each simulated batch is a set of samples whose bins are known; its samples are taken as a
random subset of their bins (the model's exchangeability), so a window's expected error is
exact given its composition (:func:`analysis.timing.noise.composition_error`; averaged over
windows by :func:`analysis.timing.noise.mean_composition_error`), and the only
simulation noise is which compositions the epochs drew.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from analysis._validate import check_rng, positive_int
from analysis.batching import BatchRule, as_rule
from analysis.lengths import LengthHistogram, as_histogram
from analysis.optimize import evaluate_edges, optimize_edges
from analysis.optimize.gradient import plan_gradient
from analysis.padding.waste import sorted_padding
from analysis.simulation.epochs import simulation_sample
from analysis.simulation.strategies import PADDING_NOISE, STRATEGIES, Epoch, epoch_builder
from analysis.timing.noise import (
    NOISE_WINDOWS,
    GradientNoise,
    NoiseFigure,
    PlanNoise,
    check_noise,
    jackknife_figures,
    mean_composition_error,
    plan_noise,
    time_to_quality,
)
from analysis.timing.step_time import StepTimeModel

__all__ = [
    "NOISE_COLUMNS",
    "PlanQuality",
    "gradient_noise_record",
    "plan_quality",
    "quality_plans",
    "quality_sweep",
    "strategy_noise",
    "window_compositions",
]

#: The columns of :func:`strategy_noise`'s frame.
NOISE_COLUMNS = ("strategy", "window", "variance", "se", "model_se", "ratio", "ratio_se")


def window_compositions(
    epoch: Epoch, bins: np.ndarray, n_bins: int, window: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per window of ``window`` consecutive batches of ``epoch`` (the last, incomplete one
    dropped): per bin, the sum of its samples' weights ``1 / s_t`` in their batch's mean
    and the sum of the squared weights (rows: windows).

    Examples
    --------
    >>> ep = Epoch(indices=np.array([0, 1, 2]), offsets=np.array([0, 2, 3]),
    ...            buckets=np.array([-1, -1]), strategy="random")
    >>> a, q = window_compositions(ep, np.array([0, 1, 1]), 2, 2)
    >>> a.tolist(), q.tolist()
    ([[0.5, 1.5]], [[0.25, 1.25]])
    """
    sizes = epoch.sizes
    n_windows = sizes.size // window
    used = int(epoch.offsets[n_windows * window])
    of_batch = np.repeat(np.arange(sizes.size) // window, sizes)[:used]
    weight = np.repeat(1.0 / sizes, sizes)[:used]
    key = of_batch * n_bins + bins[epoch.indices[:used]]
    a = np.bincount(key, weights=weight, minlength=n_windows * n_bins).reshape(n_windows, n_bins)
    q = np.bincount(key, weights=weight * weight, minlength=n_windows * n_bins).reshape(n_windows, n_bins)
    return a, q


def strategy_noise(
    model: GradientNoise,
    lengths: LengthHistogram | Sequence[int] | np.ndarray,
    strategies: Sequence[str] = STRATEGIES,
    rule: BatchRule | None = None,
    *,
    rng: np.random.Generator,
    edges: Sequence[int] | None = None,
    windows: Sequence[int] = NOISE_WINDOWS,
    epochs: int = 8,
    batch_size: int | None = None,
    max_tokens: int | None = None,
    gradient_accumulation_steps: int = 1,
    padding_noise: float = PADDING_NOISE,
) -> pd.DataFrame:
    """Simulated gradient noise of each strategy per window of consecutive steps.

    Parameters
    ----------
    model : GradientNoise
        The fitted noise model.
    lengths : LengthHistogram or array of int
        The dataset (a histogram over the simulation limit is subsampled, as :func:`simulate`
        does, and priced as that subsample).
    strategies : sequence of str
        Strategies of :mod:`analysis.simulation.strategies` (``random`` is added: the ratios
        are against it); ``bucketed`` needs ``edges``.
    rule, batch_size, max_tokens, gradient_accumulation_steps, padding_noise
        The batch rule, the ``length_grouped`` and ``token_budget`` options, as in
        :func:`analysis.simulate`.
    rng : numpy.random.Generator
        The epochs' only source of randomness.
    windows : sequence of int, default (1, 4, 16)
        ``W``: consecutive steps whose summed error is measured.
    epochs : int, default 8
        Simulated epochs per strategy (at least 2: the simulation's standard error is the
        spread between epochs).

    Returns
    -------
    pandas.DataFrame
        One row per strategy and window: ``variance`` (``E|Σ_t (g_t - G)|**2 / W``), ``se``
        (its simulation standard error), ``model_se`` (the model's jackknife), ``ratio`` (over
        ``random``'s at the same ``W``) and ``ratio_se`` (jackknife and simulation together).

    Examples
    --------
    >>> from analysis.timing.noise import toy_model
    >>> lengths = np.repeat(np.arange(1, 101), 20)
    >>> frame = strategy_noise(toy_model(), lengths, ["length_grouped"], rng=np.random.default_rng(0),
    ...                        batch_size=8, windows=[1, 16], epochs=3)
    >>> frame[["strategy", "window"]].values.tolist()
    [['random', 1], ['random', 16], ['length_grouped', 1], ['length_grouped', 16]]
    >>> bool(frame["ratio"].iloc[3] > frame["ratio"].iloc[2])  # runs of one length add up
    True
    """
    check_noise(model)
    check_rng(rng)
    rule = as_rule(rule, batch_size=batch_size, max_tokens=max_tokens)
    epochs = positive_int(epochs, "epochs")
    if epochs < 2:
        raise ValueError(f"epochs must be at least 2 (the standard error is their spread), got {epochs}")
    ws = [positive_int(w, "window") for w in windows]
    if not ws:
        raise ValueError("windows must name at least one window")
    names = ["random", *[s for s in dict.fromkeys(strategies) if s != "random"]]
    data, _ = simulation_sample(lengths if isinstance(lengths, LengthHistogram) else np.asarray(lengths), rng)
    arr = data.expand() if isinstance(data, LengthHistogram) else np.asarray(data)
    bins = model.bin_of(arr)
    n, keys = np.bincount(bins, minlength=model.n_bins), [(name, w) for name in names for w in ws]
    # values[m, k, e]: epoch e's mean window error per step of key k under model m (0: the
    # fitted model, then each jackknife replicate); compositions are dropped once priced
    models = [(model.gram, model.within), *model.replicates()]
    values = np.full((len(models), len(keys), epochs), math.nan)
    for name in names:
        builder = epoch_builder(
            arr,
            name,
            rule,
            edges=edges if name == "bucketed" else None,
            gradient_accumulation_steps=gradient_accumulation_steps,
            padding_noise=padding_noise,
        )
        for e in range(epochs):
            epoch = builder.epoch(rng)
            for w in ws:
                a, q = window_compositions(epoch, bins, model.n_bins, w)
                if len(a):
                    k = keys.index((name, w))
                    values[:, k, e] = mean_composition_error(models, n, a, q, w) / w
    means = values.mean(axis=2)  # (models, keys)
    ref = np.stack([means[:, keys.index(("random", w))] for _, w in keys], axis=1)
    figures = jackknife_figures(means[0], means[1:])
    ratios = jackknife_figures(means[0] / ref[0], means[1:] / ref[1:])
    rows = []
    for k, (name, w) in enumerate(keys):
        spread = values[0, k]
        base = values[0, keys.index(("random", w))]
        sim_se = float(spread.std(ddof=1) / math.sqrt(epochs))
        ratio_sim = float((spread / base).std(ddof=1) / math.sqrt(epochs)) if name != "random" else 0.0
        value, ratio = figures[k], ratios[k]
        rows.append((name, w, value.value, sim_se, value.se, ratio.value, math.hypot(ratio.se, ratio_sim)))
    return pd.DataFrame(rows, columns=list(NOISE_COLUMNS))


@dataclass(frozen=True, kw_only=True)
class PlanQuality:
    """What the faces say of one plan in gradient noise (:func:`plan_quality`): its exact
    :class:`~analysis.timing.noise.PlanNoise`, the share of a shuffle's effective batch it keeps
    and, with a step-time model, its predicted time to the same loss over a shuffle's.

    ``shuffle_effective_batch`` is a full shuffle's ``B_eff`` under the same rule (the batch
    size itself when every batch is full: ``B_eff = 1 / (variance / tr Σ + 1 / N)`` and a
    shuffle's ``variance`` is ``tr Σ / B * (1 - B / N)``, whatever the model);
    ``effective_batch_share`` is ``B_eff`` over it (a shuffle keeps 1), its standard error
    ``B_eff``'s over the same (a shuffle's ``B_eff`` depends on the model only through a last,
    shorter batch).  ``time_ratio`` and ``epoch_ratio``:
    :func:`analysis.timing.noise.time_to_quality` (None without a step-time model);
    ``n_buckets``: the plan's K (None for ``random`` and ``sorted``).
    """

    strategy: str
    n_buckets: int | None
    noise: PlanNoise
    shuffle_effective_batch: float
    effective_batch_share: NoiseFigure
    time_ratio: NoiseFigure | None = None
    epoch_ratio: float | None = None

    @property
    def effective_batch(self) -> NoiseFigure:
        """``B_eff`` (:attr:`PlanNoise.effective_batch`)."""
        return self.noise.effective_batch

    @property
    def steps_ratio(self) -> NoiseFigure:
        """Predicted steps to the same loss over a shuffle's (:attr:`PlanNoise.steps_ratio`)."""
        return self.noise.steps_ratio

    @property
    def time_speedup(self) -> NoiseFigure:
        """How many times sooner than a shuffle the plan reaches the same loss: ``1 /
        time_ratio``, its standard error ``se / time_ratio**2`` (the delta method; NaN without
        a step-time model)."""
        t = self.time_ratio
        if t is None:
            return NoiseFigure(value=math.nan, se=math.nan)
        return NoiseFigure(value=1 / t.value, se=t.se / t.value**2)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: every :class:`PlanNoise` figure and the share, each ``{"value", "se"}``."""

        def figure(f: NoiseFigure | None) -> dict[str, float] | None:
            return None if f is None else {"value": f.value, "se": f.se}

        priced = self.noise.to_frame()
        return {
            "strategy": self.strategy,
            "n_buckets": self.n_buckets,
            "steps": self.noise.steps,
            "batch_size": self.noise.batch_size,
            **{
                str(name): {"value": float(r["value"]), "se": float(r["se"])} for name, r in priced.iterrows()
            },
            "shuffle_effective_batch": self.shuffle_effective_batch,
            "effective_batch_share": figure(self.effective_batch_share),
            "time_ratio": figure(self.time_ratio),
            "time_speedup": figure(self.time_speedup) if self.time_ratio is not None else None,
            "epoch_ratio": self.epoch_ratio,
        }


def plan_quality(
    model: GradientNoise,
    hist: LengthHistogram | Sequence[int] | np.ndarray,
    rule: BatchRule | None = None,
    *,
    edges: Sequence[int] | None = None,
    strategy: str = "bucketed",
    step_time: StepTimeModel | None = None,
    batch_size: int | None = None,
    max_tokens: int | None = None,
    shuffle_effective_batch: float | None = None,
) -> PlanQuality:
    """One plan's gradient noise as the faces state it (:class:`PlanQuality`): exact
    (:func:`analysis.timing.noise.plan_noise`), with the time to the same loss when a
    ``step_time`` model is given (:func:`analysis.timing.noise.time_to_quality`).
    ``shuffle_effective_batch``: a shuffle's ``B_eff`` on ``hist`` under ``rule`` when known
    (the explorer keeps it per rule), else priced here.

    Examples
    --------
    >>> from analysis.timing.noise import toy_model
    >>> hist = LengthHistogram.from_counts([5, 50], [40, 40])
    >>> q = plan_quality(toy_model(), hist, edges=[0, 10, 50], batch_size=4)
    >>> share = q.effective_batch_share
    >>> q.n_buckets, round(q.shuffle_effective_batch, 6), round(share.value, 4), q.time_ratio
    (2, 4.0, 0.9779, None)
    >>> clock = StepTimeModel(per_step=0.01, per_token=1e-3)
    >>> q = plan_quality(toy_model(), hist, edges=[0, 10, 50], batch_size=4, step_time=clock)
    >>> round(q.time_ratio.value, 3), round(q.epoch_ratio, 3)
    (0.604, 0.601)
    """
    check_noise(model)
    hist = as_histogram(hist)
    rule = as_rule(rule, batch_size=batch_size, max_tokens=max_tokens)
    priced = plan_noise(model, hist, strategy, rule, edges=edges)
    shuffle = (
        plan_noise(model, hist, "random", rule).effective_batch.value
        if shuffle_effective_batch is None
        else float(shuffle_effective_batch)
    )
    b_eff = priced.effective_batch
    share = NoiseFigure(value=b_eff.value / shuffle, se=b_eff.se / shuffle)
    time, epoch = None, None
    if step_time is not None:
        time, _, epoch = time_to_quality(model, step_time, hist, strategy, rule, edges=edges)
    return PlanQuality(
        strategy=strategy,
        n_buckets=None if strategy != "bucketed" or edges is None else len(edges) - 1,
        noise=priced,
        shuffle_effective_batch=shuffle,
        effective_batch_share=share,
        time_ratio=time,
        epoch_ratio=epoch,
    )


def gradient_noise_record(
    model: GradientNoise,
    hist: LengthHistogram,
    edges: Sequence[int],
    rule: BatchRule,
    *,
    rng: np.random.Generator,
    epochs: int = 3,
    step_time: StepTimeModel | None = None,
) -> dict[str, object]:
    """What ``recommendation.json`` records of a gradient-noise model (JSON-ready): the
    model (its bins: ``edges`` and the probed ``bin_samples``; its cost in ``backward_passes``
    of ``group_size`` samples; its figures on ``hist``, each ``{"value", "se"}``: ``trace``
    ``tr Σ``, ``gradient_norm2`` ``|G|**2``, ``noise_scale`` ``B_noise``, ``between_share``),
    the plan of ``edges`` priced exactly (:func:`plan_quality`: every
    :class:`~analysis.timing.noise.PlanNoise` figure, the share of a shuffle's effective batch
    and, with ``step_time``, the time to the same loss) and every strategy's window noise
    (:func:`strategy_noise`, rows as dicts; None where a window is longer than a strategy's
    epoch).  With ``step_time`` and a batch size, ``time_to_quality`` (:func:`quality_plans`):
    the plan's figures in the design-effect form beside the edges placed for time to quality
    at the same K, so the record shows what placing the edges for the noise buys.

    Examples
    --------
    >>> from analysis.timing.noise import toy_model
    >>> hist = LengthHistogram.from_lengths(np.repeat([5, 50], 40))
    >>> record = gradient_noise_record(toy_model(), hist, [0, 10, 50], BatchRule(batch_size=4),
    ...                                rng=np.random.default_rng(0), epochs=2)
    >>> sorted(record), record["model"]["bins"], record["model"]["edges"]
    (['model', 'plan', 'strategies', 'time_to_quality'], 2, [0, 10, 100])
    >>> round(record["plan"]["effective_batch"]["value"], 2), record["plan"]["time_ratio"]
    (3.91, None)
    >>> record["time_to_quality"] is None  # no step-time model
    True
    """
    check_noise(model)
    figures = {name: {"value": f.value, "se": f.se} for name, f in model.figures(hist).items()}
    quality = plan_quality(model, hist, rule, edges=edges, step_time=step_time)
    table = strategy_noise(model, hist, STRATEGIES, rule, rng=rng, edges=edges, epochs=epochs)
    return {
        "model": {
            "bins": model.n_bins,
            "edges": list(model.edges),
            "bin_samples": list(model.bin_samples),
            "backward_passes": model.backward_passes,
            "group_size": model.group_size,
            "sketch_dimension": model.dimension,
            **figures,
        },
        "plan": {"edges": list(edges), **quality.to_dict()},
        "strategies": [{str(c): _finite(v) for c, v in row.items()} for row in table.to_dict("records")],
        "time_to_quality": None if step_time is None else quality_plans(model, hist, edges, rule, step_time),
    }


def quality_plans(
    model: GradientNoise,
    hist: LengthHistogram,
    edges: Sequence[int],
    rule: BatchRule,
    step_time: StepTimeModel,
) -> dict[str, object] | None:
    """The plan of ``edges`` beside the edges placed for time to quality at its K (one
    :func:`analysis.optimize_edges` call with ``noise`` and ``step_time``), JSON-ready: for each
    (``given`` and ``placed``) its ``edges``, ``efficiency`` and :class:`~analysis.optimize.PlanGradient`
    figures (``between_share`` ``ρ``, the design-effect ``effective_batch_share``, the exact
    price, ``time_ratio`` exact and ``predicted_time_ratio`` in the design-effect form the
    optimiser minimises); ``buys``, the given plan's exact time ratio over the placed one's
    (above 1: placing the edges for the noise reaches the same loss that many times sooner).
    None under a token budget (each bucket has its own batch size: no design-effect form).

    Examples
    --------
    >>> from analysis.timing.noise import toy_model
    >>> hist = LengthHistogram.from_counts([5, 8, 50, 60], [40, 40, 40, 40])
    >>> clock = StepTimeModel(per_step=0.01, per_token=1e-3)
    >>> out = quality_plans(toy_model(), hist, [0, 5, 60], BatchRule(batch_size=4), clock)
    >>> out["placed"]["edges"], round(out["given"]["time_ratio"]["value"], 4), round(out["buys"], 4)
    ([0, 8, 60], 0.828, 1.2938)
    """
    if rule.batch_size is None:
        return None
    given = evaluate_edges(hist, list(edges), rule)
    priced = plan_noise(model, hist, "bucketed", rule, edges=given.edges)
    mine = plan_gradient(hist, given.edges, rule, model, priced.between_share.value, step_time)
    placed = optimize_edges(hist, given.n_buckets, rule, noise=model, step_time=step_time)
    theirs = placed.gradient
    assert theirs is not None and mine.time_ratio is not None and theirs.time_ratio is not None
    return {
        "given": {"edges": given.edges, "efficiency": given.efficiency, **mine.to_dict()},
        "placed": {"edges": placed.edges, "efficiency": placed.efficiency, **theirs.to_dict()},
        "buys": mine.time_ratio.value / theirs.time_ratio.value,
    }


def _finite(value: object) -> object:
    """``value``, or None for a non-finite float (a window longer than a strategy's epoch)."""
    return None if isinstance(value, float) and not math.isfinite(value) else value


def quality_sweep(
    model: GradientNoise,
    step_time: StepTimeModel,
    hist: LengthHistogram | Sequence[int] | np.ndarray,
    rule: BatchRule | None = None,
    *,
    max_buckets: int = 16,
    batch_size: int | None = None,
    max_tokens: int | None = None,
) -> pd.DataFrame:
    """Time to the same loss of the time-optimal edges for K = 1..``max_buckets`` and of
    sorted batching, over a shuffle's (:func:`analysis.timing.noise.time_to_quality`).

    Each K's edges minimise the expected epoch time (``optimize_edges(..., step_time=)``) and
    are then priced in gradient noise: the edges are not placed for the noise (the row with
    the smallest ``time_ratio`` is the best of these plans, not a proven optimum over all
    edges).  Columns: ``plan``, ``n_buckets``, ``efficiency``, ``epoch_ratio`` (epoch seconds
    over a shuffle's), ``effective_batch``, ``steps_ratio`` (steps to the same loss over a
    shuffle's) with ``steps_ratio_se``, ``time_ratio`` with ``time_ratio_se``.

    Examples
    --------
    >>> from analysis.timing.noise import toy_model
    >>> clock = StepTimeModel(per_step=0.01, per_token=1e-3)
    >>> hist = LengthHistogram.from_counts([5, 50], [40, 40])
    >>> sweep = quality_sweep(toy_model(), clock, hist, batch_size=4, max_buckets=2)
    >>> sweep[["plan", "epoch_ratio", "time_ratio"]].round(3).values.tolist()
    [['K=1', 1.0, 1.0], ['K=2', 0.601, 0.604], ['sorted', 0.601, 0.604]]
    """
    check_noise(model)
    hist = as_histogram(hist)
    rule = as_rule(rule, batch_size=batch_size, max_tokens=max_tokens)
    rows: list[tuple[str, int | None, float, str, list[int] | None]] = []
    for k in range(1, positive_int(max_buckets, "max_buckets") + 1):
        plan = optimize_edges(hist, k, rule, step_time=step_time)
        if plan.n_buckets < k:
            break
        rows.append((f"K={k}", k, plan.efficiency, "bucketed", plan.edges))
    rows.append(("sorted", None, sorted_padding(hist, rule).efficiency, "sorted", None))
    out = []
    for label, n_buckets, efficiency, strategy, edges in rows:
        t, steps, epoch = time_to_quality(model, step_time, hist, strategy, rule, edges=edges)
        b_eff = plan_noise(model, hist, strategy, rule, edges=edges).effective_batch.value
        out.append((label, n_buckets, efficiency, epoch, b_eff, steps.value, steps.se, t.value, t.se))
    columns = ["plan", "n_buckets", "efficiency", "epoch_ratio", "effective_batch", "steps_ratio"]
    return pd.DataFrame(out, columns=[*columns, "steps_ratio_se", "time_ratio", "time_ratio_se"])
