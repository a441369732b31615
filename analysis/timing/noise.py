"""The gradient noise a batching plan adds, in the model's own units: the probe, the fitted
:class:`GradientNoise` model and the exact price of the closed-form plans.

Mixing (:mod:`analysis.padding.mixing`) measures the *length* variety a batch keeps; what the
optimiser sees is the batch gradient.  With per-sample gradients ``g_i`` (of each sample's
own loss), the full gradient ``G`` (their mean over the dataset) and a batch gradient
``g_batch`` (the mean of its samples' gradients), a plan's **per-step variance** is
``E|g_batch - G|**2`` averaged over the steps of an epoch.  A full shuffle of ``B`` samples
has ``tr Σ / B * (1 - B / N)`` (``tr Σ``: the trace of the per-sample gradients' covariance,
``N - 1`` divisor).  A bucketed batch is a cluster sample: a batch of ``s`` from bucket
``b`` (``n_b`` samples, mean ``μ_b``, within-bucket trace ``S_b**2``) has ``S_b**2 / s * (1
- s / n_b) + |μ_b - G|**2``, which averages to a shuffle's times Kish's design effect ``1 +
(B - 1) ρ``, ``ρ = Σ_b w_b |μ_b - G|**2 / tr Σ`` the between-bucket share.  The plan trains
like a shuffle of the **effective batch** ``B_eff`` (the shuffle batch size with the same
per-step variance), and with the gradient noise scale ``B_noise = tr Σ / |G|**2``
(McCandlish et al. 2018, "An Empirical Model of Large-Batch Training") steps to a given loss
scale as ``1 + B_noise / B_eff``.

**The model.**  Samples are grouped into length bins; within a bin the gradients are taken
as exchangeable (which samples of a bin a batch holds does not matter, only how many).  Per
bin ``j`` the model holds the mean gradient ``μ_j`` (a sketched vector), the within-bin
trace ``S_j**2`` and the variance of the estimate of ``μ_j``.  Everything a plan's noise
needs is the Gram matrix ``μ_j . μ_k`` and the ``S_j**2``; the Gram matrix is
**unbiased**: each bin mean's own estimation noise is subtracted from its diagonal (a
one-way random-effects ANOVA), so ``|μ_b - G|**2`` of any bucket or batch is estimated
without the upward bias of squaring a noisy mean (which overstates ``ρ``, the more so the
fewer samples a bin has).  Given the bins, every formula here is exact (tests check them
against every batch of small datasets); where a bucket edge splits a bin, the bin's samples
on either side are taken as a random split, which is why the bins should be fine (quantile
bins; the default 32 leaves a bucket edge in the middle of a bin of ~3 % of the data).  Sorted
batching, whose batches hold neighbouring lengths, sees structure finer than any bin: on the
benchmark (``data/README.md``) 32 bins priced it 9 % low against a shuffle, 96 bins of the
same probe budget 4 % high, while every bucketed plan came within 1 % either way.

**The probe** (:func:`measure_gradient_noise`) calls your ``gradient(indices)``: the
gradient of the mean loss over those samples at one fixed checkpoint (no optimiser step),
flattened and sketched to a vector of a fixed dimension.  Per bin it draws
``groups_per_bin`` disjoint groups of ``group_size`` samples.  **Cost**: one call per group,
``n_bins * groups_per_bin`` backward passes of ``group_size`` samples each (32 x 16 = 512
single-sample passes by default: the backward passes of 64 training steps of 8 samples,
without the optimiser).  Larger groups cost more per pass and estimate ``S_j**2`` from fewer degrees of
freedom; ``group_size=1`` (per-sample gradients) is the most informative per sample.
**The checkpoint**: take one from the phase of training you are planning for, after the
first few hundred steps (at initialisation ``|G|**2`` is dominated by learning the unigram
distribution and ``B_noise`` is far smaller than later); ``B_noise`` grows as the loss
falls, so re-probe when the plan is for a much later phase.  The model's figures carry
standard errors from a delete-a-fold jackknife over the probe's groups (``folds``): honest
to conservative (in the tests up to ~2x the spread of repeated probes where the between-bin
part is small against the noise of the bin means).

**Loss normalisation.**  The model prices a batch gradient as the *mean over samples* of
its samples' gradients (each sample's loss being its token-mean).  Under the Hugging Face
causal-LM loss (the mean over all tokens of the batch) a batch gradient weights each sample
by its tokens instead; within one bin lengths are close, so the probe's groups give nearly
the same gradient either way, and the per-bin figures hold; the pricing of batches that mix
lengths (a shuffle) is then approximate.  The callable below shows both.

**The contract, with PyTorch** (not run here; ``import analysis`` never imports torch).
Count-sketch the flattened gradient to ``dim`` coordinates (a fixed random bucket and sign
per parameter: inner products are preserved in expectation):

>>> import torch  # doctest: +SKIP
>>> n_params = sum(p.numel() for p in model.parameters())  # doctest: +SKIP
>>> gen = torch.Generator().manual_seed(0)  # doctest: +SKIP
>>> slot = torch.randint(4096, (n_params,), generator=gen)  # doctest: +SKIP
>>> sign = torch.randint(0, 2, (n_params,), generator=gen).float() * 2 - 1  # doctest: +SKIP
>>> def gradient(indices):  # doctest: +SKIP
...     model.zero_grad()
...     batch = collate([dataset[i] for i in indices])  # padded; labels -100 on padding
...     logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
...     labels = batch["labels"][:, 1:]
...     per_token = torch.nn.functional.cross_entropy(
...         logits[:, :-1].transpose(1, 2), labels, ignore_index=-100, reduction="none")
...     mask = labels != -100
...     loss = ((per_token * mask).sum(1) / mask.sum(1)).mean()  # mean over samples
...     # mean over tokens, as HF's causal-LM loss: loss = model(**batch).loss
...     loss.backward()
...     flat = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
...     return torch.zeros(4096).index_add_(0, slot, sign * flat).numpy()
>>> noise = measure_gradient_noise(gradient, lengths, rng=np.random.default_rng(0))  # doctest: +SKIP

Without torch, any callable will do (here exact per-sample gradients of a toy dataset):

>>> rng = np.random.default_rng(0)
>>> lengths = rng.integers(1, 100, 400)
>>> grads = rng.normal(size=(400, 16)) + (lengths[:, None] > 50)  # long samples pull one way
>>> noise = measure_gradient_noise(lambda idx: grads[idx].mean(0), lengths, n_bins=4,
...                                groups_per_bin=20, rng=rng)
>>> noise.n_bins, noise.backward_passes
(4, 80)
>>> figures = noise.figures()
>>> bool(figures["noise_scale"].value > 1), bool(figures["noise_scale"].se > 0)
(True, True)

The exact price of a plan is :func:`plan_noise`; the simulated strategies and the window
noise over consecutive steps are :mod:`analysis.answers.gradient_noise`'s.  The model is
saved and read by :func:`analysis.loaders.save_gradient_noise` and
:func:`analysis.loaders.load_gradient_noise`; nothing here reads a file.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from analysis._validate import check_rng, known_name, positive_int
from analysis.batching import BatchRule, as_rule, bucket_bounds, check_edges
from analysis.lengths import LengthHistogram, as_histogram

__all__ = [
    "NOISE_WINDOWS",
    "NOISE_STRATEGIES",
    "NoiseFigure",
    "GradientNoise",
    "PlanNoise",
    "between_share_limit",
    "composition_error",
    "effective_batch_share",
    "mean_composition_error",
    "measure_gradient_noise",
    "plan_noise",
    "time_to_quality",
]

#: Consecutive steps whose summed error the window noise measures by default (1: one step;
#: 4 and 16: gradient-accumulation steps and an optimiser's horizon).
NOISE_WINDOWS = (1, 4, 16)
#: The strategies priced exactly from the histogram.
NOISE_STRATEGIES = ("random", "sorted", "bucketed")


@dataclass(frozen=True, kw_only=True)
class NoiseFigure:
    """A figure of the model and its standard error (delete-a-fold jackknife)."""

    value: float
    se: float


@dataclass(frozen=True, kw_only=True)
class GradientNoise:
    """Per length bin: the mean gradient (sketched), the within-bin noise trace and the
    estimation noise of the mean; fitted by :func:`measure_gradient_noise`.

    Parameters
    ----------
    edges : tuple of int
        Bin edges ``e_0 < ... < e_J``: bin ``j`` holds lengths ``e_j < L <= e_{j+1}`` (lengths
        outside are priced with the first or last bin).
    bin_samples : tuple of int
        Samples of the probed dataset in each bin.
    groups : tuple of int
        Probe groups (calls) per bin.
    group_size : int
        Samples per probe group.
    means : numpy.ndarray
        ``(J, D)``: each bin's mean sketched gradient.
    within : numpy.ndarray
        ``(J,)``: ``S_j**2``, the trace of the per-sample gradient covariance inside bin ``j``.
    mean_variance : numpy.ndarray
        ``(J,)``: the variance (trace) of each bin mean's estimate, subtracted from the Gram
        diagonal.
    replicate_gram, replicate_within : numpy.ndarray
        ``(F, J, J)`` and ``(F, J)``: the unbiased Gram matrix and the within traces with each
        of ``F`` folds of probe groups left out (the jackknife behind every standard error).
    """

    edges: tuple[int, ...]
    bin_samples: tuple[int, ...]
    groups: tuple[int, ...]
    group_size: int
    means: np.ndarray
    within: np.ndarray
    mean_variance: np.ndarray
    replicate_gram: np.ndarray
    replicate_within: np.ndarray

    def __post_init__(self) -> None:
        j = len(self.edges) - 1
        if j < 1 or any(b <= a for a, b in zip(self.edges, self.edges[1:])):
            raise ValueError("a gradient-noise model needs strictly increasing bin edges (at least 2)")
        shapes = {
            "bin_samples": (len(self.bin_samples), j),
            "groups": (len(self.groups), j),
            "means": (self.means.shape[0] if self.means.ndim == 2 else -1, j),
            "within": (self.within.shape[0] if self.within.ndim == 1 else -1, j),
            "mean_variance": (self.mean_variance.shape[0] if self.mean_variance.ndim == 1 else -1, j),
            "replicate_gram": (self.replicate_gram.shape[1:], (j, j)),
            "replicate_within": (self.replicate_within.shape[1:], (j,)),
        }
        for name, (got, want) in shapes.items():
            if got != want:
                raise ValueError(f"gradient-noise model: {name} does not match {j} bins")
        arrays = (self.means, self.within, self.mean_variance, self.replicate_gram, self.replicate_within)
        if not all(np.isfinite(a).all() for a in arrays):
            raise ValueError("gradient-noise model: every array must be finite")
        if self.replicate_gram.shape[0] < 2 or self.replicate_within.shape[0] != self.replicate_gram.shape[0]:
            raise ValueError("gradient-noise model: needs at least 2 jackknife replicates")
        positive_int(self.group_size, "group_size")

    @property
    def n_bins(self) -> int:
        """``J``, the number of length bins."""
        return len(self.edges) - 1

    @property
    def dimension(self) -> int:
        """``D``, the sketch's dimension."""
        return int(self.means.shape[1])

    @property
    def backward_passes(self) -> int:
        """Calls the probe made (each a backward pass of ``group_size`` samples)."""
        return int(sum(self.groups))

    @property
    def gram(self) -> np.ndarray:
        """``(J, J)``: the unbiased Gram matrix of the bin means (``μ_j . μ_k``, the diagonal
        less each mean's estimation variance)."""
        return np.asarray(self.means @ self.means.T - np.diag(self.mean_variance))

    def replicates(self) -> Iterable[tuple[np.ndarray, np.ndarray]]:
        """The jackknife replicates ``(gram, within)``, one per fold left out."""
        return zip(self.replicate_gram, self.replicate_within)

    def bin_of(self, lengths: Any) -> np.ndarray:
        """The bin of each length (``int64``; outside the bins: the first or last bin).

        Examples
        --------
        >>> toy_model().bin_of([1, 10, 11, 99]).tolist()
        [0, 0, 1, 1]
        """
        arr = np.asarray(lengths)
        bins = np.searchsorted(np.asarray(self.edges[1:-1]), arr, side="left")
        return np.asarray(bins, dtype=np.int64)

    def bin_counts(self, hist: LengthHistogram) -> np.ndarray:
        """Samples of ``hist`` in each bin (``int64``)."""
        return np.bincount(self.bin_of(hist.lengths), weights=hist.counts, minlength=self.n_bins).astype(
            np.int64
        )

    def figures(
        self, hist: LengthHistogram | Sequence[int] | np.ndarray | None = None
    ) -> dict[str, NoiseFigure]:
        """The model's figures on ``hist`` (default: the probed dataset, by bin), each with
        its standard error: ``trace`` (``tr Σ``), ``gradient_norm2`` (``|G|**2``),
        ``noise_scale`` (``B_noise``) and ``between_share`` (the share of ``tr Σ`` between
        bins: the ``ρ`` of a plan with one bucket per bin).

        Examples
        --------
        >>> figures = toy_model().figures()
        >>> round(figures["trace"].value, 4), round(figures["between_share"].value, 4)
        (1.0101, 0.0198)
        """
        n = self._counts(hist)

        def stats(gram: np.ndarray, within: np.ndarray) -> tuple[float, ...]:
            trace, norm2, between = dataset_figures(gram, within, n)
            return (
                trace,
                norm2,
                trace / norm2 if norm2 > 0 else math.inf,
                between / trace if trace > 0 else 0.0,
            )

        values = jackknife(self, stats)
        names = ("trace", "gradient_norm2", "noise_scale", "between_share")
        return {name: value for name, value in zip(names, values)}

    def to_frame(self) -> pd.DataFrame:
        """One row per bin: ``lower`` (exclusive), ``upper``, ``bin_samples``, ``groups``,
        ``within`` (``S_j**2``), ``mean_norm2`` (``|μ_j|**2``, unbiased) and ``offset2``
        (``|μ_j - G|**2``, unbiased; ``G`` over the probed dataset)."""
        gram = self.gram
        w = np.asarray(self.bin_samples, dtype=float) / sum(self.bin_samples)
        offset = np.diag(gram) - 2 * gram @ w + w @ gram @ w
        return pd.DataFrame(
            {
                "lower": self.edges[:-1],
                "upper": self.edges[1:],
                "bin_samples": self.bin_samples,
                "groups": self.groups,
                "within": self.within,
                "mean_norm2": np.diag(gram),
                "offset2": offset,
            }
        )

    def _counts(self, hist: LengthHistogram | Sequence[int] | np.ndarray | None) -> np.ndarray:
        if hist is None:
            return np.asarray(self.bin_samples, dtype=np.int64)
        return self.bin_counts(as_histogram(hist))


