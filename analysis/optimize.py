"""Where bucket edges go: the exact optimum for the real batch rule, and the field's rules.

A bucketed shuffle pads each batch to its longest sample, so the edges decide the padding.
:func:`optimize_edges` places them; ``method`` picks how:

``"optimal"``
    The exact global minimiser of the objective below, by dynamic programming over the
    distinct lengths (every distinct length, or each one rounded up to a multiple of
    ``edge_multiple``, is a candidate edge).
``"geometric"``
    tensor2tensor's ``_bucket_boundaries`` idea (boundaries ``x, x * 1.1, ...`` from a minimum
    length), made to give ``K`` buckets: interior edges ``floor(lo * (hi / lo) ** (t / K))``,
    ``t = 1..K-1``, with ``lo``/``hi`` the shortest/longest length.  (The case's geometric
    start, :data:`analysis.case.CASE_GEOMETRIC_EDGES`, is exactly this rule with ``lo = 66``.)
``"equal_count"``
    fairseq's ``get_buckets`` / ``BucketPadLengthDataset``: upper bounds
    ``np.unique(np.percentile(sizes, np.linspace(0, 100, K + 1), method="lower")[1:])``.
``"equal_tokens"``
    Lhotse's ``estimate_duration_buckets`` (used by NeMo): walk the sorted samples and start
    a new bucket at the first sample seen once the running total exceeds ``total / K``.  Its
    bins are bucket *starts* (``bins[i-1] <= d < bins[i]``); for integer lengths that is the
    edge ``bin - 1`` here.
``"greedy"``
    The case's search: start from ``"geometric"`` (each edge moved down to the nearest
    observed length, which keeps the same buckets), then coordinate descent over ~290
    quantile candidates (the distinct values of ``hist.quantile(linspace(0, 1, 292)[1:-1])``):
    move each edge in turn to the candidate between its neighbours that lowers the objective
    most, until a full pass improves nothing.  A local optimum, no guarantee.

Rules that produce repeated edges collapse them, so a baseline can return fewer buckets than
asked (``BucketPlan.n_buckets < n_buckets_requested``).

The objective
-------------
For a bucket of ``n`` samples and batch size ``B``, ``n * E[g(max of a uniformly random
B-subset)]`` when ``n >= B`` and ``n * g(longest)`` when ``n < B`` (one short batch), with
``g(v) = v + attention_weight * v**2`` and ``v`` the longest rounded up to
``pad_to_multiple_of``.  With ``attention_weight = 0`` this is the expected padded tokens of
the bucket up to its last partial batch; :attr:`BucketPlan.padded_tokens` and
:attr:`BucketPlan.efficiency` are the exact expectation
(:func:`analysis.waste.expected_padding`), partial batches included.

The dynamic programme
---------------------
With distinct lengths ``v_1 < ... < v_m``, prefix counts ``c_0 = 0, c_1, ..., c_m`` and
``w_k = g(v_k)``, a bucket holding ``v_{i+1}..v_j`` has ``n = c_j - c_i`` samples and

    ``E[g(max)] = w_j - sum_{k=i+1}^{j-1} (w_{k+1} - w_k) P(max <= v_k)``,
    ``P(max <= v_k) = C(c_k - c_i, B) / C(n, B)``,

so ``cost(i, j) = n w_j - S(i, j) * n / C(n, B)`` with the running sum
``S(i, j) = S(i, j-1) + (w_j - w_{j-1}) C(c_{j-1} - c_i, B)``: for a fixed start ``i`` every end
``j`` costs O(1), and all O(m^2) bucket costs cost O(m^2) in total.  They are computed in
column blocks (all starts ``i`` by 8 to 1,024 consecutive ends ``j``, about 65,000 entries,
vectorised, the running sum carried from block to block; the widest blocks are processed in
chunks of about as many entries, with the same sums), and each block feeds the DP ``D[k][j] = min_i D[k-1][i] + cost(i, j)``
for every ``k <= n_buckets`` at once, so the m-by-m cost matrix is never stored (memory
O(m * block)) and one pass gives the optimum for every bucket count up to ``n_buckets``.
No monotone-argmin (Knuth, SMAWK) shortcut is assumed: the minimum is over every start.
``C(x, B)`` is used directly in float64 while ``C(N, B)`` stays below ~1e260 (``B`` up to ~40
for a million samples); beyond that the sums run in log space (``logaddexp``).

In token-budget mode (``max_tokens``) a bucket's batch size follows its upper edge, so ``B``
changes with ``j``; the running sums restart (O(j^2) work at end ``j``) at each change of
``B``, which makes that mode slower (about 3x on the case data, see the benchmark).

Long-context data (tens of thousands of distinct lengths: the exact DP is quadratic) can use
``candidates``: the DP runs on a grid of about ``q`` candidate edges (half sample quantiles,
half evenly spaced distinct lengths), then a second DP refines at full resolution, allowed
every distinct length within one grid step of each chosen edge; it repeats around the new
edges until they stop moving or all sit strictly inside the searched windows (at most 20
rounds).  Each round contains the previous answer, so refinement never makes it worse.  Bucket costs stay exact (every length is counted); only
the edge search is restricted, and :attr:`BucketPlan.exact` says which mode ran.
``candidates="auto"`` (the default) is exact up to :data:`AUTO_CANDIDATES_ABOVE` candidate
edges and uses a 1,024-grid above.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import gammaln

from analysis.lengths import LengthHistogram, _positive_int
from analysis.waste import (
    WasteEstimate,
    check_batch_rule,
    check_edges,
    expected_batch_max,
    expected_padding,
)

__all__ = ["BucketPlan", "METHODS", "optimize_edges", "evaluate_edges", "sweep_bucket_counts",
           "recommend_n_buckets", "AUTO_CANDIDATES_ABOVE"]

#: Every ``method`` :func:`optimize_edges` knows.
METHODS = ("optimal", "geometric", "equal_count", "equal_tokens", "greedy")
#: With ``candidates="auto"``, the exact DP runs up to this many candidate edges; above it,
#: a grid of ``_AUTO_GRID`` candidates plus local refinement.
AUTO_CANDIDATES_ABOVE = 20_000
_AUTO_GRID = 1024
_GREEDY_CANDIDATES = 290
# Entries per block of the cost matrix (float64: 8 bytes each; a few temporaries live at once).
_BLOCK_ENTRIES = 1 << 16
# Largest log C(N, B) (plus headroom for the sums) for which C(x, B) is used directly.
_LINEAR_LOG_LIMIT = 600.0
_TABLE_MAX = 1 << 22
_MIN_WIDTH = 8
_MAX_WIDTH = 1024
# Entries per chunk of a block's columns (the summation blocks above can be much larger
# when few rows exist; chunks keep the arrays in cache and do not change a bit).
_CHUNK_ENTRIES = 1 << 16
# Fix the short/too-small corner of a chunk column by column when it is this many rows wide.
_FIX_BY_COLUMN = 64


# ----------------------------------------------------------------------------------- results
@dataclass(frozen=True)
class BucketPlan:
    """Bucket edges with their batch rule and what they cost.

    ``edges`` are ``[e0, ..., eK]`` (bucket ``i`` holds ``e_i < L <= e_{i+1}``; ``e0 = 0``);
    ``efficiency`` and ``padded_tokens`` are the exact expectation of
    :func:`analysis.waste.expected_padding` for these edges; ``objective`` is the quantity the
    optimiser minimises (see the module docstring), evaluated for these edges.

    Examples
    --------
    >>> from analysis import LengthHistogram, optimize_edges
    >>> hist = LengthHistogram.from_counts([10, 11, 50, 52], [40, 40, 30, 30])
    >>> plan = optimize_edges(hist, 2, batch_size=4)
    >>> plan.edges, plan.batch_sizes
    ([0, 11, 52], [4, 4])
    >>> round(plan.efficiency, 4), plan.useful_tokens
    (0.9778, 3900)
    >>> plan.to_frame()[["lower edge", "upper edge", "samples", "efficiency"]]
            lower edge  upper edge  samples  efficiency
    bucket
    0                0          11       80    0.959586
    1               11          52       60    0.982894
    >>> plan.to_dict()["edges"]
    [0, 11, 52]
    """

    edges: list[int]
    n_buckets: int
    method: str
    batch_sizes: list[int]
    efficiency: float
    padded_tokens: float
    useful_tokens: int
    objective: float
    batch_size: int | None = None
    max_tokens: int | None = None
    pad_to_multiple_of: int = 1
    edge_multiple: int = 1
    min_bucket_samples: int = 1
    attention_weight: float = 0.0
    n_buckets_requested: int = 0
    exact: bool = True
    estimate: WasteEstimate | None = field(default=None, repr=False, compare=False)

    @property
    def waste_tokens(self) -> float:
        """Expected padding tokens (``padded_tokens - useful_tokens``)."""
        return self.padded_tokens - self.useful_tokens

    def to_frame(self) -> pd.DataFrame:
        """One row per bucket: edges, samples, tokens, batch size, batches, expected padded
        tokens and efficiency (from :func:`analysis.waste.expected_padding`)."""
        return self.estimate.to_frame()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (plain Python ints, floats, strings and lists)."""
        return {
            "method": self.method,
            "n_buckets": int(self.n_buckets),
            "n_buckets_requested": int(self.n_buckets_requested),
            "edges": [int(e) for e in self.edges],
            "batch_sizes": [int(b) for b in self.batch_sizes],
            "batch_size": None if self.batch_size is None else int(self.batch_size),
            "max_tokens": None if self.max_tokens is None else int(self.max_tokens),
            "pad_to_multiple_of": int(self.pad_to_multiple_of),
            "edge_multiple": int(self.edge_multiple),
            "min_bucket_samples": int(self.min_bucket_samples),
            "attention_weight": float(self.attention_weight),
            "efficiency": float(self.efficiency),
            "padded_tokens": float(self.padded_tokens),
            "useful_tokens": int(self.useful_tokens),
            "objective": float(self.objective),
            "exact": bool(self.exact),
        }

    # Framework configs: thin wrappers over analysis.exports (imported lazily).
    def to_lhotse(self) -> dict[str, Any]:
        """Lhotse ``DynamicBucketingSampler`` settings (:func:`analysis.exports.to_lhotse`)."""
        from analysis.exports import to_lhotse

        return to_lhotse(self)

    def to_nemo(self) -> dict[str, Any]:
        """NeMo bucketing settings (:func:`analysis.exports.to_nemo`)."""
        from analysis.exports import to_nemo

        return to_nemo(self)

    def to_tf_data(self) -> dict[str, Any]:
        """``tf.data`` ``bucket_by_sequence_length`` arguments (:func:`analysis.exports.to_tf_data`)."""
        from analysis.exports import to_tf_data

        return to_tf_data(self)

    def to_hf(self, **kwargs: Any) -> dict[str, Any]:
        """Hugging Face length-bucket settings (:func:`analysis.exports.to_hf`)."""
        from analysis.exports import to_hf

        return to_hf(self, **kwargs)

    def to_json(self, **kwargs: Any) -> str:
        """The plan as JSON text (:func:`analysis.exports.to_json`)."""
        from analysis.exports import to_json

        return to_json(self, **kwargs)

    def to_yaml(self) -> str:
        """The plan as YAML text (:func:`analysis.exports.to_yaml`)."""
        from analysis.exports import to_yaml

        return to_yaml(self)


