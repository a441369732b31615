"""Planning a source into pieces, in source order, and the facts the cache keys on.

A path (file, glob, directory of shards, as :func:`analysis.loaders.expand_paths` expands it;
or a ``save_to_disk`` folder) is planned eagerly: each file is checked (format, column, type),
hashed and cut into pieces.  An in-memory source (a
``datasets.Dataset`` or any iterable) is planned lazily, a batch of records at a time.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import itertools
import json
import os
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis.loaders import expand_paths, pick_column
from analysis.measure._pieces import (
    ArrowFile,
    CsvFile,
    JsonlRange,
    ParquetGroup,
    Piece,
    RecordsPiece,
    TextFiles,
    csv_sep,
    open_csv,
)
from analysis.measure._tokenizer import is_instance

#: Records of an in-memory source sent to a worker at a time.
_RECORDS_PER_PIECE = 8192
#: A ``.jsonl`` file is cut into byte ranges of about this size (at line ends).
_SPLIT_BYTES = 16 << 20
#: Plain-text files (one sample each) grouped into one piece up to this many bytes or files.
_TEXT_PIECE_BYTES = 8 << 20
_TEXT_PIECE_FILES = 512
#: Below this many input bytes, the default (``processes=None``) works in this process.
_SMALL_INPUT_BYTES = 8 << 20
_HASH_BLOCK = 1 << 20
#: Data formats by extension; any other file is plain text, one sample per file.
_JSONL, _PARQUET, _CSV = (".jsonl", ".jsonl.gz"), (".parquet",), (".csv", ".csv.gz", ".tsv", ".tsv.gz")


@dataclass
class SourcePlan:
    pieces: Iterable[Piece]
    where: str  # names the whole source in messages
    n_bytes: int | None  # None: an in-memory source of unknown size
    shards: list[tuple[str, int, int, str]] | None  # (path, size, mtime_ns, hash); None: no cache
    small: bool  # a single piece, or a few bytes: not worth worker processes
    files: tuple[str, ...] = ()  # the input files of a path source (never written over)
    kind: str = ""  # their format: "jsonl", "parquet", "csv", "text" or "arrow" (a saved dataset)


def _scan(path: Path, split_bytes: int | None, hashing: bool) -> tuple[str, list[tuple[int, int]]]:
    """One pass over a file: its content hash, and (for ``split_bytes``) the ``(offset,
    first line)`` of each range, cut just after a newline every ``split_bytes`` or so."""
    h = hashlib.blake2b(digest_size=20)
    starts = [(0, 1)]
    if not hashing and not split_bytes:
        return "", starts
    size = path.stat().st_size
    offset = lines = 0
    target = split_bytes or size + 1
    with open(path, "rb") as handle:
        while block := handle.read(_HASH_BLOCK):
            if hashing:
                h.update(block)
            end = offset + len(block)
            while target < end:
                i = block.find(b"\n", target - offset)
                if i < 0:
                    break
                cut = offset + i + 1
                if cut < size:
                    starts.append((cut, lines + block.count(b"\n", 0, i + 1) + 1))
                target = cut + (split_bytes or size + 1)
            lines += block.count(b"\n")
            offset = end
    return h.hexdigest(), starts


def _kind(path: Path) -> str:
    name = path.name.lower()
    for kind, extensions in (("jsonl", _JSONL), ("parquet", _PARQUET), ("csv", _CSV)):
        if name.endswith(extensions):
            return kind
    return "text"


def source_format(kind: str, path: str) -> str:
    """How a file of a plan of ``kind`` is parsed, for the cache key: format, compression,
    separator."""
    sep = {"csv": f" sep={csv_sep(path)!r}"}.get(kind, "")
    return f"{kind}{' gz' if path.lower().endswith('.gz') else ''}{sep}"


def _is_saved_dataset(path: Path) -> bool:
    return path.is_dir() and (path / "state.json").is_file() and (path / "dataset_info.json").is_file()


def plan_paths(
    source: str | os.PathLike[str], name: str | None, chat: bool, hashing: bool
) -> tuple[SourcePlan, str | None]:
    """Plan a path source; also return the field name resolved from a table's schema."""
    root = Path(os.path.expanduser(os.fspath(source)))
    if root.is_dir() and (root / "dataset_dict.json").is_file():
        splits = json.loads((root / "dataset_dict.json").read_text()).get("splits", [])
        raise ValueError(
            f"{root}: a DatasetDict; pass one split's folder: {', '.join(str(root / s) for s in splits)}"
        )
    if _is_saved_dataset(root):
        state = json.loads((root / "state.json").read_text())
        files = [root / f["filename"] for f in state.get("_data_files", [])]
        text = str(root)
        kinds = {"arrow"}
    else:
        text, files = expand_paths(source)
        kinds = {_kind(p) for p in files}
    if len(kinds) > 1:
        raise ValueError(f"{text}: mixes {' and '.join(sorted(kinds))} files; measure one format at a time")
    kind = kinds.pop()
    if kind == "text" and (name is not None or chat):
        raise ValueError(
            f"{text}: plain-text files are one sample each; field= and chat_field= "
            "apply to JSONL, Parquet, CSV/TSV and datasets"
        )
    if kind == "csv" and chat:
        raise ValueError(
            f"{text}: chat_field= needs JSONL, Parquet or a dataset (a CSV cell "
            "holds text, not a list of messages)"
        )
    pieces: list[Piece] = []
    shards: list[tuple[str, int, int, str]] = []
    n_bytes = 0
    row = 0
    group: list[str] = []
    group_bytes = 0
    for path in files:
        stat = path.stat()
        n_bytes += stat.st_size
        split = _SPLIT_BYTES if kind == "jsonl" and not path.name.lower().endswith(".gz") else None
        digest, starts = _scan(path, split, hashing)
        shards.append((str(path), stat.st_size, stat.st_mtime_ns, digest))
        if stat.st_size == 0 and kind != "text":
            raise ValueError(f"{path}: empty file, no samples")
        if kind == "jsonl":
            stops: list[int | None] = [s for s, _ in starts[1:]]
            pieces += [
                JsonlRange(str(path), s, stop, line)
                for (s, line), stop in zip(starts, [*stops, None], strict=True)
            ]
        elif kind == "parquet":
            name, sizes = _parquet_groups(path, name, chat)
            for g, n in enumerate(sizes):
                pieces.append(ParquetGroup(str(path), g, row))
                row += n
            row = 0
        elif kind == "arrow":
            name, n = _arrow_rows(path, name, chat)
            pieces.append(ArrowFile(str(path), row))
            row += n
        elif kind == "csv":
            name = _csv_column(path, name)
            pieces.append(CsvFile(str(path)))
        else:
            group.append(str(path))
            group_bytes += stat.st_size
            if group_bytes >= _TEXT_PIECE_BYTES or len(group) >= _TEXT_PIECE_FILES:
                pieces.append(TextFiles(tuple(group)))
                group, group_bytes = [], 0
    if group:
        pieces.append(TextFiles(tuple(group)))
    plan = SourcePlan(
        pieces,
        text,
        n_bytes,
        shards if hashing else None,
        small=len(pieces) < 2 or n_bytes < _SMALL_INPUT_BYTES,
        files=tuple(map(str, files)),
        kind=kind,
    )
    return plan, name


