"""The install's compile-ahead (``python -m analysis.optimize._ahead``) reaches the passes it
names: its rules take the three different compiled DPs and its grid is a real grid."""

from __future__ import annotations

from analysis.optimize import _ahead as ahead
from analysis.optimize import _budget as budget
from analysis.optimize._exact import exact_arrays
from analysis.optimize._problem import build_problem, resolve_objective
from analysis.optimize._search import use_grid


def test_its_rules_take_the_product_the_carried_and_the_budget_passes():
    hist = ahead.histogram()
    probs = [build_problem(hist, rule, 1, None, resolve_objective(rule, None, None)) for rule in ahead.RULES]
    kinds = [(short.product, data.token) for data, short in map(exact_arrays, probs)]
    assert kinds == [(True, False), (False, False), (False, True)]
    assert use_grid(probs[0], ahead._GRID) == ahead._GRID  # fewer candidates than ends: the grid


def test_it_compiles_the_table_of_bounds_on_threads_though_its_own_table_is_too_small(monkeypatch):
    """Part 3 fills a token budget's table on threads and on one, which no plan of its own
    histogram would do (its table is below THREADED_CELLS)."""
    hist = ahead.histogram()
    data, _ = exact_arrays(build_problem(hist, ahead.RULES[2]))
    assert (data.cum.size - 1) ** 2 < budget.THREADED_CELLS
    filled: list[bool | None] = []

    def record(data: object, threaded: bool | None = None, objective: str = "") -> None:
        filled.append(threaded)

    monkeypatch.setattr(ahead, "budget_bounds", record)
    for name in ("optimize_edges", "frontier_minima"):  # (those compile their own kernels)
        monkeypatch.setattr(ahead, name, lambda *args, **kwargs: None)
    ahead.compile_kernels([3])
    assert sorted(filled) == [False, True]