def check_noise(model: object) -> GradientNoise:
    """``model`` itself, or a one-line ValueError when it is no :class:`GradientNoise`."""
    if not isinstance(model, GradientNoise):
        raise ValueError(f"noise must be a GradientNoise model, got {type(model).__name__}")
    return model


def jackknife(
    model: GradientNoise, stat: Callable[[np.ndarray, np.ndarray], tuple[float, ...]]
) -> list[NoiseFigure]:
    """``stat(gram, within)`` on the model, each with its delete-a-fold jackknife standard error."""
    full = np.asarray(stat(model.gram, model.within), dtype=float)
    return jackknife_figures(full, np.array([stat(g, w) for g, w in model.replicates()], dtype=float))


def jackknife_figures(full: np.ndarray, reps: np.ndarray) -> list[NoiseFigure]:
    """Figures ``full`` with the standard errors of their replicates ``reps`` (one row per
    fold left out).

    Examples
    --------
    >>> [(f.value, round(f.se, 4)) for f in jackknife_figures(np.array([2.0]), np.array([[1.9], [2.1]]))]
    [(2.0, 0.1)]
    """
    f = reps.shape[0]
    with np.errstate(invalid="ignore"):
        se = np.sqrt((f - 1) / f * ((reps - reps.mean(axis=0)) ** 2).sum(axis=0))
    return [NoiseFigure(value=float(v), se=float(s)) for v, s in zip(full, se)]


