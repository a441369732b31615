"""An interactive edges explorer for JupyterLab: drag K, change the batch rule, edit the edges.

``analysis.explore(hist, batch_size=8)`` shows a panel (ipywidgets) with controls for the
number of buckets, the batch rule (``batch_size`` or ``max_tokens``), the placement method
and the edges themselves (a comma-separated text box), and, updated live: the expected
efficiency and padded tokens, the per-bucket table, and the histogram with the edges drawn.

Changing K, the method or the batch rule places new edges with
:func:`analysis.optimize_edges` and writes them into the edges box; editing the box (press
Enter) evaluates exactly those edges with :func:`analysis.expected_padding`, so you can try
"what if the second edge were 1024?" and compare with the optimum.

The logic is pure and testable without a browser: :func:`explore_view` takes the control
values and returns an :class:`ExplorerView` (numbers and table); :func:`explore_figure` draws
it.  The :class:`Explorer` panel wires widgets to the same logic and keeps every result in
widget values (an ``HTML`` status and table, an ``Image`` PNG of the figure).

Every interaction redraws quickly (issue 14): the panel keeps what it placed, so the
optimiser runs at most once per (method, batch rule): the ``"optimal"`` edges for every K
come from one :func:`analysis.sweep_bucket_counts` pass (one DP pass serves every K), the
field's rules take milliseconds per K; moving the K slider back and forth is then a lookup,
and edited edges only need the padding model.  The figure is one
:class:`analysis.plots.EdgesOnHistogram` whose artists are updated in place and rendered to
the PNG, never a new figure.

This module imports ipywidgets, so ``import analysis`` does not load it: ``analysis.explore``
is resolved lazily (module ``__getattr__`` in ``analysis/__init__.py``).
"""

from __future__ import annotations

import html
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import pandas as pd
from matplotlib.figure import Figure

from analysis.batching import DEFAULT_MAX_BUCKETS, DEFAULT_METHOD, DEFAULT_N_BUCKETS, BatchRule, parse_edges
from analysis.lengths import LengthHistogram
from analysis.optimize import (
    METHODS,
    BucketPlan,
    evaluate_edges,
    optimize_edges,
    sweep_bucket_counts,
)
from analysis.waste import tokens_text

if TYPE_CHECKING:
    from analysis.plots import EdgesOnHistogram

__all__ = ["ExplorerView", "Explorer", "explore", "explore_view", "explore_figure"]


@dataclass(frozen=True)
class ExplorerView:
    """What the panel shows: a plan and where its edges came from (``source``: the placement
    method, or ``"edited"`` for edges typed by hand)."""

    plan: BucketPlan
    source: str

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

    def edges_text(self) -> str:
        """The edges as the text box shows them (``"0, 770, 1216"``)."""
        return ", ".join(map(str, self.edges))

    def status(self) -> str:
        """One line: efficiency, padded and useful tokens (and the proven bound on the distance
        to the optimum when a candidate search could not prove its plan optimal).

        Examples
        --------
        >>> v = explore_view([1, 2, 3, 10], n_buckets=1, batch_size=2)
        >>> v.status()
        'optimal, 1 bucket: efficiency 0.6316, padded tokens 25 for 16 useful (waste 9)'
        """
        plural = "" if self.n_buckets == 1 else "s"
        plan = self.plan
        bound = "" if plan.exact else f"; at most {plan.gap:.2%} above the optimum (proven bound)"
        return (
            f"{self.source}, {self.n_buckets} bucket{plural}: efficiency "
            f"{plan.efficiency:.4f}, padded tokens {tokens_text(plan.padded_tokens)} for "
            f"{plan.useful_tokens:,} useful (waste {tokens_text(plan.waste_tokens)}){bound}"
        )


