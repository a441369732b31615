"""The content-hash cache: a second identical call returns the stored result untokenized.

The key holds each shard's size, modification time and content hash, the tokenizer's own
serialisation and the options; the entry holds the histogram and, once ``out`` was asked, the
per-sample lengths, replayed into the next ``out`` (with, for an ``out`` folder, the shards'
listing, so the folder written again is the same file for file).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from analysis.lengths import LengthHistogram
from analysis.measure._out import INDEX, OutWriter, ShardFolder, open_out, temp_file
from analysis.measure._pieces import Job
from analysis.measure._sources import SourcePlan, source_format
from analysis.measure._tokenizer import sha

_CACHE_VERSION = "measure-2"


class CacheWarning(UserWarning):
    """The cache folder could not store a result (the result itself is fine)."""


def cache_key(plan: SourcePlan, job: Job) -> str | None:
    if plan.shards is None or job.spec.digest is None:
        return None
    options = {
        "version": _CACHE_VERSION,
        "name": job.name,
        "chat": job.chat,
        "add_special_tokens": job.spec.add_special_tokens,
        "tokenizer": job.spec.digest,
        "shards": [
            (source_format(plan.kind, path), size, mtime, digest) for path, size, mtime, digest in plan.shards
        ],
    }
    return sha(json.dumps(options, sort_keys=True))


def _atomic_save(path: Path, save: Callable[[io.BufferedWriter], None]) -> None:
    fd, tmp = temp_file(path)
    try:
        with os.fdopen(fd, "wb") as handle:
            save(handle)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _entry_files(cache_dir: Path, key: str) -> tuple[Path, Path, Path]:
    return cache_dir / f"{key}.npz", cache_dir / f"{key}.lengths.npy", cache_dir / f"{key}.shards.json"


def cache_read(cache_dir: Path, key: str, out: Path | None, folder: bool = False) -> LengthHistogram | None:
    """The stored result, replayed into ``out``; ``None`` on a miss.  An entry that cannot be
    read back whole (truncated, corrupt, inconsistent) is discarded: a miss, measured again."""
    hist_path, samples_path, shards_path = _entry_files(cache_dir, key)
    try:
        if (
            not hist_path.is_file()
            or (out is not None and not samples_path.is_file())
            or (folder and not shards_path.is_file())
        ):
            return None
    except OSError:  # an unreadable cache folder: a miss
        return None
    writer = None
    try:
        with open(hist_path, "rb") as handle, np.load(handle) as stored:  # closed even if corrupt
            hist = LengthHistogram(stored["lengths"], stored["counts"])
        if out is not None:
            samples = np.load(samples_path, mmap_mode="r")
            if samples.ndim != 1 or samples.dtype != np.int32 or samples.shape[0] != hist.n_samples:
                raise ValueError("the stored lengths do not match the stored histogram")
            entries = json.loads(shards_path.read_text(encoding="utf-8")) if folder else None
            if entries is not None and sum(int(e["n_samples"]) for e in entries) != hist.n_samples:
                raise ValueError("the stored listing does not match the stored histogram")
            writer = open_out(out, folder)
            if isinstance(writer, ShardFolder):
                assert entries is not None
                writer.replay(entries, samples)
            else:
                for start in range(0, samples.shape[0], 1 << 22):
                    writer.write(np.asarray(samples[start : start + (1 << 22)]))
            writer.commit()
            writer = None
    except (OSError, EOFError, ValueError, KeyError, TypeError, zipfile.BadZipFile):
        for path in (hist_path, samples_path, shards_path):
            with contextlib.suppress(OSError):
                path.unlink(missing_ok=True)
        return None
    finally:
        if writer is not None:
            writer.abort()
    return hist


def cache_write(
    cache_dir: Path, key: str, hist: LengthHistogram, out: Path | None, folder: bool = False
) -> None:
    """Store the result; where the cache folder cannot take it, warn in one line and go on."""
    try:
        _store(cache_dir, key, hist, out, folder)
    except OSError as err:
        reason = " ".join((err.strerror or str(err)).split())
        warnings.warn(
            f"{cache_dir}: cannot store the result in the cache ({reason}); it is not cached",
            CacheWarning,
            stacklevel=3,
        )


def _store(cache_dir: Path, key: str, hist: LengthHistogram, out: Path | None, folder: bool) -> None:
    cache_dir.mkdir(parents=True, exist_ok=True)
    if out is not None and folder:  # the shards' lengths as one array, and where each starts
        files = json.loads((out / INDEX).read_text(encoding="utf-8"))["files"]
        writer = OutWriter(cache_dir / f"{key}.lengths.npy")
        try:
            for entry in files:
                writer.write(np.load(out / entry["file"]))
            writer.commit()
        except BaseException:
            writer.abort()
            raise
        listing = json.dumps(files).encode()

        def save_listing(handle: io.BufferedWriter) -> None:
            handle.write(listing)

        _atomic_save(cache_dir / f"{key}.shards.json", save_listing)
    elif out is not None:
        if out.name.lower().endswith(".npy"):

            def copy(handle: io.BufferedWriter) -> None:
                with open(out, "rb") as source:
                    shutil.copyfileobj(source, handle, 1 << 22)

            _atomic_save(cache_dir / f"{key}.lengths.npy", copy)
        else:
            import pyarrow.parquet as pq

            column = pq.read_table(out, columns=["length"]).column(0).to_numpy()
            _atomic_save(cache_dir / f"{key}.lengths.npy", lambda h: np.save(h, column))
    _atomic_save(cache_dir / f"{key}.npz", lambda h: np.savez(h, lengths=hist.lengths, counts=hist.counts))