# ----------------------------------------------------------------------------- the probe
def quantile_bins(lengths: np.ndarray, n_bins: int, least: int) -> list[int]:
    """Edges of about ``n_bins`` bins of equal sample counts over distinct lengths, each
    holding at least ``least`` samples (merged with a neighbour otherwise).

    Examples
    --------
    >>> quantile_bins(np.array([1, 1, 2, 3, 3, 3, 9, 9]), 4, 2)
    [0, 1, 3, 9]
    >>> quantile_bins(np.array([1, 1, 2, 3, 3, 3, 9, 9]), 8, 1)
    [0, 1, 2, 3, 9]
    """
    values, counts = np.unique(lengths, return_counts=True)
    total = int(counts.sum())
    edges, held, done = [int(values[0]) - 1], 0, 0
    following = [*counts[1:].tolist(), 0]
    for value, count, after in zip(values.tolist(), counts.tolist(), following):
        held, done = held + count, done + count
        target = total * len(edges) / n_bins
        if done >= target - after / 2 and held >= least and after:  # the cut nearest the quantile
            edges.append(value)
            held = 0
    if held:  # the tail: its own bin when large enough, else merged into the last
        if held >= least or len(edges) == 1:
            edges.append(int(values[-1]))
        else:
            edges[-1] = int(values[-1])
    return edges


