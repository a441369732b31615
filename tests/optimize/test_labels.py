"""The floor search's label DP (analysis.optimize._labels) against exhaustive search: on random
matrices it returns exactly the plans that meet the limit, beat the incumbent and no other such
plan beats, whatever Lagrangian lines cut the partial plans on the way."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from analysis.optimize import _labels as labels_mod
from analysis.optimize._labels import bounds, label_search


def _matrices(rng: np.random.Generator, p: int) -> tuple[np.ndarray, np.ndarray]:
    """``xm[c, a]``, ``ym[c, a]`` of bucket ``(a, c]`` for ``a < c`` (inf elsewhere): ``y``
    falls where ``x`` rises, plus noise, so the two trade off and each end holds many labels."""
    xm = np.full((p, p), np.inf)
    ym = np.full((p, p), np.inf)
    for c in range(p):
        for a in range(c):
            xm[c, a] = rng.normal(0, 10)
            ym[c, a] = 20 - 0.5 * xm[c, a] + rng.uniform(0, 3)
    return xm, ym


def _exhaustive(
    xm: np.ndarray, ym: np.ndarray, k: int, incumbent: float, limit: float
) -> list[tuple[float, float]]:
    """Every plan's sums, kept where ``y <= limit`` and ``x < incumbent``, then those no other
    kept plan beats on both (one of equal pairs), by ascending ``x``."""
    p = xm.shape[0]
    plans = []
    for inner in itertools.combinations(range(1, p - 1), k - 1):
        ends = [0, *inner, p - 1]
        x = y = 0.0
        for a, c in itertools.pairwise(ends):
            x, y = x + xm[c, a], y + ym[c, a]
        if y <= limit and x < incumbent:
            plans.append((x, y))
    plans.sort()
    front: list[tuple[float, float]] = []
    for x, y in plans:
        if not front or y < front[-1][1]:
            front.append((x, y))
    return front


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("mu_scale", [0.0, 0.3, 3.0])
def test_the_label_search_is_the_constrained_pareto_set_of_exhaustive_search(
    seed: int, mu_scale: float
) -> None:
    rng = np.random.default_rng(seed)
    p, k = 16, 5
    xm, ym = _matrices(rng, p)
    every = _exhaustive(xm, ym, k, np.inf, np.inf)
    # the incumbent and the limit from the unconstrained front (ascending x, falling y), so
    # that its middle meets both and the bounds and lines cut labels on either side
    incumbent, limit = every[3 * len(every) // 4][0], every[len(every) // 4][1]
    want = _exhaustive(xm, ym, k, incumbent, limit)
    assert 2 <= len(want) < len(every)
    found, kept, done, work = label_search(
        bounds(xm, ym, k, mu_scale), incumbent, limit, max_labels=10**6, max_work=10**9
    )
    assert done and kept > 0 and work > 0
    np.testing.assert_allclose([(x, y) for x, y, _ in found], want, rtol=1e-12)
    first, *_ = label_search(
        bounds(xm, ym, k, mu_scale), incumbent, limit, max_labels=10**6, max_work=10**9, max_found=2
    )
    assert first == found[:2]  # only the first are traced back: the same ones
    for x, y, idx in found:  # each plan's ends give its sums
        ends = [0, *idx]
        assert sum(xm[c, a] for a, c in itertools.pairwise(ends)) == pytest.approx(x, rel=1e-12)
        assert sum(ym[c, a] for a, c in itertools.pairwise(ends)) == pytest.approx(y, rel=1e-12)


def test_the_work_is_every_extension_the_bounds_judged() -> None:
    """``work`` counts the labels each bucket extended, cut or not (the cuts in bulk count
    too): with no limit, incumbent or line to cut, it is the number of (label, bucket) pairs."""
    rng = np.random.default_rng(7)
    p, k = 10, 3
    xm, ym = _matrices(rng, p)
    _, _, done, work = label_search(bounds(xm, ym, k, 0.0), 1e12, 1e12, max_labels=10**6, max_work=10**9)
    assert done
    # brute force the same count: labels are the Pareto sets of the partial plans per end
    labels = {0: [(0.0, 0.0)]}
    expected = 0
    for layer in range(1, k + 1):
        nxt: dict[int, list[tuple[float, float]]] = {}
        for c in range(layer, p):
            if (layer == k) != (c == p - 1) or c > p - 1 - (k - layer):  # (or no completion)
                continue
            cand = []
            for a, held in labels.items():
                if a < c:
                    expected += len(held)
                    cand += [(x + xm[c, a], y + ym[c, a]) for x, y in held]
            cand.sort()
            front: list[tuple[float, float]] = []
            for x, y in cand:
                if not front or y < front[-1][1]:
                    front.append((x, y))
            nxt[c] = front
        labels = nxt
    assert work == expected


def _reference_labels(xm: np.ndarray, ym: np.ndarray, k: int) -> list[tuple[float, float, list[int]]]:
    """The label DP with nothing to cut, in plain Python: each end's candidates in the order
    the search makes them (ascending start, each start's labels in order), stably sorted by
    ``x``; of equal ``x`` the first least ``y``, kept where its ``y`` is below every kept one's;
    the last end's labels by ascending ``x`` with their ends traced back."""
    p = xm.shape[0]
    labels: dict[int, list[tuple[float, float, list[int]]]] = {0: [(0.0, 0.0, [])]}
    for layer in range(1, k + 1):
        nxt: dict[int, list[tuple[float, float, list[int]]]] = {}
        for c in range(layer, p):
            if (layer == k) != (c == p - 1) or c > p - 1 - (k - layer):
                continue
            cand = [
                (x + xm[c, a], y + ym[c, a], [*ends, c])
                for a in sorted(labels)
                if a < c
                for x, y, ends in labels[a]
            ]
            cand.sort(key=lambda label: label[0])  # stable
            front: list[tuple[float, float, list[int]]] = []
            i = 0
            while i < len(cand):
                j, pick = i, cand[i]
                while j + 1 < len(cand) and cand[j + 1][0] == cand[i][0]:
                    j += 1
                    pick = cand[j] if cand[j][1] < pick[1] else pick
                if not front or pick[1] < front[-1][1]:
                    front.append(pick)
                i = j + 1
            if front:
                nxt[c] = front
        labels = nxt
    return labels[p - 1]


@pytest.mark.parametrize("seed", range(4))
def test_ties_are_broken_as_a_stable_sort_would_break_them(seed: int) -> None:
    """Small integer buckets tie on both sums all the time: the search keeps, of equal pairs,
    the one a stable sort of each end's candidates puts first, and traces back its very ends."""
    rng = np.random.default_rng(seed)
    p, k = 13, 4
    xm = np.full((p, p), np.inf)
    ym = np.full((p, p), np.inf)
    for c in range(p):
        for a in range(c):
            xm[c, a] = float(rng.integers(0, 4))
            ym[c, a] = float(rng.integers(0, 4))
    want = _reference_labels(xm, ym, k)
    found, _, done, _ = label_search(bounds(xm, ym, k, 0.0), 1e12, 1e12, max_labels=10**6, max_work=10**9)
    assert done and len(want) >= 2
    assert found == want


def _backward_by_rows(
    xm: np.ndarray, ym: np.ndarray, weights: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`analysis.optimize._labels.backward` start by start, each minimum by NumPy over a
    row (``x + w y``, the matrix alone where the other's weight is 0), and the largest finite
    bucket value."""
    p = xm.shape[0]
    out = np.full((weights.shape[0], k + 1, p), np.inf)
    scale = np.zeros(weights.shape[0])
    for u, (wx, wy) in enumerate(weights):
        out[u, 0, p - 1] = 0.0
        for c in range(p - 2, -1, -1):
            rx, ry = xm[c + 1 :, c], ym[c + 1 :, c]
            row = rx if wy == 0.0 else (ry if wx == 0.0 else rx + wy * ry)
            finite = np.abs(row[np.isfinite(row)])
            scale[u] = max(scale[u], finite.max(initial=0.0))
            for r in range(1, k + 1):
                out[u, r, c] = np.min(row + out[u, r - 1, c + 1 :])
    return out, scale


@pytest.mark.parametrize(("p", "k"), [(70, 3), (150, 6), (200, 33)])
def test_the_tiled_backward_is_the_row_by_row_recursion(p: int, k: int) -> None:
    """Several tiles of starts (and a last, short one), blocks of ends with a short one at the
    top, some buckets missing (inf): the completion tables and their scales, bit for bit."""
    rng = np.random.default_rng(p)
    xm, ym = _matrices(rng, p)
    missing = np.tril(rng.random((p, p)) < 0.1, -1)
    xm[missing], ym[missing] = np.inf, np.inf
    weights = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.3], [1.0, 8.0]])
    got, got_scale = labels_mod.backward(xm, ym, weights, k)
    want, want_scale = _backward_by_rows(xm, ym, weights, k)
    assert got.tobytes() == want.tobytes() and got_scale.tobytes() == want_scale.tobytes()
    assert np.isfinite(got[:, k, 0]).all()
