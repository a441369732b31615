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

The optimiser never blocks the panel: when an interaction needs an optimiser pass the panel
has not made (a batch rule not seen before, or ``"optimal"`` for the first time under a
rule), the callback returns at once with a *provisional* view, the edges shown until then
evaluated exactly under the new rule (or, for a K they don't have, a quick
``"equal_tokens"`` placement), its status line saying that the optimal edges are being
computed, while the pass runs in a background thread; when it ends the panel shows the
optimal plan if it still asks for it.  :meth:`Explorer.wait` blocks until no pass is
pending (scripts, tests); ``explore(..., background=False)`` places synchronously.  The
first placement, when the panel is built, is always synchronous, so a displayed panel (and
its one-line text in a static notebook) starts from its final plan.

This module imports ipywidgets, so ``import analysis`` does not load it: ``analysis.explore``
is resolved lazily (module ``__getattr__`` in ``analysis/__init__.py``).
"""

from __future__ import annotations

import html
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import pandas as pd
from matplotlib.figure import Figure

from analysis._validate import known_name
from analysis.batching import DEFAULT_MAX_BUCKETS, DEFAULT_METHOD, DEFAULT_N_BUCKETS, BatchRule, parse_edges
from analysis.lengths import LengthHistogram
from analysis.optimize import (
    METHODS,
    BucketPlan,
    evaluate_edges,
    optimize_edges,
    sweep_bucket_counts,
)
from analysis.tables import format_count

if TYPE_CHECKING:
    from analysis.plots import EdgesOnHistogram

__all__ = ["ExplorerView", "Explorer", "explore", "explore_view", "explore_figure"]


@dataclass(frozen=True)
class ExplorerView:
    """What the panel shows: a plan and where its edges came from (``source``: the placement
    method, or ``"edited"`` for edges typed by hand).

    A *provisional* view stands in while the optimal edges for ``plan.rule`` are computed in
    the background (see :class:`Explorer`): ``provisional`` then says where its edges come
    from in words, and ``source`` is ``"previous"`` (the edges shown before, evaluated under
    the new rule) or the quick method that placed them for a new K.  ``provisional`` is
    ``None`` for every other view.
    """

    plan: BucketPlan
    source: str
    provisional: str | None = None

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
        """One line: efficiency, padded and useful tokens (the proven bound on the distance to
        the optimum when a candidate search could not prove its plan optimal; for a
        provisional view, that the optimal edges are being computed and which edges are shown
        meanwhile).

        Examples
        --------
        >>> v = explore_view([1, 2, 3, 10], n_buckets=1, batch_size=2)
        >>> v.status()
        'optimal, 1 bucket: efficiency 0.6316, padded tokens 25 for 16 useful (waste 9)'
        >>> ExplorerView(v.plan, "previous", provisional="optimal, batch_size 4").status()
        ... # doctest: +NORMALIZE_WHITESPACE
        'computing the optimal edges for batch_size 2 in the background; shown meanwhile,
        under that rule: previous edges (optimal, batch_size 4), 1 bucket: efficiency 0.6316,
        padded tokens 25 for 16 useful (waste 9)'
        """
        plural = "" if self.n_buckets == 1 else "s"
        plan = self.plan
        bound = "" if plan.exact else f"; at most {plan.gap:.2%} above the optimum (proven bound)"
        numbers = (
            f"{self.n_buckets} bucket{plural}: efficiency "
            f"{plan.efficiency:.4f}, padded tokens {format_count(plan.padded_tokens)} for "
            f"{plan.useful_tokens:,} useful (waste {format_count(plan.waste_tokens)}){bound}"
        )
        if self.provisional is None:
            return f"{self.source}, {numbers}"
        return (
            f"computing the optimal edges for {plan.rule.text} in the background; shown meanwhile, "
            f"under that rule: {self.source} edges ({self.provisional}), {numbers}"
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
    title = f"{view.source} edges, {view.n_buckets} buckets: expected efficiency {view.efficiency:.1%}"
    return title if view.provisional is None else f"{title} (optimal edges being computed)"


#: The method that places a provisional view's edges for a K the shown edges don't have (one
#: of the field's rules: milliseconds, and no rule of the field is closest to the optimum on
#: every data set, so the choice only has to be quick and named in the status).
STAND_IN_METHOD = "equal_tokens"

#: An optimiser run for the panel: called without the panel's lock, it runs the optimiser
#: and touches no shared state; the function it returns stores the result (under the lock).
_Job = Callable[[], Callable[[], None]]


class _Plans:
    """The plans the panel has placed, by (method, batch rule) and K: each placed once.

    ``"optimal"`` edges for every K up to ``k_max`` come from one
    :func:`analysis.sweep_bucket_counts` pass (one DP pass serves every K), made the first
    time the rule is asked for; the plan of one K is then built from its edges with
    :func:`analysis.evaluate_edges` (the padding model, milliseconds).  The field's rules
    are placed per K by :func:`analysis.optimize_edges` (milliseconds).  The plans of the
    last ``keep`` (method, rule) pairs are kept.

    :meth:`cached` never runs the optimiser (it answers ``None`` where an optimal plan needs
    a pass); :meth:`claim` hands out the missing pass as a :data:`_Job`, which a caller may
    run in another thread; :meth:`plan` runs the passes here.  The object itself holds no
    lock: the panel calls :meth:`cached`, :meth:`claim` and a job's store under its own.
    """

    def __init__(self, hist: LengthHistogram, k_max: int, keep: int = 8) -> None:
        self.hist = hist
        self.k_max = k_max
        self.keep = keep
        self.sweeps = 0  # optimiser sweeps started (a test counts them)
        self._plans: OrderedDict[tuple[str, BatchRule], dict[int, BucketPlan]] = OrderedDict()
        # per rule: the optimal edges of each K with the proven bound on their distance to the
        # optimum (plan.gap), or the message of its ValueError; a rule whose sweep failed
        # starts empty and is filled K by K
        self._optimal: dict[BatchRule, dict[int, tuple[list[int], float] | str]] = {}

    def plan(self, n_buckets: int, rule: BatchRule, method: str) -> BucketPlan:
        """The plan ``optimize_edges(hist, n_buckets, rule, method=method)`` (equal to it),
        running any optimiser pass it needs here."""
        while (plan := self.cached(n_buckets, rule, method)) is None:
            job = self.claim(rule, n_buckets)
            assert job is not None  # cached() lacks the plan, so a pass is missing
            job()()
        return plan

    def cached(self, n_buckets: int, rule: BatchRule, method: str) -> BucketPlan | None:
        """The plan of :meth:`plan` where it needs no optimiser pass (the field's rules are
        placed here, in milliseconds), else ``None``.  Raises ``ValueError`` as
        :func:`analysis.optimize_edges` would."""
        key = (method, rule)
        plans = self._plans.pop(key, {})
        self._plans[key] = plans  # most recent last
        while len(self._plans) > self.keep:
            old_method, old_rule = next(iter(self._plans))
            del self._plans[(old_method, old_rule)]
            if old_method == "optimal":
                self._optimal.pop(old_rule, None)
        if n_buckets not in plans:
            if method != "optimal" or not 1 <= n_buckets <= self.k_max:
                plans[n_buckets] = optimize_edges(self.hist, n_buckets, rule, method=method)
            else:
                found = self._optimal.get(rule, {}).get(n_buckets)
                if found is None:
                    return None
                if isinstance(found, str):
                    raise ValueError(found)
                plans[n_buckets] = self._optimal_plan(n_buckets, rule, *found)
        return plans[n_buckets]

    def _optimal_plan(self, n_buckets: int, rule: BatchRule, edges: list[int], gap: float) -> BucketPlan:
        plan = evaluate_edges(self.hist, edges, rule, method="optimal")
        # the pass's proven gap ("auto" candidates above AUTO_CANDIDATES_ABOVE distinct lengths)
        return replace(plan, n_buckets_requested=n_buckets, gap=gap)

    def claim(self, rule: BatchRule, n_buckets: int | None) -> _Job | None:
        """The optimiser pass the optimal plans of ``rule`` still lack, or ``None``: the sweep
        over every K the first time ``rule`` is asked for; after a sweep that failed (some K
        has no finite optimum), ``n_buckets`` alone (``None``: none asked for)."""
        if rule not in self._optimal:
            self.sweeps += 1
            return lambda: self._sweep(rule)
        if n_buckets is not None and 1 <= n_buckets <= self.k_max and n_buckets not in self._optimal[rule]:
            return lambda: self._place_one(rule, n_buckets)
        return None

    def _sweep(self, rule: BatchRule) -> Callable[[], None]:
        found: dict[int, tuple[list[int], float] | str]
        try:
            sweep = sweep_bucket_counts(self.hist, range(1, self.k_max + 1), ["optimal"], rule)
        except ValueError:  # some K has no finite optimum: place K by K, each with its own error
            found = {}
        else:
            placed = zip(sweep["n_buckets"].tolist(), sweep["edges"], sweep["gap"].tolist(), strict=True)
            found = {k: (edges, gap) for k, edges, gap in placed}

        def store() -> None:
            self._optimal[rule] = found

        return store

    def _place_one(self, rule: BatchRule, n_buckets: int) -> Callable[[], None]:
        found: tuple[list[int], float] | str
        try:
            plan = optimize_edges(self.hist, n_buckets, rule)
            found = (plan.edges, plan.gap)
        except ValueError as exc:
            found = str(exc)

        def store() -> None:
            self._optimal.setdefault(rule, {})[n_buckets] = found

        return store


class Explorer:
    """The panel: controls wired to the logic of :func:`explore_view` and the figure of
    :func:`explore_figure`.

    Attributes (ipywidgets): ``n_buckets`` (IntSlider), ``rule`` (Dropdown:
    ``batch_size``/``max_tokens``), ``rule_value`` (BoundedIntText), ``method`` (Dropdown),
    ``edges`` (Text, evaluated on Enter), ``status`` and ``table`` (HTML), ``image`` (Image,
    the figure as PNG), ``widget`` (the whole VBox).  ``view`` is the last
    :class:`ExplorerView`; ``error`` the last problem (edited edges, or a batch rule with no
    optimum) or ``None``; ``plot`` the :class:`analysis.plots.EdgesOnHistogram` the image
    shows, one figure updated in place.  Placed plans are kept (see the module docstring):
    only a new (method, batch rule) runs the optimiser.

    With ``background=True`` (the default) that optimiser pass runs in a daemon thread and
    never blocks a callback: the callback shows a provisional view at once (``view.provisional``
    is set: the edges shown before, evaluated exactly under the new rule with
    :func:`analysis.evaluate_edges`; where the K changed, ``"equal_tokens"`` edges for the new
    K; the status line says which, and that the optimal edges are being computed).  When the
    pass ends, the panel shows the optimal plan (equal to :func:`analysis.optimize_edges`'s) if
    its controls still ask for it, and otherwise only keeps it: a later choice is never
    overwritten by an earlier one's result, and typing edges meanwhile keeps them on show.
    One pass runs per rule however often the rule is chosen again meanwhile.  Every update of
    the widgets and the figure holds one lock, since the worker thread makes them too.
    :meth:`wait` blocks until no pass is pending.  With ``background=False`` every placement
    runs the optimiser in the callback, as before.  The first placement, in the constructor, is
    synchronous either way: no panel is on show yet to keep responsive.
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
        background: bool = True,
    ) -> None:
        import ipywidgets as w

        self.hist = hist if isinstance(hist, LengthHistogram) else LengthHistogram.from_lengths(hist)
        rule = BatchRule.resolve(batch_size, max_tokens, pad_to_multiple_of)
        self.pad_to_multiple_of = rule.pad_to_multiple_of
        known_name(method, METHODS, "method")
        k_max = max(1, min(DEFAULT_MAX_BUCKETS, self.hist.n_distinct))
        if not 1 <= n_buckets <= k_max:
            raise ValueError(f"n_buckets must be between 1 and {k_max}, got {n_buckets!r}")
        self.background = bool(background)
        self.view: ExplorerView | None = None
        self.error: str | None = None
        self._busy = False  # the panel is setting a widget itself: its observer must not act
        self._plans = _Plans(self.hist, k_max)
        # one re-entrant lock around every state change and display (a display sets the edges
        # box, whose observer takes the lock again in the same thread); the condition tells
        # wait() that a pass ended
        self._lock = threading.RLock()
        self._idle = threading.Condition(self._lock)
        self._pending: dict[BatchRule, threading.Thread] = {}  # the pass running for each rule
        self._waiting_for: BatchRule | None = None  # the rule the provisional view waits for
        self._shown_k: int | None = None  # the K slider's value when the view was shown
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
        with self._lock:
            self._place(block=True)

    # -------------------------------------------------------------- actions
    def _rule(self) -> BatchRule:
        value = int(self.rule_value.value)
        by_size = self.rule.value == "batch_size"
        return BatchRule(value if by_size else None, None if by_size else value, self.pad_to_multiple_of)

    def place_edges(self) -> None:
        """Place edges with the current K, method and batch rule, and show them (in the
        background: a provisional view until a needed optimiser pass ends, see the class
        docstring)."""
        with self._lock:
            self._place(block=not self.background)

    def evaluate_edges(self, text: str) -> None:
        """Evaluate the edges typed in the box (no optimisation) and show them."""
        with self._lock:
            self._waiting_for = None  # typed edges stay on show when a pending pass ends
            try:
                view = _edited_view(self.hist, text, self._rule())
            except ValueError as exc:
                self._show_error(str(exc))
                return
            self._show(view)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until no optimiser pass is pending, and the panel shows what its controls
        ask for (or the error that stopped it).

        Parameters
        ----------
        timeout : float, optional
            Seconds to wait at most; ``None`` waits as long as it takes.

        Returns
        -------
        bool
            ``True`` when no pass is pending; ``False`` when ``timeout`` ran out first.

        Examples
        --------
        >>> panel = explore([1, 2, 3, 10, 11, 40], batch_size=2, n_buckets=2)
        >>> panel.rule_value.value = 3   # a new batch rule: its pass runs in the background
        >>> panel.wait()
        True
        >>> panel.view.source, panel.view.edges, panel.view.plan.rule.batch_size
        ('optimal', [0, 11, 40], 3)
        """
        with self._idle:
            return self._idle.wait_for(lambda: not self._pending, timeout)

    def _place(self, block: bool) -> None:
        """:meth:`place_edges` (under the lock); ``block``: run a missing pass here."""
        k, rule, method = int(self.n_buckets.value), self._rule(), str(self.method.value)
        self._waiting_for = None
        try:
            plan = self._plans.plan(k, rule, method) if block else self._plans.cached(k, rule, method)
        except ValueError as exc:
            self._show_error(str(exc))
            return
        if plan is not None:
            self._show(ExplorerView(plan, plan.method))
            return
        self._waiting_for = rule
        self._show_provisional(k, rule)
        # after drawing: a pass started first would take CPU from the drawing on shared cores
        self._start(rule, k)

    def _start(self, rule: BatchRule, n_buckets: int) -> None:
        """Run the pass ``rule`` lacks in a daemon thread, unless one runs for it already."""
        if rule in self._pending:
            return
        job = self._plans.claim(rule, n_buckets)
        assert job is not None  # cached() found the plan missing, so a pass is missing
        name = f"explorer: optimal edges for {rule.text}"
        thread = threading.Thread(target=self._work, args=(rule, job), daemon=True, name=name)
        self._pending[rule] = thread
        thread.start()

    def _work(self, rule: BatchRule, job: _Job) -> None:
        """The worker thread: run ``job`` without the lock, store and show its result under it,
        and go on while the panel asks for a K of ``rule`` still missing (a failed sweep)."""
        next_job: _Job | None = job
        try:
            while next_job is not None:
                store = next_job()
                with self._lock:
                    store()
                    self._show_if_asked(rule)
                    asked = int(self.n_buckets.value) if self._asks(rule) else None
                    next_job = self._plans.claim(rule, asked)
                    if next_job is None:
                        del self._pending[rule]
                        self._idle.notify_all()
        except Exception as exc:  # a bug, not bad input: say so rather than wait forever
            with self._lock:
                self._pending.pop(rule, None)
                self._idle.notify_all()
                self._show_error(f"the optimiser failed for {rule.text}: {type(exc).__name__}: {exc}")

    def _asks(self, rule: BatchRule) -> bool:
        """Whether the panel still waits for the optimal edges of ``rule``."""
        return self._waiting_for == rule and self._rule() == rule and self.method.value == "optimal"

    def _show_if_asked(self, rule: BatchRule) -> None:
        if not self._asks(rule):
            return
        try:
            plan = self._plans.cached(int(self.n_buckets.value), rule, "optimal")
        except ValueError as exc:
            self._waiting_for = None
            self._show_error(str(exc))
            return
        if plan is not None:
            self._waiting_for = None
            self._show(ExplorerView(plan, plan.method))

    def _show_provisional(self, n_buckets: int, rule: BatchRule) -> None:
        """Show what stands in until the optimal edges of ``rule`` are known: the edges on
        show, evaluated under ``rule``, or, where K changed, quick edges for the new K."""
        shown = self.view
        try:
            if shown is not None and self._shown_k == n_buckets:
                if shown.source == "previous" and shown.provisional is not None:
                    origin = shown.provisional
                else:
                    origin = f"{shown.source}, {shown.plan.rule.text}"
                plan = evaluate_edges(self.hist, shown.edges, rule, method="previous")
                view = ExplorerView(plan, "previous", provisional=origin)
            else:
                plan = self._plans.plan(n_buckets, rule, STAND_IN_METHOD)
                view = ExplorerView(plan, STAND_IN_METHOD, provisional="placed for the new K")
        except ValueError as exc:
            self._show_error(
                f"computing the optimal edges for {rule.text} in the background; "
                f"nothing to show meanwhile: {exc}"
            )
            return
        self._show(view)

    # -------------------------------------------------------------- observers
    def _on_control(self, change: dict[str, Any]) -> None:
        with self._lock:
            if not self._busy:  # _on_rule sets the value and then places once
                self._place(block=not self.background)

    def _on_rule(self, change: dict[str, Any]) -> None:
        default = (
            BatchRule.resolve().batch_size
            if change["new"] == "batch_size"
            else BatchRule.resolve().token_budget(self.hist.max)
        )
        with self._lock:
            self._busy = True
            try:
                self.rule_value.value = default
            finally:
                self._busy = False
            self._place(block=not self.background)

    def _on_edges(self, change: dict[str, Any]) -> None:
        with self._lock:
            if not self._busy:
                self.evaluate_edges(change["new"])

    # -------------------------------------------------------------- display (under the lock)
    def _show(self, view: ExplorerView) -> None:
        self.view, self.error = view, None
        self._shown_k = int(self.n_buckets.value)
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
    background: bool = True,
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
    background : bool, default True
        Run the optimiser passes that interactions need in a background thread, showing a
        provisional view meanwhile (:class:`Explorer`; :meth:`Explorer.wait` waits for
        them); ``False``: run them in the callback.  The starting placement is synchronous
        either way.

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
        background=background,
    )
