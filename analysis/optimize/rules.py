"""The field's rules for bucket edges, made to give ``K`` buckets.

``"geometric"``
    tensor2tensor's ``_bucket_boundaries`` idea: interior edges ``floor(lo * (hi / lo) ** (t /
    K))``, ``t = 1..K-1``, with ``lo``/``hi`` the shortest/longest length (the case's geometric
    start is this rule with ``lo = 66``).
``"equal_count"``
    fairseq's ``get_buckets``: upper bounds ``np.percentile(sizes, np.linspace(0, 100, K + 1),
    method="lower")[1:]``.
``"equal_tokens"``
    Lhotse's ``estimate_duration_buckets`` (used by NeMo): walk the sorted samples and start a
    new bucket at the first sample seen once the running total exceeds ``total / K`` (its bins
    are bucket *starts*: the edge is ``bin - 1`` here).
``"greedy"``
    The case's search: the geometric start, then coordinate descent over ~290 quantile
    candidates until a full pass improves nothing (a local optimum) on the classic objective
    (each bucket's last short batch counted as full, what the case ran), continued on the
    optimiser's exact objective from there (so never worse than the classic search by it).

Rules that produce repeated edges collapse them, so a rule can give fewer buckets than asked.
With a token budget (``max_tokens``) an edge strictly between two observed lengths holds the
same samples as the longest length below it but divides the budget by more, so its batches
never fill the budget; every rule's edges are then moved down to the longest length they hold
(rounded up to ``edge_multiple``), where the optimiser places its own edges too.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from analysis.batching import round_up
from analysis.optimize._problem import Problem
from analysis.optimize._search import edges_to_ends, ends_to_edges

#: Every rule :func:`analysis.optimize_edges` knows besides ``"optimal"``.
RULES = ("geometric", "equal_count", "equal_tokens", "greedy")
_GREEDY_CANDIDATES = 290


def _finish_edges(prob: Problem, interior: Iterable[int]) -> list[int]:
    """``[0, interior..., top]`` with interior edges rounded up to ``edge_multiple``, kept only
    strictly inside ``(0, top)`` and deduplicated (repeated edges collapse)."""
    top = int(prob.upper[-1])
    em = prob.edge_multiple
    vals = sorted({int(round_up(int(e), em)) for e in interior})
    if prob.rule.batch_size is None:  # a token budget: the tightest edge holding the same samples
        held = np.searchsorted(prob.lengths, np.array(vals, dtype=np.int64), side="right")
        vals = sorted({int(prob.upper[j]) for j in held.tolist() if j > 0})
    return [0, *(e for e in vals if 0 < e < top), top]


def _geometric_edges(prob: Problem, k: int) -> list[int]:
    lo, hi = float(prob.lengths[0]), float(prob.lengths[-1])
    return _finish_edges(prob, (math.floor(lo * (hi / lo) ** (t / k)) for t in range(1, k)))


def _equal_count_edges(prob: Problem, k: int) -> list[int]:
    # np.percentile(sizes, q, method="lower") = sorted_sizes[floor((n - 1) * q / 100)]
    n = int(prob.cum[-1])
    q = np.linspace(0, 100, k + 1)[1:]
    index = np.floor((n - 1) * (q / 100)).astype(np.int64)
    picks = prob.lengths[np.searchsorted(prob.cum[1:], index, side="right")]
    return _finish_edges(prob, picks.tolist())


def _equal_tokens_edges(prob: Problem, k: int) -> list[int]:
    lengths = prob.lengths.tolist()
    counts = np.diff(prob.cum).tolist()
    total = sum(v * c for v, c in zip(lengths, counts))
    starts: list[int] = []
    tot = 0  # Lhotse: `if tot > total / k: bins.append(size); tot = 0`, then `tot += size`
    if k > 1:
        for v, c in zip(lengths, counts):
            left = c
            while left:
                if k * tot > total:
                    starts.append(v)
                    tot = 0
                # samples of length v added before the total exceeds the budget again
                take = min(left, (total - k * tot) // (k * v) + 1)
                tot += take * v
                left -= take
    first = int(prob.lengths[0])
    return _finish_edges(prob, (s - 1 for s in starts if s - 1 >= first))


def _greedy_ends(prob: Problem, k: int) -> list[int]:
    m = prob.m
    start = edges_to_ends(prob, _geometric_edges(prob, k))
    start = [j for j in start if 0 < j < m]
    # snap to allowed ends (the first allowed end at or after j)
    allowed = prob.ends

    def snap(js: Iterable[int]) -> list[int]:
        return sorted({int(allowed[np.searchsorted(allowed, j)]) for j in js})

    start = [j for j in snap(start) if j < m]
    qs = np.linspace(0, 1, _GREEDY_CANDIDATES + 2)[1:-1]
    n = int(prob.cum[-1])
    targets = np.maximum(np.ceil(qs * n), 1)
    found = np.searchsorted(prob.cum[1:], targets, side="left") + 1
    cand = [j for j in snap(found.tolist()) if j < m]
    points = np.array(sorted({0, m, *start, *cand}), dtype=np.int64)
    # numba: imported on first use
    from analysis.optimize._kernel import cost_matrix, full_batch_matrix

    pos = {int(p): i for i, p in enumerate(points)}
    cand_pos = np.array(sorted(pos[j] for j in cand), dtype=np.int64)
    cur = [0, *(pos[j] for j in start), points.size - 1]
    # the field's descent on the classic objective (each last short batch counted as full),
    # then on to the exact objective from where it stopped: each exact move lowers the exact
    # objective, so the plan is never worse than the classic descent's by the exact padding
    for mat in (full_batch_matrix(prob, points), cost_matrix(prob, points)):
        cur = _descend(mat, cur, cand_pos)
    return [int(points[p]) for p in cur[1:]]


def _descend(mat: np.ndarray, cur: list[int], cand_pos: np.ndarray) -> list[int]:
    """Coordinate descent of the interior ends ``cur`` over the candidates ``cand_pos`` on the
    bucket costs ``mat``: each end in turn moves to its best place between its neighbours, until
    no move lowers the total."""
    cur = list(cur)
    improved = True
    while improved:
        improved = False
        for t in range(1, len(cur) - 1):
            a, b = cur[t - 1], cur[t + 1]
            here = mat[a, cur[t]] + mat[cur[t], b]
            between = cand_pos[(cand_pos > a) & (cand_pos < b)]
            if between.size == 0:
                continue
            vals = mat[a, between] + mat[between, b]
            i = int(np.argmin(vals))
            if vals[i] < here and not math.isclose(vals[i], here, rel_tol=1e-12, abs_tol=0.0):
                cur[t] = int(between[i])
                improved = True
    return cur


def baseline_edges(prob: Problem, method: str, k: int) -> list[int]:
    if method == "geometric":
        return _geometric_edges(prob, k)
    if method == "equal_count":
        return _equal_count_edges(prob, k)
    if method == "equal_tokens":
        return _equal_tokens_edges(prob, k)
    if method == "greedy":
        return ends_to_edges(prob, _greedy_ends(prob, k))
    raise ValueError(f"unknown method {method!r}; choose one of optimal, {', '.join(RULES)}")