# ----------------------------------------------------------------------------------- set-up
@dataclass(frozen=True)
class _Problem:
    """Arrays the optimiser works on (index ``t = 1..m`` is the t-th distinct length)."""

    lengths: np.ndarray  # (m,) int64
    cum: np.ndarray  # (m+1,) int64: samples with length <= v_t; cum[0] = 0
    weight: np.ndarray  # (m+1,) float: g(rounded v_t); weight[0] unused
    step: np.ndarray  # (m+1,) float: weight[t+1] - weight[t] for 1 <= t < m, else 0
    upper: np.ndarray  # (m+1,) int64: upper edge of a bucket ending at t
    size: np.ndarray  # (m+1,) int64: batch size of a bucket ending at t
    ends: np.ndarray  # allowed bucket ends (ascending, last = m)
    min_samples: int
    batch_size: int | None
    max_tokens: int | None
    pad: int
    edge_multiple: int
    attention_weight: float

    @property
    def m(self) -> int:
        return int(self.lengths.size)


def _check_weight(attention_weight: Any) -> float:
    if isinstance(attention_weight, bool) or not isinstance(attention_weight, int | float | np.number) \
            or not math.isfinite(attention_weight) or attention_weight < 0:
        raise ValueError(f"attention_weight must be a finite number >= 0, got {attention_weight!r}")
    return float(attention_weight)