def explore_view(
    hist: Any,
    *,
    n_buckets: int = DEFAULT_N_BUCKETS,
    batch_size: int | None = None,
    max_tokens: int | None = None,
    pad_to_multiple_of: int | None = None,
    method: str = DEFAULT_METHOD,
    edges: Any = None,
) -> ExplorerView:
    """The plan for one set of control values (the panel's pure logic).

    With ``edges=None`` the edges are placed by ``method`` (:func:`analysis.optimize_edges`);
    otherwise the given edges (a list, or text for :func:`analysis.parse_edges`) are
    evaluated as they are.  The batch rule is :meth:`analysis.BatchRule.resolve` of
    ``batch_size`` / ``max_tokens``.  Raises ``ValueError`` for edges that are not
    increasing or don't cover the data.

    Examples
    --------
    >>> v = explore_view([1, 2, 3, 10], n_buckets=2, batch_size=2)
    >>> v.edges, round(v.efficiency, 4)   # padded 2 * 8/3 + 2 (bucket 1) + 10 (bucket 2)
    ([0, 3, 10], 0.9231)
    >>> explore_view([1, 2, 3, 10], batch_size=2, edges="0, 1, 10").edges
    [0, 1, 10]
    """
    if not isinstance(hist, LengthHistogram):
        hist = LengthHistogram.from_lengths(hist)
    rule = BatchRule.resolve(batch_size, max_tokens, pad_to_multiple_of)
    if edges is None:
        plan = optimize_edges(hist, n_buckets, rule, method=method)
        return ExplorerView(plan, plan.method)
    return _edited_view(hist, edges, rule)


def _edited_view(hist: LengthHistogram, edges: Any, rule: BatchRule) -> ExplorerView:
    """The view of edges typed by hand (text or a list): the padding model only, no optimiser."""
    chosen = parse_edges(edges) if isinstance(edges, str) else edges
    return ExplorerView(evaluate_edges(hist, chosen, rule, method="edited"), "edited")


def explore_figure(hist: Any, view: ExplorerView) -> Figure:
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

    if not isinstance(hist, LengthHistogram):
        hist = LengthHistogram.from_lengths(hist)
    return plot_edges_on_histogram(hist, view.plan, title=_title(view))


def _title(view: ExplorerView) -> str:
    """The figure's title for ``view``."""
    return f"{view.source} edges, {view.n_buckets} buckets: expected efficiency {view.efficiency:.1%}"


class _Plans:
    """The plans the panel has placed, by (method, batch rule) and K: each placed once.

    ``"optimal"`` edges for every K up to ``k_max`` come from one
    :func:`analysis.sweep_bucket_counts` pass (one DP pass serves every K), made the first
    time the rule is asked for; the plan of one K is then built from its edges with
    :func:`analysis.evaluate_edges` (the padding model, milliseconds).  The field's rules
    are placed per K by :func:`analysis.optimize_edges` (milliseconds).  The plans of the
    last ``keep`` (method, rule) pairs are kept.
    """

    def __init__(self, hist: LengthHistogram, k_max: int, keep: int = 8) -> None:
        self.hist = hist
        self.k_max = k_max
        self.keep = keep
        self.sweeps = 0  # optimiser passes made (a test counts them)
        self._plans: OrderedDict[tuple[str, BatchRule], dict[int, BucketPlan]] = OrderedDict()
        self._optimal: dict[BatchRule, dict[int, tuple[list[int], float]]] = {}

    def plan(self, n_buckets: int, rule: BatchRule, method: str) -> BucketPlan:
        """The plan ``optimize_edges(hist, n_buckets, rule, method=method)`` (equal to it)."""
        key = (method, rule)
        plans = self._plans.pop(key, {})
        self._plans[key] = plans  # most recent last
        while len(self._plans) > self.keep:
            old_method, old_rule = next(iter(self._plans))
            del self._plans[(old_method, old_rule)]
            if old_method == "optimal":
                self._optimal.pop(old_rule, None)
        if n_buckets not in plans:
            plans[n_buckets] = self._place(n_buckets, rule, method)
        return plans[n_buckets]

    def _place(self, n_buckets: int, rule: BatchRule, method: str) -> BucketPlan:
        if method != "optimal" or not 1 <= n_buckets <= self.k_max:
            return optimize_edges(self.hist, n_buckets, rule, method=method)
        if rule not in self._optimal:
            self.sweeps += 1
            try:
                sweep = sweep_bucket_counts(self.hist, range(1, self.k_max + 1), ["optimal"], rule)
            except ValueError:  # some K has no finite optimum: place K by K, each with its own error
                self._optimal[rule] = {}
            else:
                placed = zip(sweep["n_buckets"].tolist(), sweep["edges"], sweep["gap"].tolist(), strict=True)
                self._optimal[rule] = {k: (edges, gap) for k, edges, gap in placed}
        if n_buckets not in self._optimal[rule]:
            return optimize_edges(self.hist, n_buckets, rule, method=method)
        edges, gap = self._optimal[rule][n_buckets]
        plan = evaluate_edges(self.hist, edges, rule, method=method)
        # the sweep's proven gap ("auto" candidates above AUTO_CANDIDATES_ABOVE distinct lengths)
        return replace(plan, n_buckets_requested=n_buckets, exact=gap == 0.0, gap=gap)


