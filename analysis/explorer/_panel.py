"""The edges explorer's ipywidgets panel: :class:`Explorer` wires the controls to the pure
logic of :mod:`analysis.explorer._view` and the plan cache of :mod:`analysis.explorer._plans`;
:func:`explore` builds it.  ipywidgets is imported when a panel is built, never before."""

from __future__ import annotations

import html
import threading
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from analysis._validate import known_name
from analysis.batching import (
    DEFAULT_MAX_BUCKETS,
    DEFAULT_METHOD,
    DEFAULT_N_BUCKETS,
    MAX_RULE_VALUE,
    BatchRule,
    parse_rule_value,
)
from analysis.explorer._plans import STAND_IN_METHOD, Job, Key, Plans
from analysis.explorer._view import ExplorerView, HistogramInput, edited_view, view_title, with_noise
from analysis.lengths import as_histogram
from analysis.narrative.plan import describe_computing
from analysis.optimize import METHODS, Floor, evaluate_edges, parse_share
from analysis.tables import tidy

if TYPE_CHECKING:
    from analysis.plots import EdgesOnHistogram
    from analysis.timing.noise import GradientNoise

__all__ = ["Explorer", "ExplorerControls", "explore", "RULE_BOX_WIDTH"]

#: The batch-rule box's width: the largest value the rule takes (2**62, 19 digits) shows whole.
RULE_BOX_WIDTH = f"calc({len(str(MAX_RULE_VALUE)) + 2}ch + 40px)"