#: What a missing text column's error tells the user to pass.
_NAME_HINT = "pass field= (text) or chat_field= (messages)"


def _pick_name(columns: list[str], name: str | None, where: str) -> str:
    return pick_column(columns, name, where, hint=_NAME_HINT)


def _check_arrow_type(kind: Any, name: str, chat: bool, where: str) -> None:
    import pyarrow as pa

    if pa.types.is_dictionary(kind):  # dictionary-encoded (e.g. from a pandas Categorical)
        kind = kind.value_type
    if chat:
        ok = pa.types.is_list(kind) or pa.types.is_large_list(kind)
        expected = "a list of {role, content} structs"
    else:
        ok = (
            pa.types.is_string(kind)
            or pa.types.is_large_string(kind)
            or getattr(pa.types, "is_string_view", lambda _: False)(kind)
        )
        expected = "strings"
    if not ok:
        raise ValueError(f"{where}: column {name!r} has type {kind}; expected {expected}")


def _parquet_groups(path: Path, name: str | None, chat: bool) -> tuple[str, list[int]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        file = pq.ParquetFile(path, pre_buffer=False)
    except pa.ArrowException as err:
        raise ValueError(f"{path}: cannot read as Parquet: {' '.join(str(err).split())}") from None
    schema = file.schema_arrow
    name = _pick_name(list(schema.names), name, str(path))
    _check_arrow_type(schema.field(name).type, name, chat, str(path))
    meta = file.metadata
    return name, [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]


def _arrow_rows(path: Path, name: str | None, chat: bool) -> tuple[str, int]:
    import pyarrow as pa

    try:
        with pa.memory_map(str(path)) as source:
            table = pa.ipc.open_stream(source).read_all()
    except (OSError, pa.ArrowException) as err:
        raise ValueError(f"{path}: cannot read a saved dataset shard: {' '.join(str(err).split())}") from None
    name = _pick_name(list(table.schema.names), name, str(path))
    _check_arrow_type(table.schema.field(name).type, name, chat, str(path))
    return name, table.num_rows


def _csv_column(path: Path, name: str | None) -> str:
    try:
        with open_csv(str(path)) as handle:
            columns = next(csv.reader(handle, delimiter=csv_sep(str(path)), strict=True), None)
    except (EOFError, zlib.error, gzip.BadGzipFile) as err:
        raise ValueError(f"{path}: corrupt gzip data ({' '.join(str(err).split())})") from None
    except (csv.Error, UnicodeDecodeError, OSError) as err:
        raise ValueError(f"{path}: cannot read the header: {' '.join(str(err).split())}") from None
    if not columns:
        raise ValueError(f"{path}: no header line; a CSV/TSV file starts with its column names")
    return _pick_name(columns, name, str(path))


def plan_records(source: Iterable[Any], name: str | None) -> SourcePlan:
    """An in-memory source: a ``datasets.Dataset`` (read by columns) or any iterable."""
    if is_instance(source, "datasets", "Dataset"):
        dataset: Any = source  # a datasets.Dataset: sized, indexable, with column_names
        column = _pick_name(list(dataset.column_names), name, "the dataset")

        def dataset_pieces() -> Iterator[Piece]:
            for start in range(0, len(dataset), _RECORDS_PER_PIECE):
                batch = dataset[start : start + _RECORDS_PER_PIECE][column]
                yield RecordsPiece(list(batch), start, extracted=True)

        return SourcePlan(
            dataset_pieces(), "the dataset", None, None, small=len(dataset) <= _RECORDS_PER_PIECE
        )
    if isinstance(source, str | bytes | dict):
        raise ValueError(
            f"source: expected a path, a dataset or an iterable of samples, got a "
            f"{type(source).__name__} (a path must be a pathlib.Path or exist)"
        )
    iterator = iter(source)
    first = list(itertools.islice(iterator, _RECORDS_PER_PIECE))

    def record_pieces() -> Iterator[Piece]:
        start, batch = 0, first
        while batch:
            yield RecordsPiece(batch, start, extracted=False)
            start += len(batch)
            batch = list(itertools.islice(iterator, _RECORDS_PER_PIECE))

    return SourcePlan(record_pieces(), "the input", None, None, small=len(first) < _RECORDS_PER_PIECE)