class Explorer:
    """The panel: controls wired to the logic of :func:`explore_view` and the figure of
    :func:`explore_figure`.

    Attributes (ipywidgets): ``n_buckets`` (IntSlider), ``rule`` (Dropdown:
    ``batch_size``/``max_tokens``), ``rule_value`` (BoundedIntText), ``method`` (Dropdown),
    ``edges`` (Text, evaluated on Enter), ``status`` and ``table`` (HTML), ``image`` (Image,
    the figure as PNG), ``widget`` (the whole VBox).  ``view`` is the last
    :class:`ExplorerView`; ``error`` the last problem with the edited edges (or ``None``);
    ``plot`` the :class:`analysis.plots.EdgesOnHistogram` the image shows, one figure
    updated in place.  Placed plans are kept (see the module docstring): only a new
    (method, batch rule) runs the optimiser.
    """

    def __init__(
        self,
        hist: Any,
        *,
        batch_size: int | None = None,
        max_tokens: int | None = None,
        pad_to_multiple_of: int | None = None,
        n_buckets: int = DEFAULT_N_BUCKETS,
        method: str = DEFAULT_METHOD,
    ) -> None:
        import ipywidgets as w

        self.hist = hist if isinstance(hist, LengthHistogram) else LengthHistogram.from_lengths(hist)
        rule = BatchRule.resolve(batch_size, max_tokens, pad_to_multiple_of)
        self.pad_to_multiple_of = rule.pad_to_multiple_of
        if method not in METHODS:
            raise ValueError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
        k_max = max(1, min(DEFAULT_MAX_BUCKETS, self.hist.n_distinct))
        if not 1 <= n_buckets <= k_max:
            raise ValueError(f"n_buckets must be between 1 and {k_max}, got {n_buckets!r}")
        self.view: ExplorerView | None = None
        self.error: str | None = None
        self._busy = False
        self._plans = _Plans(self.hist, k_max)
        from analysis.plots import EdgesOnHistogram

        self.plot: EdgesOnHistogram = EdgesOnHistogram(self.hist)

        ((name, value),) = ((k, v) for k, v in rule.kwargs().items() if k != "pad_to_multiple_of")
        style = {"description_width": "initial"}
        self.n_buckets = w.IntSlider(
            value=n_buckets, min=1, max=k_max, description="buckets K", continuous_update=False, style=style
        )
        self.rule = w.Dropdown(
            options=["batch_size", "max_tokens"], value=name, description="batch rule", style=style
        )
        self.rule_value = w.BoundedIntText(
            value=value, min=1, max=2**62, description="=", layout=w.Layout(width="160px")
        )
        self.method = w.Dropdown(options=list(METHODS), value=method, description="method", style=style)
        self.edges = w.Text(
            description="edges",
            continuous_update=False,
            style=style,
            layout=w.Layout(width="95%"),
            placeholder="comma-separated, e.g. 0, 770, 1216, 8192 (Enter)",
        )
        self.status = w.HTML()
        self.table = w.HTML()
        self.image = w.Image(format="png")
        self.widget = w.VBox(
            [
                w.HBox([self.n_buckets, self.method]),
                w.HBox([self.rule, self.rule_value]),
                self.edges,
                self.status,
                self.image,
                self.table,
            ]
        )
        for control in (self.n_buckets, self.method, self.rule_value):
            control.observe(self._on_control, names="value")
        self.rule.observe(self._on_rule, names="value")
        self.edges.observe(self._on_edges, names="value")
        self.place_edges()

    # -------------------------------------------------------------- actions
    def _rule(self) -> BatchRule:
        value = int(self.rule_value.value)
        by_size = self.rule.value == "batch_size"
        return BatchRule(value if by_size else None, None if by_size else value, self.pad_to_multiple_of)

    def place_edges(self) -> None:
        """Place edges with the current K, method and batch rule, and show them."""
        try:
            plan = self._plans.plan(int(self.n_buckets.value), self._rule(), str(self.method.value))
        except ValueError as exc:
            self._show_error(str(exc))
            return
        self._show(ExplorerView(plan, plan.method))

    def evaluate_edges(self, text: str) -> None:
        """Evaluate the edges typed in the box (no optimisation) and show them."""
        try:
            view = _edited_view(self.hist, text, self._rule())
        except ValueError as exc:
            self._show_error(str(exc))
            return
        self._show(view)

    # -------------------------------------------------------------- observers
    def _on_control(self, change: dict[str, Any]) -> None:
        if not self._busy:  # _on_rule sets the value and then places once
            self.place_edges()

    def _on_rule(self, change: dict[str, Any]) -> None:
        default = (
            BatchRule.resolve().batch_size
            if change["new"] == "batch_size"
            else BatchRule.resolve().token_budget(self.hist.max)
        )
        self._busy = True
        try:
            self.rule_value.value = default
        finally:
            self._busy = False
        self.place_edges()

    def _on_edges(self, change: dict[str, Any]) -> None:
        if not self._busy:
            self.evaluate_edges(change["new"])

    # -------------------------------------------------------------- display
    def _show(self, view: ExplorerView) -> None:
        self.view, self.error = view, None
        self._busy = True
        try:
            self.edges.value = view.edges_text()
        finally:
            self._busy = False
        self.status.value = f"<b>{html.escape(view.status())}</b>"
        with pd.option_context("display.precision", 4):
            self.table.value = view.to_frame().to_html(float_format=lambda x: f"{x:,.4f}")
        self.plot.show(view.plan, title=_title(view))
        self.image.value = self.plot.png()

    def _show_error(self, message: str) -> None:
        self.error = message
        self.status.value = f"<span style='color:#b00'>{html.escape(message)}</span>"

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        """The panel for a Jupyter front end; a short, stable ``text/plain`` (the status
        line) for everything else, so a notebook that shows the panel stays nbval-stable."""
        bundle = self.widget._repr_mimebundle_(**kwargs)
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        data["text/plain"] = repr(self)
        return bundle

    def __repr__(self) -> str:
        return f"Explorer({self.view.status() if self.view else 'no view'})"