class Explorer:
    """The panel: controls wired to the logic of :func:`explore_view` and the figure of
    :func:`explore_figure`.

    Attributes (ipywidgets): ``n_buckets`` (IntSlider), ``rule`` (Dropdown:
    ``batch_size``/``max_tokens``), ``rule_value`` (Text: the value, read on Enter by
    :func:`analysis.batching.parse_rule_value`, the CLI's rule, and shown whole), ``method`` (Dropdown),
    ``edges`` (Text, evaluated on Enter), ``floor`` (Dropdown: what a floor floors, the
    mixing, or with a noise model the effective batch share, or the objective's share: the
    efficiency, the budget fill under ``max_tokens``) and ``floor_value`` (Text: the floor, a
    number in (0, 1] or a percentage, read on Enter; empty: no floor), ``status`` and
    ``table`` (HTML), ``image`` (Image, the figure as PNG), ``widget`` (the whole VBox).
    With a floor the ``"optimal"`` edges are the best plan meeting it (``optimize_edges(...,
    floor=...)``, exact, one K at a time in the background); the field's rules ignore it,
    and the status says so.  ``view`` is the last
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
        hist: HistogramInput,
        *,
        batch_size: int | None = None,
        max_tokens: int | None = None,
        pad_to_multiple_of: int | None = None,
        n_buckets: int = DEFAULT_N_BUCKETS,
        method: str = DEFAULT_METHOD,
        background: bool = True,
        noise: GradientNoise | None = None,
        floor: Floor | None = None,
    ) -> None:
        import ipywidgets as w

        self.hist = as_histogram(hist)
        self.noise = noise
        self._shuffles: dict[BatchRule, float] = {}  # a shuffle's B_eff per rule (with noise)
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
        self._plans = Plans(self.hist, k_max, noise=noise)
        # one re-entrant lock around every state change and display (a display sets the edges
        # box, whose observer takes the lock again in the same thread); the condition tells
        # wait() that a pass ended
        self._lock = threading.RLock()
        self._idle = threading.Condition(self._lock)
        self._pending: dict[Key, threading.Thread] = {}  # the pass running for each rule and floor
        self._waiting_for: Key | None = None  # the rule and floor the provisional view waits for
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
        # text, not a number box: a browser's number box clamps a mistyped value to its limit
        # and rounds what a double cannot hold; the text is read by the CLI's rule instead
        self.rule_value = w.Text(
            value=str(value),
            description="=",
            continuous_update=False,
            layout=w.Layout(width=RULE_BOX_WIDTH),
        )
        self.method = w.Dropdown(options=list(METHODS), value=method, description="method", style=style)
        self.edges = w.Text(
            description="edges",
            continuous_update=False,
            style=style,
            layout=w.Layout(width="95%"),
            placeholder="comma-separated, e.g. 0, 770, 1216, 8192 (Enter)",
        )
        axis = "mixing" if noise is None else "effective_batch"
        self.floor = w.Dropdown(
            options=[
                (f"{axis.replace('_', ' ')} floor", axis),
                ("efficiency / budget fill floor", "objective"),
            ],
            value=axis if floor is None or floor.measure == axis else "objective",
            description="",
            layout=w.Layout(width="auto"),
        )
        self.floor_value = w.Text(
            value="" if floor is None else repr(floor.value),
            description=">=",
            continuous_update=False,
            placeholder="none, or e.g. 30% (Enter)",
        )
        self.status = w.HTML()
        self.table = w.HTML()
        self.image = w.Image(format="png")
        self.widget = w.VBox(
            [
                w.HBox([self.n_buckets, self.method]),
                w.HBox([self.rule, self.rule_value]),
                w.HBox([self.floor, self.floor_value]),
                self.edges,
                self.status,
                self.image,
                self.table,
            ]
        )
        if floor is not None and self._floor(rule) != floor:
            wanted = "budget_fill" if rule.max_tokens is not None else "efficiency"
            raise ValueError(
                f"floor: the panel floors {axis} or {wanted} under {rule.text}, got {floor.measure}"
            )
        for control in (self.n_buckets, self.method, self.rule_value, self.floor, self.floor_value):
            control.observe(self._on_control, names="value")
        self.rule.observe(self._on_rule, names="value")
        self.edges.observe(self._on_edges, names="value")
        with self._lock:
            self._place(block=True)

    # -------------------------------------------------------------- actions
    def _rule(self) -> BatchRule:
        """The batch rule the controls ask for (a ``ValueError`` naming the rule when the box
        holds what :func:`analysis.batching.parse_rule_value` refuses)."""
        try:
            value = parse_rule_value(self.rule_value.value)
        except ValueError as exc:
            raise ValueError(f"{self.rule.value}: {exc}") from None
        by_size = self.rule.value == "batch_size"
        return BatchRule(value if by_size else None, None if by_size else value, self.pad_to_multiple_of)

    def _floor(self, rule: BatchRule) -> Floor | None:
        """The floor the controls ask for under ``rule`` (None: the box is empty; a
        ``ValueError`` naming the floor when it holds what
        :func:`analysis.optimize.parse_share` refuses)."""
        text = str(self.floor_value.value).strip()
        if not text:
            return None
        measure = str(self.floor.value)
        if measure == "objective":
            measure = "efficiency" if rule.max_tokens is None else "budget_fill"
        try:
            return Floor(measure, parse_share(text))
        except ValueError as exc:
            raise ValueError(f"{measure.replace('_', ' ')} floor: {exc}") from None

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
                view = edited_view(self.hist, text, self._rule())
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
        >>> panel.rule_value.value = "3"   # a new batch rule: its pass runs in the background
        >>> panel.wait()
        True
        >>> panel.view.source, panel.view.edges, panel.view.plan.rule.batch_size
        ('optimal', [0, 11, 40], 3)
        """
        with self._idle:
            return self._idle.wait_for(lambda: not self._pending, timeout)

    def _place(self, block: bool) -> None:
        """:meth:`place_edges` (under the lock); ``block``: run a missing pass here."""
        k, method = int(self.n_buckets.value), str(self.method.value)
        self._waiting_for = None
        try:
            rule = self._rule()
            floor = self._floor(rule)
            asked = floor if method == "optimal" else None
            plan = (
                self._plans.plan(k, rule, method, asked)
                if block
                else self._plans.cached(k, rule, method, asked)
            )
        except ValueError as exc:
            self._show_error(str(exc))
            return
        if plan is not None:
            self._show(ExplorerView(plan, plan.method, floor=floor))
            return
        self._waiting_for = (rule, floor)
        self._show_provisional(k, rule, floor)
        # after drawing: a pass started first would take CPU from the drawing on shared cores
        self._start((rule, floor), k)

    def _start(self, key: Key, n_buckets: int) -> None:
        """Run the pass ``key`` (a rule and its floor) lacks in a daemon thread, unless one
        runs for it already."""
        if key in self._pending:
            return
        job = self._plans.claim(key, n_buckets)
        assert job is not None  # cached() found the plan missing, so a pass is missing
        rule, floor = key
        name = f"explorer: optimal edges for {rule.text}" + ("" if floor is None else f", {floor.text}")
        thread = threading.Thread(target=self._work, args=(key, job), daemon=True, name=name)
        self._pending[key] = thread
        thread.start()

    def _work(self, key: Key, job: Job) -> None:
        """The worker thread: run ``job`` without the lock, store and show its result under it,
        and go on while the panel asks for a K of ``key`` still missing (a failed sweep, or a
        floor: placed one K at a time)."""
        next_job: Job | None = job
        try:
            while next_job is not None:
                store = next_job()
                with self._lock:
                    store()
                    self._show_if_asked(key)
                    asked = int(self.n_buckets.value) if self._asks(key) else None
                    next_job = self._plans.claim(key, asked)
                    if next_job is None:
                        del self._pending[key]
                        self._idle.notify_all()
        except Exception as exc:  # a bug, not bad input: say so rather than wait forever
            with self._lock:
                self._pending.pop(key, None)
                self._idle.notify_all()
                self._show_error(f"the optimiser failed for {key[0].text}: {type(exc).__name__}: {exc}")

    def _asks(self, key: Key) -> bool:
        """Whether the panel still waits for the optimal edges of ``key``."""
        try:
            rule = self._rule()
            asked = (rule, self._floor(rule))
        except ValueError:  # a box holds a refused value: the panel shows that error
            return False
        return self._waiting_for == key and asked == key and self.method.value == "optimal"

    def _show_if_asked(self, key: Key) -> None:
        if not self._asks(key):
            return
        rule, floor = key
        try:
            plan = self._plans.cached(int(self.n_buckets.value), rule, "optimal", floor)
        except ValueError as exc:
            self._waiting_for = None
            self._show_error(str(exc))
            return
        if plan is not None:
            self._waiting_for = None
            self._show(ExplorerView(plan, plan.method, floor=floor))

    def _show_provisional(self, n_buckets: int, rule: BatchRule, floor: Floor | None) -> None:
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
                view = ExplorerView(plan, "previous", provisional=origin, floor=floor)
            else:
                plan = self._plans.plan(n_buckets, rule, STAND_IN_METHOD)
                view = ExplorerView(plan, STAND_IN_METHOD, provisional="placed for the new K", floor=floor)
        except ValueError as exc:
            self._show_error(f"{describe_computing(rule, floor)}; nothing to show meanwhile: {exc}")
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
                self.rule_value.value = str(default)
            finally:
                self._busy = False
            self._place(block=not self.background)

    def _on_edges(self, change: dict[str, Any]) -> None:
        with self._lock:
            if not self._busy:
                self.evaluate_edges(change["new"])

    # -------------------------------------------------------------- display (under the lock)
    def _show(self, view: ExplorerView) -> None:
        view = with_noise(view, self.hist, self.noise, self._shuffles)
        self.view, self.error = view, None
        self._shown_k = int(self.n_buckets.value)
        self._busy = True
        try:
            self.edges.value = view.edges_text()
        finally:
            self._busy = False
        lines = [line for line in (view.floor_text(), view.noise_text()) if line is not None]
        self.status.value = (
            f"<b>{html.escape(view.status())}</b>"
            + "".join(f"<br>{html.escape(line)}" for line in lines)
            + "".join(
                f"<br><span style='color:#a60'>warning: {html.escape(line)}</span>" for line in view.warnings
            )
        )
        self.table.value = tidy(view.to_frame()).to_html()
        self.plot.show(view.plan, title=view_title(view))
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


