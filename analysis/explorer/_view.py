"""What the edges explorer shows, as values: :class:`ExplorerView` (a plan and where its edges
came from), :func:`explore_view` (the plan for one set of control values, the panel's pure
logic) and :func:`explore_figure` (the view drawn on the length histogram).  No widgets here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from analysis.answers.gradient_noise import PlanQuality, plan_quality
from analysis.batching import DEFAULT_METHOD, DEFAULT_N_BUCKETS, BatchRule, parse_edges
from analysis.lengths import LengthHistogram, as_histogram
from analysis.narrative.frontier import floor_sentence
from analysis.narrative.noise import describe_plan_noise
from analysis.narrative.plan import describe_floor_ignored, describe_plan_status, plan_warnings
from analysis.optimize import BucketPlan, Floor, evaluate_edges, optimize_edges
from analysis.tables import format_percent
from analysis.timing.noise import GradientNoise

__all__ = ["ExplorerView", "explore_view", "explore_figure", "with_noise", "HistogramInput", "EdgesInput"]

#: What the explorer accepts as data: a histogram, or per-sample lengths
#: (:meth:`analysis.LengthHistogram.from_lengths`).
HistogramInput = LengthHistogram | Iterable[int] | np.ndarray | pd.Series
#: Edges as the explorer accepts them: a list, or text for :func:`analysis.batching.parse_edges`.
EdgesInput = str | Sequence[int]


@dataclass(frozen=True)
class ExplorerView:
    """What the panel shows: a plan and where its edges came from (``source``: the placement
    method, or ``"edited"`` for edges typed by hand).

    A *provisional* view stands in while the optimal edges for ``plan.rule`` are computed in
    the background (see :class:`Explorer`): ``provisional`` then says where its edges come
    from in words, and ``source`` is ``"previous"`` (the edges shown before, evaluated under
    the new rule) or the quick method that placed them for a new K.  ``provisional`` is
    ``None`` for every other view.

    ``quality``: the plan in gradient noise (:func:`analysis.answers.gradient_noise.plan_quality`)
    when the explorer was given a noise model, shown under the status line (:meth:`noise_text`).
    ``floor``: the floor the controls ask for (None: none), which the ``"optimal"`` edges meet
    (:meth:`floor_text`).
    """

    plan: BucketPlan
    source: str
    provisional: str | None = None
    quality: PlanQuality | None = None
    floor: Floor | None = None

    def floor_text(self) -> str | None:
        """How the plan meets the floor (:func:`analysis.narrative.frontier.floor_sentence`), or
        that the floor places the optimal edges only (edges of a field rule, or typed); None
        without a floor and while the optimal edges are computed (the status says so).

        Examples
        --------
        >>> v = explore_view([1, 2, 3, 9, 10] * 5, n_buckets=2, batch_size=4, floor=Floor("mixing", 0.2))
        >>> v.edges, v.floor_text()
        ... # doctest: +NORMALIZE_WHITESPACE
        ([0, 2, 10], '--min-mixing 20%: efficiency 75.27% (proven best); the next frontier point
        reaches 88.27% efficiency keeping 3.70%.')
        """
        if self.floor is None or self.provisional is not None:
            return None
        if self.plan.floor is None:
            return describe_floor_ignored(self.floor, self.source)
        return floor_sentence(self.plan)

    def noise_text(self) -> str | None:
        """What the plan keeps of a shuffle's effective batch (``B_eff``) and its steps to the
        same loss, with standard errors (:func:`analysis.narrative.noise.describe_plan_noise`);
        None without a noise model."""
        return None if self.quality is None else describe_plan_noise(self.quality)

    @property
    def edges(self) -> list[int]:
        """The plan's edges."""
        return self.plan.edges

    @property
    def n_buckets(self) -> int:
        """Number of buckets."""
        return self.plan.n_buckets

    @property
    def efficiency(self) -> float:
        """The plan's expected efficiency."""
        return self.plan.efficiency

    def to_frame(self) -> pd.DataFrame:
        """The per-bucket table."""
        return self.plan.to_frame()

    @property
    def warnings(self) -> list[str]:
        """The plan's warnings (:attr:`analysis.BucketPlan.warnings`), one line each
        (:func:`analysis.narrative.plan.plan_warnings`), shown under the status line."""
        return plan_warnings(self.plan)

    def edges_text(self) -> str:
        """The edges as the text box shows them (``"0, 770, 1216"``)."""
        return ", ".join(map(str, self.edges))

    def status(self) -> str:
        """One line: efficiency, padded and useful tokens (the proven bound on the distance to
        the optimum when a candidate search could not prove its plan optimal; for a
        provisional view, that the optimal edges are being computed and which edges are shown
        meanwhile): :func:`analysis.narrative.plan.describe_plan_status`.

        Examples
        --------
        >>> v = explore_view([1, 2, 3, 10], n_buckets=1, batch_size=2)
        >>> v.status()
        'optimal, 1 bucket: efficiency 63.16%, padded tokens 25 for 16 useful (waste 9)'
        >>> ExplorerView(v.plan, "previous", provisional="optimal, batch_size 4").status()
        ... # doctest: +NORMALIZE_WHITESPACE
        'computing the optimal edges for batch_size 2 in the background; shown meanwhile,
        under that rule: previous edges (optimal, batch_size 4), 1 bucket: efficiency 63.16%,
        padded tokens 25 for 16 useful (waste 9)'
        """
        return describe_plan_status(self.plan, self.source, self.provisional, self.floor)


def explore_view(
    hist: HistogramInput,
    *,
    n_buckets: int = DEFAULT_N_BUCKETS,
    batch_size: int | None = None,
    max_tokens: int | None = None,
    pad_to_multiple_of: int | None = None,
    method: str = DEFAULT_METHOD,
    edges: EdgesInput | None = None,
    noise: GradientNoise | None = None,
    floor: Floor | None = None,
) -> ExplorerView:
    """The plan for one set of control values (the panel's pure logic), priced in gradient
    noise when a ``noise`` model is given (:func:`with_noise`).

    With ``edges=None`` the edges are placed by ``method`` (:func:`analysis.optimize_edges`);
    otherwise the given edges (a list, or text for :func:`analysis.batching.parse_edges`) are
    evaluated as they are.  The batch rule is :meth:`analysis.BatchRule.resolve` of
    ``batch_size`` / ``max_tokens``.  With a ``floor`` the ``"optimal"`` edges are the best
    plan meeting it (:func:`analysis.optimize_edges` with ``floor=`` and ``noise=``); other
    edges are placed or evaluated without it, and the view says so (:meth:`ExplorerView.floor_text`).
    Raises ``ValueError`` for edges that are not increasing or don't cover the data.

    Examples
    --------
    >>> v = explore_view([1, 2, 3, 10], n_buckets=2, batch_size=2)
    >>> v.edges, round(v.efficiency, 4)   # padded 2 * 8/3 + 2 (bucket 1) + 10 (bucket 2)
    ([0, 3, 10], 0.9231)
    >>> explore_view([1, 2, 3, 10], batch_size=2, edges="0, 1, 10").edges
    [0, 1, 10]
    """
    histogram = as_histogram(hist)
    rule = BatchRule.resolve(batch_size, max_tokens, pad_to_multiple_of)
    if edges is None:
        floored = floor is not None and method == "optimal"
        plan = optimize_edges(
            histogram,
            n_buckets,
            rule,
            method=method,
            floor=floor if floored else None,
            noise=noise if floored else None,
        )
        return with_noise(ExplorerView(plan, plan.method, floor=floor), histogram, noise)
    return with_noise(replace(edited_view(histogram, edges, rule), floor=floor), histogram, noise)


def with_noise(
    view: ExplorerView,
    hist: LengthHistogram,
    noise: GradientNoise | None,
    shuffles: dict[BatchRule, float] | None = None,
) -> ExplorerView:
    """``view`` with its plan priced in gradient noise under ``noise`` (unchanged without one):
    exact, with the model's standard errors (:func:`analysis.timing.noise.plan_noise`: about
    15 ms on 32 bins).  ``shuffles`` keeps a shuffle's ``B_eff`` per rule across calls (the
    panel's), so a redraw prices the plan alone.

    Examples
    --------
    >>> from analysis.timing.noise import toy_model
    >>> lengths = [5] * 40 + [50] * 40
    >>> v = explore_view(lengths, batch_size=4, edges=[0, 10, 50], noise=toy_model())
    >>> round(v.quality.effective_batch.value, 3), round(v.quality.effective_batch_share.value, 3)
    (3.912, 0.978)
    """
    if noise is None:
        return view
    rule = view.plan.rule
    quality = plan_quality(
        noise, hist, rule, edges=view.edges, shuffle_effective_batch=(shuffles or {}).get(rule)
    )
    if shuffles is not None:
        shuffles[rule] = quality.shuffle_effective_batch
    return replace(view, quality=quality)


def edited_view(hist: LengthHistogram, edges: EdgesInput, rule: BatchRule) -> ExplorerView:
    """The view of edges typed by hand (text or a list): the padding model only, no optimiser."""
    chosen = parse_edges(edges) if isinstance(edges, str) else edges
    return ExplorerView(evaluate_edges(hist, chosen, rule, method="edited"), "edited")


def explore_figure(hist: HistogramInput, view: ExplorerView) -> Figure:
    """The length histogram with the view's edges drawn, each bucket coloured by its
    efficiency and labelled with its batch size, share of samples and efficiency
    (:func:`analysis.plots.plot_edges_on_histogram`, the figure of notebook 03).

    Examples
    --------
    >>> v = explore_view([1, 2, 3, 10], n_buckets=2, batch_size=2)
    >>> fig = explore_figure([1, 2, 3, 10], v)
    >>> [line.get_xdata()[0] for line in fig.axes[0].lines]  # the interior edges
    [3]
    """
    from analysis.plots import plot_edges_on_histogram

    return plot_edges_on_histogram(as_histogram(hist), view.plan, title=view_title(view))


def view_title(view: ExplorerView) -> str:
    """The figure's title for ``view``."""
    efficiency = format_percent(view.efficiency, "prose")
    title = f"{view.source} edges, {view.n_buckets} buckets: expected efficiency {efficiency}"
    return title if view.provisional is None else f"{title} (optimal edges being computed)"