def explore(
    hist: Any,
    *,
    batch_size: int | None = None,
    max_tokens: int | None = None,
    pad_to_multiple_of: int | None = None,
    n_buckets: int = DEFAULT_N_BUCKETS,
    method: str = DEFAULT_METHOD,
) -> Explorer:
    """The interactive edges panel for ``hist`` (display it: make it a cell's last value).

    Parameters
    ----------
    hist : LengthHistogram or per-sample lengths
    batch_size, max_tokens, pad_to_multiple_of : int, optional
        The starting batch rule (:meth:`analysis.BatchRule.resolve`: neither means the default batch size).
    n_buckets : int, default 6
        Starting number of buckets (the slider goes from 1 to 16).
    method : str, default "optimal"
        Starting placement method.

    Examples
    --------
    >>> panel = explore([1, 2, 3, 10, 11, 40], batch_size=2, n_buckets=2)
    >>> panel.view.edges
    [0, 11, 40]
    >>> panel.n_buckets.value = 3   # what dragging the slider does
    >>> panel.view.n_buckets, panel.edges.value
    (3, '0, 3, 11, 40')
    """
    return Explorer(
        hist,
        batch_size=batch_size,
        max_tokens=max_tokens,
        pad_to_multiple_of=pad_to_multiple_of,
        n_buckets=n_buckets,
        method=method,
    )