def _check_vector(value: object, dim: int | None) -> np.ndarray:
    arr = np.asarray(value, dtype=float)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"gradient must return a 1-D vector, got shape {arr.shape}")
    if dim is not None and arr.size != dim:
        raise ValueError(
            f"gradient returned {arr.size} values after {dim}: one sketch dimension for every call"
        )
    if not np.isfinite(arr).all():
        raise ValueError("gradient returned a non-finite value (NaN or inf)")
    return arr


def _bin_estimates(x: np.ndarray, size: int, population: int) -> tuple[np.ndarray, float, float]:
    """Mean, within trace ``S**2`` and the mean's variance from ``m`` group gradients ``x``."""
    m = x.shape[0]
    mean = x.mean(axis=0)
    within = size * float(((x - mean) ** 2).sum()) / (m - 1)
    drawn = m * size
    return mean, within, within * max(0.0, 1 - drawn / population) / drawn


def fit_groups(
    gradients: list[np.ndarray], folds: list[np.ndarray], size: int, population: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Means, within, mean variances and the jackknife replicates from each bin's group
    gradients (``(m_j, D)``) and each group's fold."""
    n_folds = int(max(f.max() for f in folds)) + 1
    parts = [_bin_estimates(x, size, int(p)) for x, p in zip(gradients, population)]
    means = np.array([p[0] for p in parts])
    within = np.array([p[1] for p in parts])
    var = np.array([p[2] for p in parts])
    rep_gram, rep_within = [], []
    for r in range(n_folds):
        keep = [_bin_estimates(x[f != r], size, int(p)) for x, f, p in zip(gradients, folds, population)]
        mu = np.array([k[0] for k in keep])
        rep_gram.append(mu @ mu.T - np.diag([k[2] for k in keep]))
        rep_within.append([k[1] for k in keep])
    return means, within, var, np.array(rep_gram), np.array(rep_within, dtype=float)


def measure_gradient_noise(
    gradient: Callable[[np.ndarray], Any],
    lengths: Sequence[int] | np.ndarray,
    *,
    rng: np.random.Generator,
    n_bins: int = 32,
    groups_per_bin: int = 16,
    group_size: int = 1,
    folds: int = 8,
    progress: Callable[..., Iterable[Any]] | None = None,
) -> GradientNoise:
    """Probe ``gradient`` per length bin and fit the :class:`GradientNoise` model.

    Parameters
    ----------
    gradient : callable
        ``gradient(indices)`` (an ``int64`` array of sample indices into ``lengths``) returns
        the sketched gradient of the mean loss over those samples at one fixed checkpoint: a
        1-D float vector of the same size on every call (the module docstring shows one in
        PyTorch).
    lengths : array-like of int
        Each sample's length (the dataset ``gradient`` indexes).
    rng : numpy.random.Generator
        Draws the groups.
    n_bins : int, default 32
        Quantile bins over the lengths (fewer when lengths repeat, or bins merge to hold
        at least ``3 * group_size`` samples).
    groups_per_bin : int, default 16
        Disjoint groups drawn per bin (fewer where a bin is small; at least 3).
    group_size : int, default 1
        Samples per call (1: per-sample gradients).
    folds : int, default 8
        Jackknife folds for the standard errors (at least 3; groups go to folds in turn).
    progress : callable, optional
        Wraps the loop over bins (e.g. ``tqdm``).

    Returns
    -------
    GradientNoise
        Its cost: ``backward_passes`` calls, ``n_bins * groups_per_bin`` at most.

    Examples
    --------
    >>> grads = np.array([[1.0, 0], [3, 0], [0, 1], [0, 3], [0, 5], [2, 2]])
    >>> noise = measure_gradient_noise(lambda idx: grads[idx].mean(0), [1, 1, 1, 2, 2, 2],
    ...                                n_bins=2, groups_per_bin=3, folds=3, rng=np.random.default_rng(0))
    >>> noise.edges, noise.within.round(3).tolist()  # every sample probed: exact within traces
    ((0, 1, 2), [2.667, 3.667])
    >>> noise.mean_variance.tolist()
    [0.0, 0.0]
    """
    if not callable(gradient):
        raise ValueError(f"gradient must be callable, got {type(gradient).__name__}")
    check_rng(rng)
    arr = np.asarray(lengths)
    if arr.ndim != 1 or arr.size == 0 or arr.dtype.kind not in "iu":
        raise ValueError("lengths must be a non-empty 1-D array of integers")
    n_bins, groups_per_bin = positive_int(n_bins, "n_bins"), positive_int(groups_per_bin, "groups_per_bin")
    size, folds = positive_int(group_size, "group_size"), positive_int(folds, "folds")
    if groups_per_bin < 3 or folds < 3:
        raise ValueError(f"groups_per_bin and folds must be at least 3, got {groups_per_bin} and {folds}")
    if arr.size < 3 * size:
        raise ValueError(f"{arr.size} samples cannot make 3 groups of {size}")
    edges = quantile_bins(arr, n_bins, 3 * size)
    members = np.searchsorted(np.asarray(edges[1:-1]), arr, side="left")
    population = np.bincount(members, minlength=len(edges) - 1)
    bins = range(len(edges) - 1)
    gradients, fold_of, dim = [], [], None
    for j in progress(bins, "probing") if progress is not None else bins:
        pool = np.flatnonzero(members == j)
        m = min(groups_per_bin, pool.size // size)
        drawn = rng.choice(pool, size=m * size, replace=False).reshape(m, size)
        rows = []
        for group in drawn:
            rows.append(_check_vector(gradient(np.sort(group).astype(np.int64)), dim))
            dim = rows[-1].size
        gradients.append(np.array(rows))
        fold_of.append(np.arange(m) % folds)
    means, within, var, rep_gram, rep_within = fit_groups(gradients, fold_of, size, population)
    return GradientNoise(
        edges=tuple(edges),
        bin_samples=tuple(population.tolist()),
        groups=tuple(g.shape[0] for g in gradients),
        group_size=size,
        means=means,
        within=within,
        mean_variance=var,
        replicate_gram=rep_gram,
        replicate_within=rep_within,
    )


# ------------------------------------------------------------------- the expected errors
def dataset_figures(gram: np.ndarray, within: np.ndarray, n: np.ndarray) -> tuple[float, float, float]:
    """``tr Σ``, ``|G|**2`` and the between-bin sum of squares per sample of a dataset with
    ``n`` samples per bin (``N - 1`` divisor, as every sample variance here)."""
    total = int(n.sum())
    w = n / total
    norm2 = float(w @ gram @ w)
    between = float(n @ np.diag(gram)) / total - norm2  # Σ_j w_j |μ_j - G|**2
    within_ss = float(np.maximum(n - 1, 0) @ within)
    trace = (within_ss + total * between) / (total - 1) if total > 1 else 0.0
    return trace, norm2, between


def _quad(x: np.ndarray, gram: np.ndarray) -> np.ndarray:
    """``x_p . Gram . x_p`` for each row ``x_p``."""
    return np.asarray(np.einsum("pj,jk,pk->p", x, gram, x))


def composition_error(
    gram: np.ndarray, within: np.ndarray, n: np.ndarray, a: np.ndarray, q: np.ndarray, window: int = 1
) -> np.ndarray:
    """Expected ``|Σ_t (g_t - G)|**2`` of windows of ``window`` batches of known composition:
    row ``p`` of ``a`` holds, per bin, the sum over the window's samples of that bin of their
    weight ``1 / s_t`` in their batch's mean, ``q`` the sum of the squared weights.  The
    samples are distinct, drawn from their bins as a random subset (``n``: each bin's
    samples in the dataset):  ``|Σ_j (a_j - W w_j) μ_j|**2 + Σ_j S_j**2 (q_j - a_j**2 / n_j)``.

    Examples
    --------
    >>> gram, within, n = np.array([[1.0, 0], [0, 4]]), np.array([2.0, 2]), np.array([4, 4])
    >>> composition_error(gram, within, n, np.array([[1.0, 0]]), np.array([[0.5, 0]])).tolist()
    [1.75]
    """
    w = n / n.sum()
    with np.errstate(divide="ignore", invalid="ignore"):
        spread = np.where(n > 0, q - a * a / np.maximum(n, 1), 0.0)
    return np.asarray(_quad(a - window * w, gram) + spread @ within)


def mean_composition_error(
    models: Sequence[tuple[np.ndarray, np.ndarray]],
    n: np.ndarray,
    a: np.ndarray,
    q: np.ndarray,
    window: int = 1,
) -> np.ndarray:
    """The mean over rows of :func:`composition_error` under each ``(gram, within)`` of
    ``models`` at once: the rows' second-moment matrix is formed once, so each model costs
    ``J**2``, not one quadratic form per row.

    Examples
    --------
    >>> gram, within, n = np.array([[1.0, 0], [0, 4]]), np.array([2.0, 2]), np.array([4, 4])
    >>> a, q = np.array([[1.0, 0], [0, 1]]), np.array([[0.5, 0], [0, 0.5]])
    >>> mean_composition_error([(gram, within)], n, a, q).tolist()
    [1.75]
    >>> composition_error(gram, within, n, a, q).tolist()
    [1.75, 1.75]
    """
    x = a - window * n / n.sum()
    moment = x.T @ x / x.shape[0]
    with np.errstate(divide="ignore", invalid="ignore"):
        spread = np.where(n > 0, q - a * a / np.maximum(n, 1), 0.0).mean(axis=0)
    return np.array([float((gram * moment).sum() + spread @ within) for gram, within in models])


def pool_error(
    gram: np.ndarray, within: np.ndarray, n: np.ndarray, c: np.ndarray, s: np.ndarray
) -> np.ndarray:
    """Expected ``|g_batch - G|**2`` of a batch of ``s`` samples drawn uniformly without
    replacement from a pool (a bucket) holding ``c`` samples of each bin (row per pool)."""
    size = c.sum(axis=1)
    p = c / size[:, None]
    f = np.where(size > 1, (size - s) / np.maximum(size - 1, 1), 0.0)
    spread_between = p @ np.diag(gram) - _quad(p, gram)  # Σ_j p_j |μ_j - μ_pool|**2
    a2 = p * p + p * (1 - p) * (f / s)[:, None]  # E[a_j**2], a_j = C_j / s (hypergeometric C_j)
    with np.errstate(divide="ignore", invalid="ignore"):
        noise = np.where(n > 0, p / s[:, None] - a2 / np.maximum(n, 1), 0.0) @ within
    return np.asarray(_quad(p - n / n.sum(), gram) + f / s * spread_between + noise)


# ------------------------------------------------------------------- the exact strategies
def _bucket_batches(counts: np.ndarray, sizes: Sequence[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pools, batch sizes and batch counts of the bucketed shuffle (each bucket's full batches
    and its last, shorter one)."""
    pools, batch, times = [], [], []
    for c, size in zip(counts, sizes):
        total = int(c.sum())
        if total == 0:
            continue
        full, rest = divmod(total, size)
        for s, k in ((size, full), (rest, 1)):
            if k and s:
                pools.append(c)
                batch.append(s)
                times.append(k)
    return np.array(pools, dtype=float), np.array(batch, dtype=float), np.array(times, dtype=float)


def _sorted_compositions(n: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-bin counts and multiplicities of the sorted strategy's batches (bins in length
    order; a batch inside one bin stands for all of them)."""
    start = np.concatenate([[0], np.cumsum(n)[:-1]])
    stop = start + n
    total = int(n.sum())
    rows, times = [], []
    for j in range(n.size):
        inside = max(0, stop[j] // size - -(-start[j] // size))
        if inside:
            row = np.zeros(n.size)
            row[j] = size
            rows.append(row)
            times.append(inside)
    cuts = {int(x) // size for x in start[1:] if x % size and x < total}
    cuts |= {total // size} if total % size else set()
    for t in sorted(cuts):
        lo, hi = t * size, min((t + 1) * size, total)
        rows.append(np.clip(np.minimum(hi, stop) - np.maximum(lo, start), 0, None).astype(float))
        times.append(1)
    return np.array(rows, dtype=float), np.array(times, dtype=float)


def _bucket_counts(model: GradientNoise, hist: LengthHistogram, edges: Sequence[int]) -> np.ndarray:
    bins = model.bin_of(hist.lengths)
    out = []
    for lo, hi in zip(*bucket_bounds(hist.lengths, edges)):
        out.append(np.bincount(bins[lo:hi], weights=hist.counts[lo:hi], minlength=model.n_bins))
    return np.array(out)


def plan_variance(
    gram: np.ndarray, within: np.ndarray, n: np.ndarray, layout: tuple[str, Any, Any]
) -> tuple[float, float, int]:
    """Per-step variance, between-bucket sum of squares per sample and steps of a plan's
    ``layout``: ``("pools", counts, sizes)`` for bucketed (one pool: random), ``("sorted",
    None, size)``."""
    kind, counts, sizes = layout
    total = int(n.sum())
    if kind == "sorted":
        rows, times = _sorted_compositions(n, int(sizes))
        s = rows.sum(axis=1)
        err = composition_error(gram, within, n, rows / s[:, None], rows / (s * s)[:, None])
        between = 0.0
    else:
        pools, s, times = _bucket_batches(counts, sizes)
        err = pool_error(gram, within, n, pools, s)
        sizes_b = counts.sum(axis=1)
        means = pool_error(gram, within, n, counts[sizes_b > 0], sizes_b[sizes_b > 0].astype(float))
        between = float(sizes_b[sizes_b > 0] @ means) / total
    steps = float(times.sum())
    return float(times @ err) / steps, between, int(steps)


@dataclass(frozen=True, kw_only=True)
class PlanNoise:
    """The gradient noise of one plan against a shuffle's (every figure with its standard
    error from the model's jackknife; :func:`plan_noise`).

    ``variance``: the per-step ``E|g_batch - G|**2``; ``shuffle_variance``: a full shuffle's
    under the same rule (``random``); ``variance_ratio`` the first over the second;
    ``between_share``: ``ρ`` (buckets' between share of ``tr Σ``; 0 for random and sorted);
    ``effective_batch``: the shuffle batch size with the same per-step variance
    (``1 / (variance / tr Σ + 1 / N)``); ``design_effect``: mean samples per step over
    ``effective_batch`` (Kish's ``1 + (B - 1) ρ`` for a bucketed plan of full batches);
    ``noise_scale``: ``B_noise``; ``steps_ratio``: predicted steps to the same loss over a
    shuffle's, ``(1 + B_noise / B_eff) / (1 + B_noise / B_eff_shuffle)``.
    """

    strategy: str
    steps: int
    batch_size: float
    variance: NoiseFigure
    shuffle_variance: NoiseFigure
    variance_ratio: NoiseFigure
    between_share: NoiseFigure
    effective_batch: NoiseFigure
    design_effect: NoiseFigure
    noise_scale: NoiseFigure
    steps_ratio: NoiseFigure

    def to_frame(self) -> pd.DataFrame:
        """One row per figure: ``value`` and ``se``."""
        names = [
            "variance",
            "shuffle_variance",
            "variance_ratio",
            "between_share",
            "effective_batch",
            "design_effect",
            "noise_scale",
            "steps_ratio",
        ]
        figures = [getattr(self, name) for name in names]
        return pd.DataFrame(
            {"value": [f.value for f in figures], "se": [f.se for f in figures]},
            index=pd.Index(names, name="figure"),
        )


def plan_noise(
    model: GradientNoise,
    hist: LengthHistogram | Sequence[int] | np.ndarray,
    strategy: str = "bucketed",
    rule: BatchRule | None = None,
    *,
    edges: Sequence[int] | None = None,
    batch_size: int | None = None,
    max_tokens: int | None = None,
) -> PlanNoise:
    """The exact gradient noise of a ``random``, ``sorted`` or ``bucketed`` plan on ``hist``
    under ``model`` (bins exchangeable; see the module docstring), against a shuffle's.

    Under a token budget each bucket has its own batch size (``rule.batch_sizes(edges)``) and
    every step counts once; ``random`` and ``sorted`` take ``rule.fixed_batch_size``.

    Examples
    --------
    >>> hist = LengthHistogram.from_counts([5, 50], [40, 40])
    >>> noise = plan_noise(toy_model(), hist, edges=[0, 10, 50], batch_size=4)
    >>> round(noise.between_share.value, 4), round(noise.effective_batch.value, 2)
    (0.0198, 3.91)
    >>> round(plan_noise(toy_model(), hist, "random", batch_size=4).effective_batch.value, 6)
    4.0
    """
    check_noise(model)
    known_name(strategy, NOISE_STRATEGIES, "strategy")
    hist = as_histogram(hist)
    rule = as_rule(rule, batch_size=batch_size, max_tokens=max_tokens)
    n = model.bin_counts(hist)
    total = hist.n_samples
    if total < 2:
        raise ValueError("gradient noise needs at least 2 samples")
    whole = [hist.min - 1, hist.max]
    shuffle = ("pools", _bucket_counts(model, hist, whole), [rule.fixed_batch_size(hist.max)])
    if strategy == "bucketed":
        if edges is None:
            raise ValueError("strategy 'bucketed' needs edges")
        edges = check_edges(edges, hist)
        layout: tuple[str, Any, Any] = ("pools", _bucket_counts(model, hist, edges), rule.batch_sizes(edges))
    elif strategy == "sorted":
        layout = ("sorted", None, rule.fixed_batch_size(hist.max))
    else:
        layout = shuffle
    steps = plan_variance(model.gram, model.within, n, layout)[2]

    def stats(gram: np.ndarray, within: np.ndarray) -> tuple[float, ...]:
        var, between, _ = plan_variance(gram, within, n, layout)
        ref = plan_variance(gram, within, n, shuffle)[0]
        trace, norm2, _ = dataset_figures(gram, within, n)
        b_eff, b_ref = 1 / (var / trace + 1 / total), 1 / (ref / trace + 1 / total)
        scale = trace / norm2 if norm2 > 0 else math.inf
        ratio = (1 + scale / b_eff) / (1 + scale / b_ref)
        return var, ref, var / ref, between / trace, b_eff, total / steps / b_eff, scale, ratio

    figures = jackknife(model, stats)
    return PlanNoise(
        strategy=strategy,
        steps=steps,
        batch_size=total / steps,
        variance=figures[0],
        shuffle_variance=figures[1],
        variance_ratio=figures[2],
        between_share=figures[3],
        effective_batch=figures[4],
        design_effect=figures[5],
        noise_scale=figures[6],
        steps_ratio=figures[7],
    )


def effective_batch_share(between_share: float, batch_size: int) -> float:
    """The share of the batch a bucketed plan keeps, ``B_eff / B = 1 / (1 + (B - 1) ρ)``
    (Kish's design effect) at between-bucket share ``ρ`` and batch size ``B``: the one form
    the optimiser's gradient axis, its floors (``min_effective_batch``) and its time to
    quality use.  It counts every batch as full and the buckets as large against ``B``;
    :func:`plan_noise` is the exact price (each bucket's last short batch, the
    finite-population terms): its ``effective_batch`` over its ``batch_size``.

    Examples
    --------
    >>> round(effective_batch_share(0.0158, 8), 3), effective_batch_share(0.5, 1)
    (0.9, 1.0)
    """
    return 1.0 / (1.0 + (batch_size - 1) * between_share)


def between_share_limit(share: float, batch_size: int) -> float:
    """The largest ``ρ`` whose :func:`effective_batch_share` is at least ``share`` (``inf`` for
    a batch of one, which keeps its whole batch at any ``ρ``).

    Examples
    --------
    >>> round(between_share_limit(0.9, 8), 6), between_share_limit(0.9, 1)
    (0.015873, inf)
    """
    if batch_size <= 1:
        return math.inf
    return (1.0 / share - 1.0) / (batch_size - 1)


def toy_model() -> GradientNoise:
    """A two-bin model for the examples: lengths ``<= 10`` and ``11..100``, bin means ``(1,
    0)`` and ``(1.2, 0.2)``, within traces 1, no estimation noise."""
    means = np.array([[1.0, 0.0], [1.2, 0.2]])
    within = np.array([1.0, 1.0])
    gram = means @ means.T
    return GradientNoise(
        edges=(0, 10, 100),
        bin_samples=(50, 50),
        groups=(10, 10),
        group_size=1,
        means=means,
        within=within,
        mean_variance=np.zeros(2),
        replicate_gram=np.array([gram, gram * 1.01, gram * 0.99]),
        replicate_within=np.array([within, within * 1.02, within * 0.98]),
    )


# Deliberately the signature of plan_noise: both are public entry points over the same plan
# (model, lengths, strategy, rule or its keywords, edges), in the same order and spelling.
def time_to_quality(
    model: GradientNoise,
    step_time: Any,
    hist: LengthHistogram | Sequence[int] | np.ndarray,
    strategy: str = "bucketed",
    rule: BatchRule | None = None,
    *,
    edges: Sequence[int] | None = None,
    batch_size: int | None = None,
    max_tokens: int | None = None,
) -> tuple[NoiseFigure, NoiseFigure, float]:
    """Predicted time to the same loss over a shuffle's: ``(time_ratio, steps_ratio,
    epoch_ratio)``.  The steps to a given loss scale as ``1 + B_noise / B_eff``
    (:func:`plan_noise`), each step costing the plan's mean step seconds (its epoch seconds,
    :func:`analysis.timing.epoch.expected_epoch_time`, over its steps per epoch), so the time
    ratio is ``epoch_ratio * (shuffle's steps / plan's steps) * steps_ratio``, ``steps_ratio =
    (1 + B_noise / B_eff) / (1 + B_noise / B_shuffle)``.  (The middle factor is 1 where both
    take the same steps an epoch; a bucketed plan of ``K`` buckets takes up to ``K`` more,
    under a token budget far fewer.)  The two ratios carry the noise model's standard
    errors; ``epoch_ratio`` is exact.

    Examples
    --------
    >>> from analysis.timing.step_time import StepTimeModel
    >>> hist = LengthHistogram.from_counts([5, 50], [40, 40])
    >>> clock = StepTimeModel(per_step=0.01, per_token=1e-3)
    >>> t, steps, epoch = time_to_quality(toy_model(), clock, hist, edges=[0, 10, 50], batch_size=4)
    >>> round(epoch, 3), round(steps.value, 4), round(t.value, 3)
    (0.601, 1.0039, 0.604)
    """
    from analysis.timing.epoch import expected_epoch_time

    hist = as_histogram(hist)
    rule = as_rule(rule, batch_size=batch_size, max_tokens=max_tokens)
    priced = plan_noise(model, hist, strategy, rule, edges=edges)
    seconds = expected_epoch_time(hist, step_time, strategy, rule, edges=edges)
    epoch = seconds / expected_epoch_time(hist, step_time, "random", rule)
    per_step = epoch * plan_noise(model, hist, "random", rule).steps / priced.steps
    steps = priced.steps_ratio
    return NoiseFigure(value=per_step * steps.value, se=per_step * steps.se), steps, epoch