def _round_up(values: np.ndarray, multiple: int) -> np.ndarray:
    return (values + (multiple - 1)) // multiple * multiple


def _problem(hist: LengthHistogram, *, batch_size: Any, max_tokens: Any, pad_to_multiple_of: Any,
             edge_multiple: Any, min_bucket_samples: Any, attention_weight: Any) -> _Problem:
    if not isinstance(hist, LengthHistogram):
        raise ValueError(f"hist must be a LengthHistogram, got {type(hist).__name__}")
    batch_size, max_tokens = check_batch_rule(batch_size, max_tokens)
    pad = _positive_int(pad_to_multiple_of, "pad_to_multiple_of")
    em = _positive_int(edge_multiple, "edge_multiple")
    min_samples = _positive_int(min_bucket_samples, "min_bucket_samples")
    a = _check_weight(attention_weight)
    if hist.min == 0:
        raise ValueError("zero-length samples cannot be bucketed (edges start at 0, below every length)")
    if hist.n_samples >= 2**53:
        raise ValueError("more than 2**53 samples: counts would not be exact in float64")
    lengths = hist.lengths
    m = lengths.size
    cum = np.zeros(m + 1, np.int64)
    np.cumsum(hist.counts, out=cum[1:])
    rounded = _round_up(lengths, pad).astype(float)
    weight = np.zeros(m + 1)
    weight[1:] = rounded + a * rounded * rounded
    step = np.zeros(m + 1)
    step[1:m] = np.diff(weight[1:])
    upper = np.zeros(m + 1, np.int64)
    upper[1:] = _round_up(lengths, em)
    if batch_size is not None:
        size = np.full(m + 1, batch_size, np.int64)
    else:
        size = np.maximum(1, max_tokens // np.maximum(upper, 1))
    # A bucket may end at t when its edge (upper[t]) separates v_t from v_{t+1}.
    ends = np.flatnonzero(np.r_[False, upper[1:m] < lengths[1:], True])
    return _Problem(lengths, cum, weight, step, upper, size, ends, min_samples, batch_size,
                    max_tokens, pad, em, a)


# ------------------------------------------------------------------------- binomial helpers
class _Binom:
    """``C(x, B)`` for one batch size ``B``: float64 values, or logs when they would overflow."""

    def __init__(self, size: int, n_max: int, headroom: float) -> None:
        self.size = size
        top = _log_comb(np.array([float(n_max)]), size)[0] if n_max >= size else 0.0
        self.log = bool(top + headroom > _LINEAR_LOG_LIMIT)
        self.table = None
        if n_max <= _TABLE_MAX:
            x = np.arange(n_max + 1)
            self.table = self._log_direct(x) if self.log else self._comb_direct(x)

    def _comb_direct(self, x: np.ndarray) -> np.ndarray:
        """``C(x, B)`` (exactly 0 for ``0 <= x < B``) by the product formula."""
        xf = x.astype(float)
        out = xf.copy()
        for t in range(1, self.size):
            out *= (xf - t) / (t + 1)
        return out

    def _log_direct(self, x: np.ndarray) -> np.ndarray:
        return _log_comb(x.astype(float), self.size)

    def lookup(self, x: np.ndarray, out: np.ndarray) -> np.ndarray:
        """``self(max(x, 0))`` written into ``out`` (``x`` may be clipped in place)."""
        if self.table is not None:  # x < 0 reads table[0] = C(0, B), as max(x, 0) would
            return self.table.take(x, mode="clip", out=out)
        np.maximum(x, 0, out=x)
        out[...] = self._log_direct(x) if self.log else self._comb_direct(x)
        return out

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """``C(x, B)`` (or ``log C(x, B)``, ``-inf`` below ``B``) for ``x >= 0``."""
        if self.table is not None:
            return self.table.take(x)
        return self._log_direct(x) if self.log else self._comb_direct(x)


def _log_comb(x: np.ndarray, size: int) -> np.ndarray:
    """``log C(x, size)`` for float ``x >= 0`` (``-inf`` where ``x < size``)."""
    out = np.full(x.shape, -np.inf)
    ok = x >= size
    xs = x[ok]
    if size <= 64:
        acc = np.zeros(xs.shape)
        for t in range(size):
            acc += np.log((xs - t) / (t + 1))
        out[ok] = acc
    else:
        out[ok] = gammaln(xs + 1) - gammaln(size + 1.0) - gammaln(xs - size + 1)
    return out


# ------------------------------------------------------------------------------ bucket costs
class _Buffers:
    """Flat float64/int64 scratch arrays reused from block to block (grown on demand)."""

    def __init__(self) -> None:
        self._store: dict[str, np.ndarray] = {}

    def get(self, name: str, shape: tuple[int, int], dtype: Any = float) -> np.ndarray:
        need = shape[0] * shape[1]
        buf = self._store.get(name)
        if buf is None or buf.size < need:
            # each buffer starts at its own offset within a page (no 4K aliasing between
            # arrays read and written together)
            off = 72 * (len(self._store) + 1)
            buf = np.empty(max(need, _BLOCK_ENTRIES) + off, dtype)[off:]
            self._store[name] = buf
        return buf[:need].reshape(shape)


def _cost_blocks(prob: _Problem, rows: np.ndarray, ends: np.ndarray
                 ) -> Iterator[tuple[np.ndarray, int, np.ndarray, np.ndarray]]:
    """Yield ``(cols, n_rows, cost, scratch)`` blocks in increasing ``cols``: ``cost[a, b]``
    is the objective of a bucket ``(rows[b], cols[a]]`` (``inf`` if ``rows[b] >= cols[a]`` or
    it holds fewer than ``min_samples``), for the first ``n_rows`` rows (the others start at
    or after every column of the block).  ``cost`` and ``scratch`` (an array of its shape
    the caller may overwrite) are reused: valid only until the next block is requested."""
    m = prob.m
    cum, step, weight, size = prob.cum, prob.step, prob.weight, prob.size
    is_end = np.zeros(m + 1, bool)
    is_end[ends] = True
    headroom = math.log(max(float(weight[-1]), 1.0)) + math.log(m + 1) + 2.0
    carry = np.zeros(rows.size)
    binom: _Binom | None = None
    row_cum = cum[rows]
    current: _Binom | None = None
    bufs = _Buffers()
    ja = 1
    while ja <= m:
        b = int(size[ja])
        width = _MAX_WIDTH
        for _ in range(2):  # about _BLOCK_ENTRIES entries: rows up to the block's end
            nr_hint = max(1, int(np.searchsorted(rows, ja + width, side="left")))
            width = int(min(max(_MIN_WIDTH, _BLOCK_ENTRIES // nr_hint), _MAX_WIDTH))
        jb = min(m + 1, ja + width)
        if prob.batch_size is None:  # token budget: the block ends where B changes
            change = np.flatnonzero(size[ja:jb] != b)
            if change.size:
                jb = ja + int(change[0])
        if current is None or current.size != b:
            # a new batch size (token budget): tables up to this run's largest count
            run = np.flatnonzero(size[ja:] != b)
            last = m if run.size == 0 else ja + int(run[0]) - 1
            binom = _Binom(b, int(cum[last]), headroom)
            carry = _restart_carry(prob, rows, ja, binom)
            current = binom
        nr = int(np.searchsorted(rows, jb - 1, side="left"))  # rows < jb - 1 can end in block
        if nr == 0:
            ja = jb
            continue
        carry_r = carry[:nr]
        if binom.log:
            shape = (jb - ja, nr)
            # x[a, b] = samples in (rows[b], k] for k = ja + a (clipped at 0 for k <= rows[b])
            x = np.subtract(cum[ja:jb, None], row_cum[None, :nr], out=bufs.get("x", shape, np.int64))
            comb = binom.lookup(x, bufs.get("comb", shape))  # log C(x, B)
            sel = np.flatnonzero(is_end[ja:jb])
            sums = bufs.get("sums", shape)
            with np.errstate(divide="ignore"):
                np.add(comb, np.log(step[ja:jb])[:, None], out=sums)
            np.logaddexp.accumulate(sums, axis=0, out=sums)
            # S(i, j) for the block's ends: the running sum up to j - 1, plus the carry
            s = sums[np.maximum(sel - 1, 0)]
            np.logaddexp(s, carry_r, out=s)
            s[sel == 0] = carry_r
            np.logaddexp(carry_r, sums[-1], out=carry_r)
            if sel.size:
                yield _finish_costs(prob, ja + sel, nr, x, comb, sel, s, row_cum, b, True,
                                    bufs.get("comb", s.shape))
            ja = jb
            continue
        # Linear sums.  The block's columns are processed in chunks of about _CHUNK_ENTRIES
        # entries; the running sums go on from chunk to chunk exactly as in one pass over
        # the block, row by row (numpy's cumsum is slow on axis 0, and a row stays in
        # cache): acc = sum_{ja <= k' <= k} step C(x, B) in the order of a cumsum, and
        # S(i, j) = acc(j - 1) + carry for each end j (so the chunks change no bit).
        acc = bufs.get("acc", (2, nr))
        acc, tmp = acc[0], acc[1]
        chunk = max(_MIN_WIDTH, _CHUNK_ENTRIES // nr)
        for ca in range(ja, jb, chunk):
            cb = min(jb, ca + chunk)
            shape = (cb - ca, nr)
            # x[a, b] = samples in (rows[b], k] for k = ca + a (k <= rows[b]: read as 0)
            x = np.subtract(cum[ca:cb, None], row_cum[None, :nr], out=bufs.get("x", shape, np.int64))
            comb = binom.lookup(x, bufs.get("comb", shape))  # C(x, B)
            sel = np.flatnonzero(is_end[ca:cb])
            # rows < cb - 1 can end in this chunk (the others cost inf in all of it)
            nc = nr if cb == jb else int(np.searchsorted(rows, cb - 1, side="left"))
            s = bufs.get("s", (sel.size, nc))
            take = is_end[ca:cb].tolist()
            out_row = 0
            for t in range(cb - ca):
                if take[t]:
                    if t or ca > ja:
                        np.add(acc[:nc], carry_r[:nc], out=s[out_row])
                    else:
                        s[out_row] = carry_r[:nc]
                    out_row += 1
                if t or ca > ja:
                    np.multiply(comb[t], step[ca + t], out=tmp)
                    np.add(acc, tmp, out=acc)
                else:
                    np.multiply(comb[0], step[ja], out=acc)
            if sel.size and nc:
                if nc < nr:
                    x, comb = x[:, :nc], comb[:, :nc]
                yield _finish_costs(prob, ca + sel, nc, x, comb, sel, s, row_cum, b, False,
                                    bufs.get("comb", s.shape))
        np.add(carry_r, acc, out=carry_r)
        ja = jb


def _finish_costs(prob: _Problem, cols: np.ndarray, nr: int, x: np.ndarray, comb: np.ndarray,
                  sel: np.ndarray, s: np.ndarray, row_cum: np.ndarray, b: int, log: bool,
                  scratch: np.ndarray) -> tuple[np.ndarray, int, np.ndarray, np.ndarray]:
    """``(cols, nr, cost, scratch)`` from the sums ``s`` (``S(i, j)`` for the columns
    ``sel`` of the chunk, overwritten by the costs) and ``C(x, B)`` in ``comb`` (whose memory
    ``scratch``, of the shape of ``s``, shares: free for the caller afterwards)."""
    cum, weight = prob.cum, prob.weight
    n, c = (x, comb) if sel.size == x.shape[0] else (x[sel], comb[sel])
    # cost = n * (w_j - S / C(n, B)); rows with n < B (a suffix) are fixed below
    w_cols = weight[cols][:, None]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if log:
            np.subtract(s, c, out=s)
            np.exp(s, out=s)
        else:
            np.divide(s, c, out=s)
        np.subtract(w_cols, s, out=s)
        np.multiply(s, n, out=s)
    cost = s
    short = np.searchsorted(row_cum[:nr], cum[cols] - b, side="right")
    tiny = np.searchsorted(row_cum[:nr], cum[cols] - prob.min_samples, side="right")
    p0 = int(min(short.min(), tiny.min()))
    if nr - p0 > _FIX_BY_COLUMN:  # a wide corner (the first blocks): column by column
        w_list = weight[cols].tolist()
        for a, (lo, hi) in enumerate(zip(short.tolist(), tiny.tolist())):
            if lo < hi:  # short but not too small: one batch of n at the longest
                np.multiply(n[a, lo:hi], w_list[a], out=cost[a, lo:hi])
            cost[a, hi:] = np.inf
    elif p0 < nr:  # the few rows (a suffix per column) that are short or too small
        sub = cost[:, p0:]
        rows_at = np.arange(p0, nr)[None, :]
        np.copyto(sub, n[:, p0:] * w_cols, where=rows_at >= short[:, None])
        np.copyto(sub, np.inf, where=rows_at >= tiny[:, None])
    return cols, nr, cost, scratch


def _restart_carry(prob: _Problem, rows: np.ndarray, ja: int, binom: _Binom) -> np.ndarray:
    """``S(i, ja) = sum_{k=i+1}^{ja-1} step_k C(c_k - c_i, B)`` for every row (linear or log)."""
    carry = np.full(rows.size, -np.inf) if binom.log else np.zeros(rows.size)
    nr = int(np.searchsorted(rows, ja - 1, side="left"))
    if nr == 0:
        return carry
    r = rows[:nr]
    cum, step = prob.cum, prob.step
    width = max(_MIN_WIDTH, _BLOCK_ENTRIES // nr)
    for ka in range(1, ja, width):
        kb = min(ja, ka + width)
        x = cum[ka:kb, None] - cum[None, r]
        np.maximum(x, 0, out=x)
        if binom.log:
            with np.errstate(divide="ignore"):
                terms = binom(x) + np.log(step[ka:kb])[:, None]
            carry[:nr] = np.logaddexp(carry[:nr], np.logaddexp.reduce(terms, axis=0))
        else:
            carry[:nr] += (binom(x) * step[ka:kb, None]).sum(axis=0)
    return carry


def _solve(prob: _Problem, n_buckets: int, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``D[k, j]``: least objective of ``k`` buckets covering lengths ``1..j`` with every
    bucket ending in ``ends``; ``A[k, j]``: the start of the last bucket (for backtracking)."""
    m = prob.m
    rows = np.r_[0, ends[:-1]].astype(np.int64)
    n_rows = rows.size
    best = np.full((n_buckets + 1, m + 1), np.inf)
    best[0, 0] = 0.0
    arg = np.zeros((n_buckets + 1, m + 1), np.int64)
    # D[k, rows[b]] by row position b (no gather per block), and per layer a span of
    # positions holding every finite value: only those rows can win (the others give inf,
    # and the first minimum of the span is the first of the full row).  Layer 0 is finite
    # at row 0 only; above, the span starts at the first finite value (positions fill in
    # increasing order) and runs to the end.
    prev_all = np.full((n_buckets, n_rows), np.inf)
    prev_all[0, 0] = 0.0
    lo_k = [0] + [n_rows] * (n_buckets - 1)
    hi_k = [1] + [n_rows] * (n_buckets - 1)
    for cols, nr, cost, buf in _cost_blocks(prob, rows, ends):
        r = rows[:nr]
        span = np.arange(cols.size)
        flat = buf.reshape(-1)
        pos = np.searchsorted(rows, cols)  # row position of each column (if it is a row)
        is_row = pos < n_rows
        is_row[is_row] = rows[pos[is_row]] == cols[is_row]
        pos_rows = pos[is_row]
        for k in range(1, n_buckets + 1):
            lo, hi = lo_k[k - 1], min(hi_k[k - 1], nr)
            if lo >= hi:
                break
            prev = prev_all[k - 1, lo:hi]
            if k == n_buckets:  # the top layer is only read at column m
                if cols[-1] == m:
                    vals = cost[-1, lo:hi] + prev
                    at = int(vals.argmin())
                    best[k, m], arg[k, m] = vals[at], r[lo + at]
                break
            # contiguous, or argmin would copy it
            sub = flat[:cols.size * (hi - lo)].reshape(cols.size, hi - lo)
            np.add(cost[:, lo:hi], prev[None, :], out=sub)
            at = sub.argmin(axis=1)
            vals = sub[span, at]
            best[k, cols] = vals
            arg[k, cols] = r[lo + at]
            if pos_rows.size:
                here = vals[is_row]
                prev_all[k, pos_rows] = here
                if lo_k[k] == n_rows:  # no finite value yet
                    fin = np.flatnonzero(here < np.inf)
                    if fin.size:
                        lo_k[k] = int(pos_rows[fin[0]])
    return best, arg


def _backtrack(arg: np.ndarray, k: int, m: int) -> list[int]:
    """Bucket ends (ascending, last = m) of the optimum with ``k`` buckets."""
    out, j = [], m
    for layer in range(k, 0, -1):
        out.append(j)
        j = int(arg[layer, j])
    return out[::-1]


def _cost_matrix(prob: _Problem, points: np.ndarray) -> np.ndarray:
    """Dense ``M[a, b]`` = objective of bucket ``(points[a], points[b]]`` (inf when a >= b)."""
    rows = points[:-1]
    ends = points[1:]
    pos = {int(p): i for i, p in enumerate(points)}
    out = np.full((points.size, points.size), np.inf)
    for cols, nr, cost, _ in _cost_blocks(prob, rows, ends):
        idx = [pos[int(c)] for c in cols]
        out[:nr, idx] = cost.T
    return out


# ------------------------------------------------------------------------------- the methods
def _ends_to_edges(prob: _Problem, ends: Sequence[int]) -> list[int]:
    return [0, *(int(prob.upper[j]) for j in ends)]


def _edges_to_ends(prob: _Problem, edges: Sequence[int]) -> list[int]:
    """Distinct-length index ending each bucket (``j`` with ``v_j <= edge < v_{j+1}``)."""
    idx = np.searchsorted(prob.lengths, np.asarray(edges[1:], dtype=np.int64), side="right")
    return [int(i) for i in idx]


def _finish_edges(prob: _Problem, interior: Iterable[int]) -> list[int]:
    """``[0, interior..., top]`` with interior edges rounded up to ``edge_multiple``, kept only
    strictly inside ``(0, top)`` and deduplicated (repeated edges collapse)."""
    top = int(prob.upper[-1])
    em = prob.edge_multiple
    vals = sorted({int(-(-int(e) // em) * em) for e in interior})
    return [0, *(e for e in vals if 0 < e < top), top]


def _geometric_edges(prob: _Problem, k: int) -> list[int]:
    lo, hi = float(prob.lengths[0]), float(prob.lengths[-1])
    return _finish_edges(prob, (math.floor(lo * (hi / lo) ** (t / k)) for t in range(1, k)))


def _equal_count_edges(prob: _Problem, k: int) -> list[int]:
    # np.percentile(sizes, q, method="lower") = sorted_sizes[floor((n - 1) * q / 100)]
    n = int(prob.cum[-1])
    q = np.linspace(0, 100, k + 1)[1:]
    index = np.floor((n - 1) * (q / 100)).astype(np.int64)
    picks = prob.lengths[np.searchsorted(prob.cum[1:], index, side="right")]
    return _finish_edges(prob, picks.tolist())


def _equal_tokens_edges(prob: _Problem, k: int) -> list[int]:
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


def _greedy_ends(prob: _Problem, k: int) -> list[int]:
    m = prob.m
    start = _edges_to_ends(prob, _geometric_edges(prob, k))
    start = [j for j in start if 0 < j < m]
    # snap to allowed ends (the first allowed end at or after j)
    allowed = prob.ends
    snap = lambda js: sorted({int(allowed[np.searchsorted(allowed, j)]) for j in js})  # noqa: E731
    start = [j for j in snap(start) if j < m]
    qs = np.linspace(0, 1, _GREEDY_CANDIDATES + 2)[1:-1]
    n = int(prob.cum[-1])
    targets = np.maximum(np.ceil(qs * n), 1)
    cand = np.searchsorted(prob.cum[1:], targets, side="left") + 1
    cand = [j for j in snap(cand.tolist()) if j < m]
    points = np.array(sorted({0, m, *start, *cand}), dtype=np.int64)
    mat = _cost_matrix(prob, points)
    pos = {int(p): i for i, p in enumerate(points)}
    cand_pos = np.array(sorted(pos[j] for j in cand), dtype=np.int64)
    cur = [0, *(pos[j] for j in start), points.size - 1]
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
    return [int(points[p]) for p in cur[1:]]


def _objective(prob: _Problem, edges: list[int], batch_sizes: list[int]) -> float:
    """The optimiser's objective for any ``edges`` (exact order statistics per bucket)."""
    lengths, cum, a = prob.lengths, prob.cum, prob.attention_weight
    bounds = np.searchsorted(lengths, np.asarray(edges[1:-1], dtype=np.int64), side="right")
    starts, stops = [0, *bounds.tolist()], [*bounds.tolist(), lengths.size]
    total = []
    for lo, hi, b in zip(starts, stops, batch_sizes):
        if lo == hi:
            continue
        n = int(cum[hi] - cum[lo])
        if n < b:
            total.append(n * float(prob.weight[hi]))
            continue
        vals, counts = lengths[lo:hi], np.diff(cum[lo:hi + 1])
        e1 = expected_batch_max(vals, counts, b, pad_to_multiple_of=prob.pad)
        e2 = expected_batch_max(vals, counts, b, pad_to_multiple_of=prob.pad, power=2) if a else 0.0
        total.append(n * (e1 + a * e2))
    return math.fsum(total)


def _plan(hist: LengthHistogram, prob: _Problem, edges: list[int], method: str, requested: int,
          exact: bool = True) -> BucketPlan:
    edges = check_edges(edges, hist)
    est = expected_padding(hist, edges, batch_size=prob.batch_size, max_tokens=prob.max_tokens,
                           pad_to_multiple_of=prob.pad)
    return BucketPlan(
        edges=edges, n_buckets=len(edges) - 1, method=method, batch_sizes=list(est.batch_sizes),
        efficiency=float(est.efficiency), padded_tokens=float(est.padded_tokens),
        useful_tokens=int(est.useful_tokens),
        objective=_objective(prob, edges, list(est.batch_sizes)),
        batch_size=prob.batch_size, max_tokens=prob.max_tokens, pad_to_multiple_of=prob.pad,
        edge_multiple=prob.edge_multiple, min_bucket_samples=prob.min_samples,
        attention_weight=prob.attention_weight, n_buckets_requested=requested, exact=exact,
        estimate=est,
    )


def _check_k(prob: _Problem, n_buckets: Any) -> int:
    if isinstance(n_buckets, bool) or not isinstance(n_buckets, int | np.integer):
        raise ValueError(f"n_buckets must be a positive integer, got {n_buckets!r}")
    k = int(n_buckets)
    if k < 1:
        raise ValueError(f"n_buckets must be at least 1, got {k}")
    if k > prob.ends.size:
        what = "distinct lengths" if prob.edge_multiple == 1 else \
            f"possible edges (multiples of edge_multiple = {prob.edge_multiple} between the lengths)"
        raise ValueError(f"n_buckets = {k} exceeds the {prob.ends.size} {what}")
    return k


def _grid(prob: _Problem, size: int) -> np.ndarray:
    """Candidate ends: sample quantiles and evenly spaced allowed ends (about ``size``)."""
    allowed = prob.ends
    n = int(prob.cum[-1])
    qs = np.linspace(0, 1, size // 2 + 2)[1:-1]
    by_count = np.searchsorted(prob.cum[1:], np.maximum(np.ceil(qs * n), 1), side="left") + 1
    by_count = allowed[np.minimum(np.searchsorted(allowed, by_count), allowed.size - 1)]
    even = allowed[np.linspace(0, allowed.size - 1, size // 2 + 1).round().astype(np.int64)]
    return np.unique(np.r_[by_count, even, prob.m])


def _refine(prob: _Problem, k: int, ends: list[int], grid: np.ndarray,
            max_rounds: int = 20) -> list[int]:
    """Local full-resolution search: re-run the DP with every allowed end strictly between
    the grid neighbours of each current edge, until the solution stops moving."""
    allowed = prob.ends
    gridpos = np.searchsorted(allowed, grid)
    for _ in range(max_rounds):
        keep = [prob.m]
        for j in ends[:-1]:
            p = int(np.searchsorted(allowed, j))
            g = int(np.searchsorted(gridpos, p))
            lo = int(gridpos[g - 1]) if g > 0 else 0
            hi = int(gridpos[g + 1]) if g + 1 < gridpos.size else allowed.size - 1
            half = max(p - lo, hi - p, 1)
            keep.extend(allowed[max(0, p - half):min(allowed.size, p + half + 1)].tolist())
        window = np.unique(np.array(keep, dtype=np.int64))
        best, arg = _solve(prob, k, window)
        new = _backtrack(arg, k, prob.m)
        if new == ends:
            break
        ends = new
        # Every edge strictly inside the searched windows: re-centring would search (almost)
        # the same set again, so stop.
        pos = np.searchsorted(allowed, np.array(ends[:-1], dtype=np.int64))
        inside = np.searchsorted(allowed, window)
        if np.isin(pos - 1, inside).all() and np.isin(pos + 1, inside).all():
            break
    return ends


def _use_grid(prob: _Problem, candidates: Any) -> int | None:
    """Grid size to use, or None for the exact DP."""
    if candidates is None:
        return None
    if isinstance(candidates, str):
        if candidates != "auto":
            raise ValueError(f"candidates must be None, 'auto' or a positive int, got {candidates!r}")
        return _AUTO_GRID if prob.ends.size > AUTO_CANDIDATES_ABOVE else None
    size = _positive_int(candidates, "candidates")
    return size if size < prob.ends.size else None


def _optimal_ends(prob: _Problem, ks: Sequence[int], grid_size: int | None
                  ) -> tuple[dict[int, list[int]], bool]:
    """Optimal bucket ends for each ``k`` in ``ks`` (one DP pass), and whether exact."""
    k_max = max(ks)
    if grid_size is None:
        best, arg = _solve(prob, k_max, prob.ends)
        out = {}
        for k in ks:
            if not np.isfinite(best[k, prob.m]):
                raise ValueError(f"no {k} buckets hold min_bucket_samples = {prob.min_samples} "
                                 "samples each")
            out[k] = _backtrack(arg, k, prob.m)
        return out, True
    grid = _grid(prob, grid_size)
    best, arg = _solve(prob, k_max, grid)
    out = {}
    for k in ks:
        if not np.isfinite(best[k, prob.m]):
            raise ValueError(f"no {k} buckets on the candidate grid hold min_bucket_samples = "
                             f"{prob.min_samples} samples each")
        out[k] = _refine(prob, k, _backtrack(arg, k, prob.m), grid)
    return out, False


def _baseline_edges(prob: _Problem, method: str, k: int) -> list[int]:
    if method == "geometric":
        return _geometric_edges(prob, k)
    if method == "equal_count":
        return _equal_count_edges(prob, k)
    if method == "equal_tokens":
        return _equal_tokens_edges(prob, k)
    if method == "greedy":
        return _ends_to_edges(prob, _greedy_ends(prob, k))
    raise ValueError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")


# ---------------------------------------------------------------------------- public functions
def optimize_edges(hist: LengthHistogram, n_buckets: int, *, batch_size: int | None = None,
                   max_tokens: int | None = None, method: str = "optimal",
                   pad_to_multiple_of: int = 1, edge_multiple: int = 1,
                   min_bucket_samples: int = 1, attention_weight: float = 0.0,
                   candidates: int | str | None = "auto") -> BucketPlan:
    """Bucket edges for ``hist`` under a batch rule: the exact optimum or a field baseline.

    Parameters
    ----------
    hist : LengthHistogram
        The data.
    n_buckets : int
        Number of buckets ``K`` (at least 1, at most the number of distinct lengths, or of
        possible edges with ``edge_multiple``).
    batch_size, max_tokens : int
        The batch rule: exactly one (with ``max_tokens`` a bucket takes
        ``max(1, max_tokens // upper_edge)`` samples).
    method : {"optimal", "geometric", "equal_count", "equal_tokens", "greedy"}
        See the module docstring.
    pad_to_multiple_of : int, default 1
        Each batch's longest is rounded up to a multiple of this.
    edge_multiple : int, default 1
        Edges are multiples of this (``"optimal"``: each observed length rounded up to a
        multiple is a candidate edge; baselines: their edges rounded up).  The last edge is
        the longest length rounded up.  ``"optimal"`` puts each edge at its bucket's longest
        length (rounded up), never higher: in token-budget mode a higher edge would only
        shrink that bucket's batch below what fits.
    min_bucket_samples : int, default 1
        ``"optimal"`` only: every bucket holds at least this many samples.
    attention_weight : float, default 0.0
        Per-sample cost of a batch is ``longest + attention_weight * longest**2`` in the
        objective (``"optimal"`` and ``"greedy"``); the reported padding ignores it.
    candidates : None, "auto" or int, default "auto"
        ``"optimal"`` only.  ``None``: exact DP over every candidate edge.  An int ``q``: DP on
        a grid of about ``q`` candidates, then full-resolution refinement around the chosen
        edges (see the module docstring); ``"auto"``: exact up to
        :data:`AUTO_CANDIDATES_ABOVE` candidate edges, a 1024-grid above.

    Returns
    -------
    BucketPlan

    Examples
    --------
    >>> from analysis import LengthHistogram
    >>> hist = LengthHistogram.from_counts([1, 2, 3, 9, 10], [5, 5, 5, 5, 5])
    >>> optimize_edges(hist, 2, batch_size=4).edges
    [0, 3, 10]
    >>> optimize_edges(hist, 2, batch_size=4, method="equal_count").edges
    [0, 3, 10]
    >>> optimize_edges(hist, 6, batch_size=4)
    Traceback (most recent call last):
    ...
    ValueError: n_buckets = 6 exceeds the 5 distinct lengths
    """
    prob = _problem(hist, batch_size=batch_size, max_tokens=max_tokens,
                    pad_to_multiple_of=pad_to_multiple_of, edge_multiple=edge_multiple,
                    min_bucket_samples=min_bucket_samples, attention_weight=attention_weight)
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    k = _check_k(prob, n_buckets)
    if method == "optimal":
        grid = _use_grid(prob, candidates)
        ends, exact = _optimal_ends(prob, [k], grid)
        return _plan(hist, prob, _ends_to_edges(prob, ends[k]), method, k, exact)
    return _plan(hist, prob, _baseline_edges(prob, method, k), method, k)


def evaluate_edges(hist: LengthHistogram, edges: Sequence[int], *, batch_size: int | None = None,
                   max_tokens: int | None = None, pad_to_multiple_of: int = 1,
                   attention_weight: float = 0.0, method: str = "given") -> BucketPlan:
    """A :class:`BucketPlan` for edges you already have (a published config, say).

    Examples
    --------
    >>> from analysis import LengthHistogram
    >>> hist = LengthHistogram.from_counts([1, 2, 3, 9, 10], [5, 5, 5, 5, 5])
    >>> plan = evaluate_edges(hist, [0, 5, 10], batch_size=4)
    >>> plan.method, plan.n_buckets, plan.useful_tokens
    ('given', 2, 125)
    """
    prob = _problem(hist, batch_size=batch_size, max_tokens=max_tokens,
                    pad_to_multiple_of=pad_to_multiple_of, edge_multiple=1, min_bucket_samples=1,
                    attention_weight=attention_weight)
    edges = check_edges(edges, hist)
    return _plan(hist, prob, edges, method, len(edges) - 1)


def sweep_bucket_counts(hist: LengthHistogram, ks: Iterable[int] = range(1, 17),
                        methods: Sequence[str] = METHODS, *, batch_size: int | None = None,
                        max_tokens: int | None = None, pad_to_multiple_of: int = 1,
                        edge_multiple: int = 1, min_bucket_samples: int = 1,
                        attention_weight: float = 0.0,
                        candidates: int | str | None = "auto") -> pd.DataFrame:
    """Efficiency against the number of buckets for each method (a tidy frame).

    The ``"optimal"`` rows for every ``K`` come from one DP pass.  Columns: ``n_buckets``
    (requested), ``method``, ``efficiency``, ``padded_tokens``, ``edges``, ``buckets`` (after
    repeated edges collapse), ``objective``.

    Examples
    --------
    >>> from analysis import LengthHistogram
    >>> hist = LengthHistogram.from_counts([1, 2, 3, 9, 10], [5, 5, 5, 5, 5])
    >>> sweep_bucket_counts(hist, [1, 2], ["optimal", "geometric"], batch_size=4)[
    ...     ["n_buckets", "method", "efficiency", "edges"]]
       n_buckets     method  efficiency       edges
    0          1    optimal    0.568539     [0, 10]
    1          1  geometric    0.568539     [0, 10]
    2          2    optimal    0.882657  [0, 3, 10]
    3          2  geometric    0.882657  [0, 3, 10]
    """
    prob = _problem(hist, batch_size=batch_size, max_tokens=max_tokens,
                    pad_to_multiple_of=pad_to_multiple_of, edge_multiple=edge_multiple,
                    min_bucket_samples=min_bucket_samples, attention_weight=attention_weight)
    ks = [_check_k(prob, k) for k in ks]
    if not ks:
        raise ValueError("ks is empty")
    methods = list(methods)
    for method in methods:
        if method not in METHODS:
            raise ValueError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    optimal, exact = ({}, True)
    if "optimal" in methods:
        optimal, exact = _optimal_ends(prob, sorted(set(ks)), _use_grid(prob, candidates))
    rows = []
    for k in ks:
        for method in methods:
            if method == "optimal":
                plan = _plan(hist, prob, _ends_to_edges(prob, optimal[k]), method, k, exact)
            else:
                plan = _plan(hist, prob, _baseline_edges(prob, method, k), method, k)
            rows.append({"n_buckets": k, "method": method, "efficiency": plan.efficiency,
                         "padded_tokens": plan.padded_tokens, "edges": plan.edges,
                         "buckets": plan.n_buckets, "objective": plan.objective})
    return pd.DataFrame(rows)


def recommend_n_buckets(sweep: pd.DataFrame, min_gain: float = 0.01, method: str = "optimal") -> int:
    """Smallest ``K`` after which one more bucket gains less than ``min_gain`` efficiency.

    ``sweep`` is a :func:`sweep_bucket_counts` frame; the largest ``K`` in it is returned
    when every step gains at least ``min_gain``.

    Examples
    --------
    >>> sweep = pd.DataFrame({"n_buckets": [1, 2, 3, 4], "method": ["optimal"] * 4,
    ...                       "efficiency": [0.50, 0.70, 0.705, 0.74]})
    >>> recommend_n_buckets(sweep, min_gain=0.01)
    2
    """
    if not (isinstance(min_gain, int | float) and math.isfinite(min_gain) and min_gain >= 0):
        raise ValueError(f"min_gain must be a finite number >= 0, got {min_gain!r}")
    rows = sweep[sweep["method"] == method].sort_values("n_buckets")
    if rows.empty:
        raise ValueError(f"the sweep has no rows for method {method!r}")
    ks = rows["n_buckets"].tolist()
    eff = rows["efficiency"].tolist()
    for i in range(len(ks) - 1):
        if eff[i + 1] - eff[i] < min_gain:
            return int(ks[i])
    return int(ks[-1])