class ExplorerControls(TypedDict, total=False):
    """The keywords :func:`explore` passes on to :class:`Explorer` (the constructor's defaults
    apply to those left out)."""

    batch_size: int | None
    max_tokens: int | None
    pad_to_multiple_of: int | None
    n_buckets: int
    method: str
    background: bool
    noise: GradientNoise | None
    floor: Floor | None


def explore(hist: HistogramInput, **controls: Unpack[ExplorerControls]) -> Explorer:
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
    noise : GradientNoise, optional
        A gradient-noise model of your model (:func:`analysis.loaders.load_gradient_noise`):
        the status then says what the edges on show keep of a shuffle's effective batch
        (``B_eff``) and their steps to the same loss (:meth:`ExplorerView.noise_text`).
    floor : Floor, optional
        A starting floor (:class:`analysis.optimize.Floor`) on the mixing (with ``noise``, the
        effective batch share) or on the objective (the efficiency; the budget fill under
        ``max_tokens``): the ``"optimal"`` edges are then the best plan meeting it.

    Examples
    --------
    >>> panel = explore([1, 2, 3, 10, 11, 40], batch_size=2, n_buckets=2)
    >>> panel.view.edges
    [0, 11, 40]
    >>> panel.n_buckets.value = 3   # what dragging the slider does
    >>> panel.view.n_buckets, panel.edges.value
    (3, '0, 3, 11, 40')
    >>> round(panel.view.plan.mixing, 3)   # the padding optimum keeps little mixing
    0.002
    >>> panel.floor_value.value = "60%"   # a floor: the most efficient plan keeping 60 % of it
    >>> panel.wait()
    True
    >>> panel.view.edges, round(panel.view.plan.mixing, 3), round(panel.view.efficiency, 3)
    ([0, 3, 10, 40], 0.646, 0.688)
    """
    return Explorer(hist, **controls)
