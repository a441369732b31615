"""Raw text and chats through the user's own tokenizer into exact lengths.

:func:`measure_lengths` reads a corpus (JSONL, Parquet, CSV/TSV, one sample per plain-text
file, a Hugging Face dataset saved with ``save_to_disk``, a ``datasets.Dataset`` or any
iterable of strings or records), counts each sample's tokens exactly as the trainer will see
them (the tokenizer's special tokens, or its chat template for conversations) and returns the
:class:`~analysis.lengths.LengthHistogram` the rest of the workbench takes.

How the work is split
---------------------
The input is planned into *pieces*: a byte range of a ``.jsonl`` file (cut at line ends), a
row group of a Parquet file, a whole ``.jsonl.gz``/CSV file or saved-dataset shard, a group
of plain-text files, or a batch of an in-memory iterable.  Each piece is tokenized with the
batch API of the Rust ``tokenizers`` library, in this process, in ``processes`` spawned
worker processes, or on the workers of a Dask cluster (``client=``), and pieces come back in
source order, so the per-sample lengths written to ``out`` are in source order and the
histogram is the same, count for count, however the work was spread.

Where errors point (one-line ``ValueError``, no partial result, ``out`` untouched):
``line N`` is the 1-based line of a JSONL file; ``row N`` is the 0-based row of a Parquet
file, a saved dataset, a CSV/TSV file (data rows, header excluded) or an in-memory source.

This package and :mod:`analysis.loaders` (whose path expander and column picker it uses, and
whose :func:`~analysis.loaders.load_lengths_distributed` it re-exports) are the only ones that
read data files.  It imports ``tokenizers``, ``transformers``, ``datasets`` and
``distributed`` only when a call needs them (the ``measure`` extra), and never a progress
bar: a face passes ``progress=``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from analysis.counting import LengthCounter
from analysis.lengths import LengthHistogram
from analysis.loaders import DaskClient, load_lengths_distributed
from analysis.measure._cache import CacheWarning, cache_key, cache_read, cache_write
from analysis.measure._out import (
    ShardFolder,
    check_not_input,
    check_out,
    check_overwrite,
    is_folder,
    open_out,
)
from analysis.measure._pieces import Job, MeasuredPiece
from analysis.measure._records import MAX_RECORD_BYTES
from analysis.measure._run import Progress, run_dask, run_local, worker_count
from analysis.measure._sources import plan_paths, plan_records
from analysis.measure._tokenizer import (
    TEMPLATE_SECONDS,
    Spec,
    TokenizerLike,
    path_digest,
    pickle_or_none,
    tokenizer_spec,
)

__all__ = [
    "DEFAULT_CACHE_DIR",
    "MAX_RECORD_BYTES",
    "TEMPLATE_SECONDS",
    "CacheWarning",
    "MeasuredPiece",
    "TokenizerLike",
    "load_lengths_distributed",
    "measure_lengths",
]

#: Where :func:`measure_lengths` keeps its results unless ``cache_dir=`` says otherwise.
DEFAULT_CACHE_DIR = Path("~/.cache/padding-workbench/lengths")


def measure_lengths(
    source: str | os.PathLike[str] | Iterable[Any],
    tokenizer: TokenizerLike,
    *,
    field: str | None = None,
    chat_field: str | None = None,
    add_special_tokens: bool = True,
    out: str | os.PathLike[str] | None = None,
    processes: int | None = None,
    client: DaskClient | None = None,
    cache: bool = True,
    cache_dir: str | os.PathLike[str] | None = None,
    progress: Progress | None = None,
    overwrite: bool = False,
) -> LengthHistogram:
    """Exact histogram of the token lengths of raw text or chats, as the trainer sees them.

    Parameters
    ----------
    source : str, os.PathLike, datasets.Dataset or iterable
        A ``.jsonl``/``.jsonl.gz``, ``.parquet`` or ``.csv``/``.tsv`` (``.gz``) file; any
        other file is plain text, one sample per file (source code, documents); a glob
        (``"shards/*.parquet"``, ``"src/**/*.py"``) or a directory (every file below it, hidden
        ones skipped) of such files, all of one format; a folder written by
        ``Dataset.save_to_disk``; a ``datasets.Dataset``; or an iterable of strings or of
        records (dicts).
    tokenizer : str, os.PathLike or tokenizer
        A ``tokenizer.json`` file or a local Hugging Face tokenizer folder (loaded with
        ``local_files_only=True``: nothing is downloaded), a ``tokenizers.Tokenizer``, a
        ``transformers`` tokenizer, an object with tiktoken's ``encode_ordinary_batch``, or a
        callable mapping a list of strings to their lengths.  Its truncation and padding
        settings are ignored: lengths are untruncated (clip with ``LengthHistogram.clip``).
    field : str, optional
        The record field or table column holding the text.  Not needed when records have a
        single field.
    chat_field : str, optional
        The field holding a conversation, a list of ``{"role", "content"}`` messages, counted
        with the tokenizer's chat template (``apply_chat_template(..., tokenize=True)``, whose
        special tokens come from the template, so ``add_special_tokens`` does not apply).
    add_special_tokens : bool, default True
        Count the special tokens (BOS, EOS...) the tokenizer adds to plain text.
    out : str or os.PathLike, optional
        Also write the per-sample lengths in source order: ``.npy`` (int32) or ``.parquet``
        (columns ``sample_id``, ``length``), written to a temporary file and renamed at the end.
        A folder (an existing one, a path ending in ``/``, or a name without a suffix) gets one
        ``{index:05d}.npy`` per shard with samples, in source order (with ``client=``, written
        by the worker that measured it, so no lengths travel back), and ``index.json`` listing
        each file's ``first_sample`` and ``n_samples``; ``load_lengths("out/*.npy")`` gives the
        same histogram.  The folder must be empty or hold an earlier run, which it replaces.
    processes : int, optional
        Worker processes (spawned) on this machine; default ``os.cpu_count()``, and this
        process alone for a small input (one piece or under 8 MiB).  ``1``: this process.
        Never more than the pieces of the input, the usable cores, or one per GiB of
        available memory.  They end with this process (an error, Ctrl-C, its death).
    client : distributed.Client, optional
        Tokenize the pieces on a Dask cluster's workers (which must see the same paths) and
        merge their histograms exactly; ``processes`` is then unused.
    cache : bool, default True
        Reuse the stored result of an identical call without tokenizing: same shard contents,
        sizes and modification times, same format (a ``.jsonl`` renamed ``.txt`` is another
        call, a ``.csv`` renamed ``.tsv`` too), same options, same tokenizer (its
        serialisation, chat template and library versions; for a callable, the code it runs
        as loaded: its own and that of every project function or module it reaches, so an
        edited helper is another call).  In-memory sources and tokenizers that cannot be
        pickled are never cached.  A stored entry that cannot be read back whole is discarded
        and measured again.
    cache_dir : str or os.PathLike, optional
        Where results are stored; default :data:`DEFAULT_CACHE_DIR`.  Where it cannot take
        a result, a one-line :class:`CacheWarning` says so and the result is returned.
    progress : callable, optional
        Wraps the iterable of :class:`MeasuredPiece` (each with ``where``, ``n_samples`` and
        ``n_tokens``) and yields them unchanged, e.g. a tqdm bar.  The engine draws nothing.
    overwrite : bool, default False
        Replace an existing ``out`` file that holds something else than lengths as ``out=``
        writes them (a 1-D int32 ``.npy``, a Parquet file of ``sample_id`` and ``length``);
        without it such a file is refused (an earlier run's output is replaced).

    Returns
    -------
    LengthHistogram
        Zero-length samples (an empty text without special tokens) are kept.

    Raises
    ------
    ValueError
        One line naming the file, the line or row, and the problem: no such file, mixed
        formats, a missing field or column, a value that is not a string (or not a list of
        role/content messages), invalid JSON (a line that is not one JSON value, JSON nested
        too deeply), a CSV/TSV row whose field count differs from the header's, text that is
        not UTF-8 or holds a lone surrogate, a corrupt ``.gz``, a record over
        :data:`MAX_RECORD_BYTES`, a chat template that runs past :data:`TEMPLATE_SECONDS` on
        one conversation (in this process and worker processes), a tokenizer path that does
        not exist or a folder whose config names its own code (never run), no chat template
        for ``chat_field``, an ``out`` that is (or, a folder, holds) an input file.  Nothing
        is returned or written then.

    Examples
    --------
    >>> from analysis.measure import measure_lengths
    >>> def words(texts):  # any callable from texts to lengths is a tokenizer
    ...     return [len(t.split()) for t in texts]
    >>> hist = measure_lengths(["a b c", "d e", "f g h"], words, cache=False)
    >>> hist.lengths.tolist(), hist.counts.tolist()
    ([2, 3], [1, 2])
    >>> measure_lengths([{"text": "a"}, {"txt": "b"}], words, field="text")
    Traceback (most recent call last):
    ...
    ValueError: row 1: no field 'text'; fields: txt
    """
    if field is not None and chat_field is not None:
        raise ValueError("pass field= (text) or chat_field= (messages), not both")
    if processes is not None and (not isinstance(processes, int) or processes < 1):
        raise ValueError(f"processes must be a positive integer, got {processes!r}")
    chat = chat_field is not None
    name = chat_field if chat else field
    # a tokenizer given as a path is keyed by its files, so a cache hit never loads it (nor
    # imports transformers); loaded below only on a miss
    if isinstance(tokenizer, str | os.PathLike) and cache:
        spec = Spec("path", tokenizer, add_special_tokens, path_digest(tokenizer))
    else:
        spec = tokenizer_spec(tokenizer, add_special_tokens=add_special_tokens, chat=chat)
    out_path = None if out is None else Path(os.path.expanduser(os.fspath(out)))
    folder = out is not None and is_folder(out)
    if isinstance(source, str | os.PathLike):
        plan, name = plan_paths(source, name, chat, hashing=cache)
    else:
        plan = plan_records(source, name)
    if out_path is not None:
        check_not_input(out_path, folder, plan.files)
        check_out(out_path, folder)
        check_overwrite(out_path, folder, overwrite)
    job = Job(spec, name, chat, want_lengths=out_path is not None)

    key = cache_key(plan, job) if cache else None
    store = Path(os.path.expanduser(os.fspath(cache_dir or DEFAULT_CACHE_DIR)))
    if key is not None:
        hit = cache_read(store, key, out_path, folder)
        if hit is not None:
            return hit

    if spec.kind == "path":  # a miss: the tokenizer itself, under the key of its files
        loaded = tokenizer_spec(tokenizer, add_special_tokens=add_special_tokens, chat=chat)
        job = Job(replace(loaded, digest=spec.digest), name, chat, want_lengths=out_path is not None)
    n = (os.cpu_count() or 1) if processes is None else processes
    if plan.small and processes is None:
        n = 1
    if client is None and n > 1 and pickle_or_none(job) is None:
        if processes is not None:
            raise ValueError(
                "tokenizer: cannot be sent to worker processes (it cannot be "
                "pickled, e.g. a lambda); pass processes=1 or a module-level "
                "function"
            )
        n = 1
    n = worker_count(n, len(plan.pieces) if isinstance(plan.pieces, list) else None)
    writer = open_out(out_path, folder) if out_path is not None else None
    if client is not None:  # with an out folder, each worker saves the lengths it measured
        shard_path = writer.path if isinstance(writer, ShardFolder) else None
        pieces = run_dask(plan, job, client, shard_path)
    else:
        pieces = run_local(plan, job, n)
    counter = LengthCounter()
    try:
        stream = progress(pieces) if progress is not None else pieces
        for piece in stream:
            counter.add_counts(*piece._hist, where=piece.where or plan.where)
            if writer is not None:
                writer.add(piece)
        hist = counter.histogram(plan.where)
        if writer is not None:
            writer.commit()
            writer = None
    finally:
        close = getattr(pieces, "close", None)
        if close is not None:
            close()  # first: pending pieces cancelled before an out folder is removed
        if writer is not None:
            writer.abort()
    if key is not None:
        cache_write(store, key, hist, out_path, folder)
    return hist
