"""What a training step is, to the step-time model: its shape, its features, and the frame of
measured steps.

A step is a set of rows.  A *padded* row holds one sample padded to the batch's length ``L``
(its attention spans ``T(L)``, ``L`` rounded up to the kernel ``tile``); a *packed* row holds
several samples (segments) back to back, with attention restricted to each segment (a
variable-length or block-diagonal kernel: each segment of ``l`` tokens spans ``l``).  The
model prices a step by six features:

==============  ==========================================  ================================
term            feature                                     padded batch ``B x L``
==============  ==========================================  ================================
``per_step``    1                                           1
``per_sample``  samples in the step ``S``                   ``B``
``per_token``   tokens of the step's tensor ``N`` (real     ``B * T(L)``
                plus padding)
``attention``   sum over the step's spans of ``span**2``    ``B * T(L)**2``
``working_set`` ``N**2``                                    ``(B * T(L))**2``
``per_segment`` packed samples (position ids, cu_seqlens,   0
                a kernel launch each)
==============  ==========================================  ================================

so a padded batch's features are exactly those of the padded-only model, and the
``per_segment`` term is fitted only when packed steps were measured.

A measured shape is ``(batch_size, length)`` (``batch_size`` samples padded to ``length``) or
``(batch_size, length, segment_length)``: ``batch_size`` packed rows of ``length`` tokens,
each holding ``length // segment_length`` samples of ``segment_length`` tokens (``length`` a
multiple of it).  A step-time frame has columns ``batch_size, length, seconds`` and, when it
holds packed steps, ``segment_length`` (0 for a padded step).

The contract of :func:`~analysis.measure_step_times`: ``step(batch_size, length)`` for a
padded shape, ``step(batch_size, length, segment_length=l)`` for a packed one.  In PyTorch,
the packed step built as transformers' ``DataCollatorWithFlattening`` builds it (no padding:
the samples flattened into one row, ``position_ids`` restarting at 0 in each sample, the
label of each sample's first token ``-100``, and the ``cu_seqlens`` of its
``return_flash_attn_kwargs=True``, ``cu_seq_lens_q``)::

    def step(batch_size, length, segment_length=None):
        if segment_length is None:            # padded: batch_size x length
            ids = torch.randint(0, vocab, (batch_size, length))
            loss = model(input_ids=ids, labels=ids).loss
        else:                                 # packed: one row of every sample
            k = batch_size * (length // segment_length)
            ids = torch.randint(0, vocab, (1, k * segment_length))
            position_ids = torch.arange(segment_length).repeat(k)[None]
            cu_seqlens = torch.arange(0, k + 1, dtype=torch.int32) * segment_length
            labels = ids.clone()
            labels[0, cu_seqlens[:-1].long()] = -100   # no target across samples
            loss = model(input_ids=ids, position_ids=position_ids, labels=labels).loss
        loss.backward(); opt.step(); opt.zero_grad()
        torch.cuda.synchronize()

(``attn_implementation="flash_attention_2"`` reads the sample boundaries from
``position_ids``; a kernel of your own takes ``cu_seqlens`` and ``max_seqlen``;
``benchmarks/bench_step_time.py`` has a block-diagonal CPU version.)

Pure functions; nothing here reads a file.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pandas as pd

from analysis._validate import positive_int
from analysis.batching import round_up

__all__ = [
    "STEP_TIME_COLUMNS",
    "SEGMENT_COLUMN",
    "STEP_TIME_TERMS",
    "SEGMENT_TERMS",
    "check_shapes",
    "check_step_times",
    "padded_features",
    "packed_features",
]

#: Columns of a step-time frame (one row per timed step).
STEP_TIME_COLUMNS = ("batch_size", "length", "seconds")
#: The optional column of a frame holding packed steps (0: a padded step).
SEGMENT_COLUMN = "segment_length"
#: The terms of every step (padded or packed), in order: the feature each coefficient multiplies.
STEP_TIME_TERMS = {
    "per_step": "1",
    "per_sample": "B",
    "per_token": "B*T(L)",
    "attention": "B*T(L)**2",
    "working_set": "(B*T(L))**2",
}
#: The term of packed steps only.
SEGMENT_TERMS = {"per_segment": "packed samples"}
#: The largest batch size or length a frame may hold (exact in float64; far past any real one).
_LARGEST = 2**53


def check_shapes(shapes: object) -> list[tuple[int, int, int]]:
    """``shapes`` as ``(batch_size, length, segment_length)`` triples (0: padded), validated.

    Examples
    --------
    >>> check_shapes([(8, 128), (1, 4096, 512)])
    [(8, 128, 0), (1, 4096, 512)]
    >>> check_shapes([(1, 100, 30)])
    Traceback (most recent call last):
    ...
    ValueError: shapes[0]: length 100 is not a multiple of segment_length 30
    """
    if isinstance(shapes, str | bytes) or not isinstance(shapes, Sequence | np.ndarray):
        raise ValueError("shapes must be a sequence of (batch_size, length[, segment_length]) tuples")
    out = []
    for i, shape in enumerate(shapes):
        if (
            isinstance(shape, str | bytes)
            or not isinstance(shape, Sequence | np.ndarray)
            or len(shape) not in (2, 3)
        ):
            raise ValueError(f"shapes[{i}] = {shape!r} is not a (batch_size, length[, segment_length]) tuple")
        b = positive_int(shape[0], f"shapes[{i}] batch_size")
        n = positive_int(shape[1], f"shapes[{i}] length")
        seg = positive_int(shape[2], f"shapes[{i}] segment_length") if len(shape) == 3 else 0
        if seg and n % seg:
            raise ValueError(f"shapes[{i}]: length {n} is not a multiple of segment_length {seg}")
        out.append((b, n, seg))
    if not out:
        raise ValueError("shapes is empty")
    return out


def _plain(value: object) -> object:
    """A NumPy scalar as the Python value (for error messages)."""
    return value.item() if isinstance(value, np.generic) else value


def _first_bad(values: np.ndarray, low: int) -> int | None:
    bad = ~np.isfinite(values) | (values < low) | (values != np.round(values)) | (values > _LARGEST)
    return int(np.flatnonzero(bad)[0]) if bad.any() else None


def check_step_times(frame: pd.DataFrame, source: str | None = None) -> pd.DataFrame:
    """A validated copy of a step-time frame: columns ``batch_size``, ``length`` (positive
    integers up to 2**53), ``seconds`` (finite, > 0) and, when present, ``segment_length``
    (0 or blank: a padded step; else dividing ``length``); one-line errors naming ``source``
    and the row.

    Examples
    --------
    >>> check_step_times(pd.DataFrame({"batch_size": [8], "length": [128.0], "seconds": [0.5]}))
       batch_size  length  seconds
    0           8     128      0.5
    >>> check_step_times(pd.DataFrame({"batch_size": [8], "length": [128], "seconds": [0]}), "t.csv")
    Traceback (most recent call last):
    ...
    ValueError: t.csv: row 0: seconds = 0 must be a finite time > 0
    >>> check_step_times(pd.DataFrame({"batch_size": [8], "length": [1e300], "seconds": [1.0]}))
    Traceback (most recent call last):
    ...
    ValueError: row 0: length = 1e+300 is not a positive integer up to 2**53
    """
    where = f"{source}: " if source else ""
    if not isinstance(frame, pd.DataFrame):
        raise ValueError(f"{where}step times must be a DataFrame, got {type(frame).__name__}")
    missing = [c for c in STEP_TIME_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(
            f"{where}step times need columns {', '.join(STEP_TIME_COLUMNS)}; missing {', '.join(missing)}"
        )
    columns = list(STEP_TIME_COLUMNS) + ([SEGMENT_COLUMN] if SEGMENT_COLUMN in frame.columns else [])
    out = frame[columns].copy()
    if out.empty:
        raise ValueError(f"{where}no step times")
    for col in ("batch_size", "length"):
        values = pd.to_numeric(out[col], errors="coerce").to_numpy(dtype=float)
        i = _first_bad(values, 1)
        if i is not None:
            raise ValueError(
                f"{where}row {i}: {col} = {_plain(out[col].iloc[i])!r} is not a positive integer up to 2**53"
            )
        out[col] = values.astype(np.int64)
    seconds = pd.to_numeric(out["seconds"], errors="coerce").to_numpy(dtype=float)
    bad = ~np.isfinite(seconds) | (seconds <= 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"{where}row {i}: seconds = {_plain(out['seconds'].iloc[i])!r} must be a finite time > 0"
        )
    out["seconds"] = seconds
    if SEGMENT_COLUMN in out.columns:
        raw = out[SEGMENT_COLUMN]
        values = np.array(pd.to_numeric(raw, errors="coerce"), dtype=float)
        values[raw.isna().to_numpy()] = 0.0  # a blank cell: a padded step
        i = _first_bad(values, 0)
        if i is not None:
            raise ValueError(
                f"{where}row {i}: {SEGMENT_COLUMN} = {_plain(raw.iloc[i])!r} is not an integer >= 0"
            )
        seg = values.astype(np.int64)
        length = out["length"].to_numpy()
        bad = (seg > 0) & (length % np.maximum(seg, 1) != 0)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f"{where}row {i}: length {int(length[i])} is not a multiple of {SEGMENT_COLUMN} {int(seg[i])}"
            )
        out[SEGMENT_COLUMN] = seg
    return out.reset_index(drop=True)


def _tiled(length: npt.ArrayLike, tile: int) -> np.ndarray:
    """Padded lengths (float64) rounded up to the kernel ``tile``."""
    return np.asarray(round_up(np.asarray(length, dtype=float), tile))


def padded_features(
    batch_size: npt.ArrayLike, length: npt.ArrayLike, tile: int, segment_length: npt.ArrayLike = 0
) -> tuple[np.ndarray, np.ndarray]:
    """The features of measured shapes: ``(X, P)`` with ``X`` the five :data:`STEP_TIME_TERMS`
    columns (last axis) and ``P`` the packed samples (0 for a padded shape).  A packed shape's
    rows of ``T(length)`` tokens hold ``length // segment_length`` segments each, whose spans
    are their own lengths.

    Examples
    --------
    >>> x, p = padded_features([4, 1], [100, 100], 1, [0, 25])
    >>> x.tolist(), p.tolist()  # 4 x 100 padded; one row of 4 segments of 25
    ([[1.0, 4.0, 400.0, 40000.0, 160000.0], [1.0, 4.0, 100.0, 2500.0, 10000.0]], [0.0, 4.0])
    """
    b = np.asarray(batch_size, dtype=float)
    t = _tiled(length, tile)
    seg = np.asarray(segment_length, dtype=float)
    b, t, seg = np.broadcast_arrays(b, t, seg)
    x = np.stack([np.ones_like(b), b, b * t, b * t * t, (b * t) ** 2], axis=-1)
    packed = seg > 0
    if not packed.any():
        return x, np.zeros_like(b)
    k = np.where(packed, np.asarray(length, dtype=float) // np.where(packed, seg, 1.0), 1.0)
    samples = b * k
    x[..., 1] = np.where(packed, samples, x[..., 1])
    x[..., 3] = np.where(packed, samples * seg * seg, x[..., 3])
    return x, np.where(packed, samples, 0.0)


def packed_features(samples: npt.ArrayLike, tokens: npt.ArrayLike, square_sum: npt.ArrayLike) -> np.ndarray:
    """The five :data:`STEP_TIME_TERMS` features of packed steps of ``samples`` segments whose
    lengths' squares sum to ``square_sum``, in a tensor of ``tokens`` tokens (real plus
    padding, already rounded to the tile); the ``per_segment`` feature is ``samples``.

    Examples
    --------
    >>> packed_features([3], [1024], [300**2 + 200**2 + 100**2]).tolist()
    [[1.0, 3.0, 1024.0, 140000.0, 1048576.0]]
    """
    s = np.asarray(samples, dtype=float)
    n = np.asarray(tokens, dtype=float)
    a = np.asarray(square_sum, dtype=float)
    s, n, a = np.broadcast_arrays(s, n, a)
    return np.stack([np.ones_like(s), s, n, a, n * n], axis=-1)
