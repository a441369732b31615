"""The exact DP over distinct lengths, with bucket costs computed block by block.

With distinct lengths ``v_1 < ... < v_m``, prefix counts ``c_0 = 0, c_1, ..., c_m`` and
``w_k = g(v_k)`` (``g`` the per-sample weight: the padded length), a bucket holding
``v_{i+1}..v_j`` has ``n = c_j - c_i`` samples and, for batches of ``B``,

    ``E[g(max)] = w_j - sum_{k=i+1}^{j-1} (w_{k+1} - w_k) C(c_k - c_i, B) / C(n, B)``,

so ``cost(i, j) = n w_j - S(i, j) n / C(n, B)`` with the running sum
``S(i, j) = S(i, j-1) + (w_j - w_{j-1}) C(c_{j-1} - c_i, B)``: every end costs O(1) for a
fixed start, all O(m^2) bucket costs O(m^2) in total.  They are computed in column blocks
(all starts by a few hundred consecutive ends, the running sums carried from block to block)
that feed ``D[k][j] = min_i D[k-1][i] + cost(i, j)`` for every ``k`` at once, so the cost
matrix is never stored and one pass gives the optimum for every bucket count.  No
monotone-argmin shortcut is assumed.  ``C(x, B)`` is used in float64 while ``C(N, B)`` stays
below ~1e260, in log space (``logaddexp``) beyond.  A bucket with fewer samples than ``B`` is
one short batch: ``n w_j``.  With a token budget ``B`` follows the end ``j``, and the running
sums restart at each change of ``B``.  The time objective (``step_time``) has ``w`` in seconds
and adds ``per_batch * ceil(n / B)`` to each bucket's cost.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from analysis.optimize._problem import _Binom, _Problem

# Entries per block of the cost matrix (float64: 8 bytes each; a few temporaries live at once).
_BLOCK_ENTRIES = 1 << 16
_MIN_WIDTH = 8
_MAX_WIDTH = 1024
# Entries per chunk of a block's columns (chunks keep the arrays in cache; they change no bit).
_CHUNK_ENTRIES = 1 << 16
# Fix the short/too-small corner of a chunk column by column when it is this many rows wide.
_FIX_BY_COLUMN = 64


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


def _cost_blocks(
    prob: _Problem, rows: np.ndarray, ends: np.ndarray
) -> Iterator[tuple[np.ndarray, int, np.ndarray, np.ndarray]]:
    """Yield ``(cols, n_rows, cost, scratch)`` blocks in increasing ``cols``: ``cost[a, b]``
    is the objective of a bucket ``(rows[b], cols[a]]`` (``inf`` if ``rows[b] >= cols[a]`` or
    it is empty), for the first ``n_rows`` rows (the others start at
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
        if prob.rule.batch_size is None:  # token budget: the block ends where B changes
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
        assert binom is not None  # set at the first block (size changes start a new table)
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
                yield _finish_costs(
                    prob, ja + sel, nr, x, comb, sel, s, row_cum, b, True, bufs.get("comb", s.shape)
                )
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
                yield _finish_costs(
                    prob, ca + sel, nc, x, comb, sel, s, row_cum, b, False, bufs.get("comb", s.shape)
                )
        np.add(carry_r, acc, out=carry_r)
        ja = jb


def _finish_costs(
    prob: _Problem,
    cols: np.ndarray,
    nr: int,
    x: np.ndarray,
    comb: np.ndarray,
    sel: np.ndarray,
    s: np.ndarray,
    row_cum: np.ndarray,
    b: int,
    log: bool,
    scratch: np.ndarray,
) -> tuple[np.ndarray, int, np.ndarray, np.ndarray]:
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
    tiny = np.searchsorted(row_cum[:nr], cum[cols] - 1, side="right")
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
    if prob.per_batch:  # the time objective: per_step seconds for each of ceil(n / B) batches
        cost += prob.per_batch * -(-n // b)  # (inf entries stay inf)
    return cols, nr, cost, scratch


def _restart_carry(prob: _Problem, rows: np.ndarray, ja: int, binom: _Binom) -> np.ndarray:
    """``S(i, ja) = sum_{k=i+1}^{ja-1} step_k C(c_k - c_i, B)`` for every row (linear or log)."""
    carry = np.full(rows.size, -np.inf) if binom.log else np.zeros(rows.size)
    nr = int(np.searchsorted(rows, ja - 1, side="left"))
    if nr == 0 or binom.empty:
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
            sub = flat[: cols.size * (hi - lo)].reshape(cols.size, hi - lo)
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
