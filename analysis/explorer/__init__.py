"""An interactive edges explorer for JupyterLab: drag K, change the batch rule, edit the edges.

``analysis.explore(hist, batch_size=8)`` shows a panel (ipywidgets) with controls for the
number of buckets, the batch rule (``batch_size`` or ``max_tokens``), the placement method
and the edges themselves (a comma-separated text box), and, updated live: the expected
efficiency and padded tokens, the per-bucket table, and the histogram with the edges drawn.

A floor (the box under the batch rule, read on Enter; empty: none) makes the ``"optimal"``
edges the best plan meeting it: at least that share of the length mixing (with a gradient-noise
model, of the effective batch), or of the efficiency (the budget fill under ``max_tokens``);
exact, as :func:`analysis.optimize_edges` with ``floor=`` places it, one K at a time.

Changing K, the method or the batch rule places new edges with
:func:`analysis.optimize_edges` and writes them into the edges box; editing the box (press
Enter) evaluates exactly those edges with :func:`analysis.padding.waste.expected_padding`, so you can try
"what if the second edge were 1024?" and compare with the optimum.

The logic is pure and testable without a browser: :func:`explore_view` takes the control
values and returns an :class:`ExplorerView` (numbers and table); :func:`explore_figure` draws
it.  The :class:`Explorer` panel wires widgets to the same logic and keeps every result in
widget values (an ``HTML`` status and table, an ``Image`` PNG of the figure).

Every interaction redraws quickly: the panel keeps what it placed, so the
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

from analysis.explorer._panel import Explorer, ExplorerControls, explore
from analysis.explorer._plans import STAND_IN_METHOD
from analysis.explorer._view import EdgesInput, ExplorerView, HistogramInput, explore_figure, explore_view

__all__ = [
    "ExplorerView",
    "Explorer",
    "ExplorerControls",
    "explore",
    "explore_view",
    "explore_figure",
    "STAND_IN_METHOD",
    "HistogramInput",
    "EdgesInput",
]
