"""Measuring the pieces: in this process, in spawned worker processes, or on Dask workers.

Whatever runs them, results come back in source order (at most a window of pieces in flight),
each as a :class:`MeasuredPiece` holding its histogram and, when ``out`` asks, its per-sample
lengths, so the merged histogram is the same count for count however the work was spread.
"""

from __future__ import annotations

import ctypes
import dataclasses
import multiprocessing
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Protocol, TypeVar

import numpy as np

from analysis.loaders import DaskClient
from analysis.measure._out import save_shard
from analysis.measure._pieces import Job, MeasuredPiece, Piece
from analysis.measure._sources import SourcePlan
from analysis.measure._tokenizer import Encoder

_INT32_MAX = np.iinfo(np.int32).max
_T = TypeVar("_T")


class Progress(Protocol):
    def __call__(self, pieces: Iterable[MeasuredPiece], /) -> Iterable[MeasuredPiece]: ...


def _measure_piece(piece: Piece, job: Job, encoder: Encoder) -> MeasuredPiece:
    """Tokenize one piece: its per-sample lengths (if asked) and its histogram."""
    parts = []
    label = piece.label()
    for values in piece.batches(job):
        if not values:
            continue
        try:
            parts.append(encoder.chats(values) if job.chat else encoder.texts(values))
        except ValueError as err:
            raise ValueError(f"{label}: {err}" if label else str(err)) from None
        except Exception as err:  # noqa: BLE001 - a tokenizer's or template's own failure: one line
            message = " ".join(str(err).split())[:300]
            raise ValueError(
                f"{label or 'the input'}: the tokenizer failed: {type(err).__name__}: {message}"
            ) from None
    lengths = np.concatenate(parts) if parts else np.empty(0, np.int64)
    if lengths.size:
        distinct, counts = np.unique(lengths, return_counts=True)
    else:
        distinct, counts = lengths, lengths
    per_sample = None
    if job.want_lengths:
        if lengths.size and int(distinct[-1]) > _INT32_MAX:
            raise ValueError(
                f"{piece.label()}: a sample of {int(distinct[-1])} tokens does not "
                "fit the int32 lengths of out="
            )
        per_sample = lengths.astype(np.int32)
    return MeasuredPiece(
        piece.label(),
        int(lengths.size),
        int(lengths.sum()),
        per_sample,
        (distinct.astype(np.int64), counts.astype(np.int64)),
    )


# Worker processes (spawned): the job and its encoder, built once per process.
_WORKER: tuple[Job, Encoder] | None = None
# Dask workers: encoders by tokenizer digest, built once per worker process.
_DASK_ENCODERS: dict[str, Encoder] = {}


def _init_worker(job: Job, parent: int) -> None:
    global _WORKER
    _die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's: it stops the workers
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # the processes are the parallelism
    _WORKER = (job, Encoder(job.spec))


def _die_with_parent(parent: int) -> None:
    """Have the kernel end this worker when its parent dies, even of SIGKILL (Linux); a watch
    thread elsewhere."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):

        def watch() -> None:
            while os.getppid() == parent:
                time.sleep(1)
            os._exit(1)

        threading.Thread(target=watch, daemon=True).start()
    if os.getppid() != parent:  # the parent died before the line above
        os._exit(1)


def _worker_measure(piece: Piece) -> MeasuredPiece:
    assert _WORKER is not None
    return _measure_piece(piece, *_WORKER)


def _dask_measure(piece: Piece, job: Job, shard_path: str | None = None) -> MeasuredPiece:
    """Measure ``piece`` on a Dask worker; with ``shard_path``, save its lengths there (an
    ``out`` folder) instead of sending them back."""
    key = job.spec.digest or str(id(job.spec))
    encoder = _DASK_ENCODERS.get(key)
    if encoder is None:
        encoder = _DASK_ENCODERS[key] = Encoder(job.spec)
    measured = _measure_piece(piece, job, encoder)
    if shard_path is None or measured._lengths is None:
        return measured
    if measured.n_samples:
        save_shard(shard_path, measured._lengths)
    return dataclasses.replace(measured, _lengths=None)


# ---------------------------------------------------------------------------- running
#: The memory one worker process may need: the tokenizer and its batch, or one record of
#: MAX_RECORD_BYTES through the tokenizer (about 70 times its size).
_WORKER_BYTES = 1 << 30


def worker_count(requested: int, n_pieces: int | None) -> int:
    """``requested`` worker processes, at most one per piece, per usable core and per
    :data:`_WORKER_BYTES` of available memory."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    try:
        memory = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // _WORKER_BYTES
    except (ValueError, OSError, AttributeError):
        memory = cores
    limits = [requested, cores, max(1, memory)]
    if n_pieces is not None:
        limits.append(max(1, n_pieces))
    return min(limits)


def _ordered(submit: Callable[[_T], Any], items: Iterable[_T], window: int) -> Iterator[MeasuredPiece]:
    """Results of ``submit(item)`` futures in submission order, at most ``window`` in flight."""
    pending: deque[Any] = deque()
    try:
        for item in items:
            pending.append(submit(item))
            if len(pending) >= window:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for future in pending:
            future.cancel()


def run_local(plan: SourcePlan, job: Job, processes: int) -> Iterator[MeasuredPiece]:
    if processes <= 1:
        encoder = Encoder(job.spec)
        for piece in plan.pieces:
            yield _measure_piece(piece, job, encoder)
        return
    context = multiprocessing.get_context("spawn")  # no fork of a threaded Rust tokenizer
    pool = ProcessPoolExecutor(
        max_workers=processes, mp_context=context, initializer=_init_worker, initargs=(job, os.getpid())
    )
    try:
        yield from _ordered(
            lambda piece: pool.submit(_worker_measure, piece), plan.pieces, window=2 * processes
        )
    except BaseException:  # an error, an interrupt, SIGTERM, the caller stopping: no work left behind
        _stop_workers(pool)
        raise
    else:
        pool.shutdown(wait=True)


def _stop_workers(pool: ProcessPoolExecutor) -> None:
    """End ``pool``'s workers now, without waiting for the pieces they are measuring."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.terminate()
    for process in processes:
        process.join(timeout=5)
        if process.is_alive():
            process.kill()


def run_dask(
    plan: SourcePlan, job: Job, client: DaskClient, shard_path: Callable[[int], str] | None = None
) -> Iterator[MeasuredPiece]:
    """Pieces measured on ``client``'s workers; with ``shard_path`` (an ``out`` folder), each
    worker saves piece ``i``'s lengths at ``shard_path(i)`` and sends back only its histogram."""
    [job_future] = client.scatter([job], broadcast=True, hash=False)
    n_threads = sum(client.nthreads().values()) or 1

    def submit(item: tuple[int, Piece]) -> Any:
        index, piece = item
        path = None if shard_path is None else shard_path(index)
        return client.submit(_dask_measure, piece, job_future, path, pure=False)

    try:
        yield from _ordered(submit, enumerate(plan.pieces), window=max(16, 4 * n_threads))
    finally:
        job_future.release()
