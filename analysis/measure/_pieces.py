"""Reading one piece of the input into checked samples, batch by batch.

A piece is a byte range of a ``.jsonl`` file (cut at line ends), a row group of a Parquet file,
a whole ``.jsonl.gz``/CSV file or saved-dataset shard, a group of plain-text files, or a batch
of an in-memory iterable.  Each yields lists of samples (strings, or conversations for
``chat_field``) checked on the way: an error names the file and the line or row.

The records of the work: :class:`_Job` (what every piece needs), the pieces, and
:class:`MeasuredPiece` (a piece once measured, what comes back in source order).
"""

from __future__ import annotations

import gzip
import io
import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from analysis._validate import where_prefix
from analysis.measure._tokenizer import _Spec

#: Samples encoded per call of the tokenizer's batch API.
_BATCH = 1024


# ---------------------------------------------------------------------------- one sample
def _check_value(value: Any, chat: bool, where: str, name: str | None) -> Any:
    """A sample's text (a ``str``) or conversation (a list of role/content messages)."""
    label = "the sample" if name is None else f"field {name!r}"
    if not chat:
        if isinstance(value, str):
            return value
        raise ValueError(f"{where}{label} is {_describe(value)}; expected a string")
    if not isinstance(value, list):
        raise ValueError(
            f"{where}{label} is {_describe(value)}; expected a list of {{'role', 'content'}} messages"
        )
    for i, message in enumerate(value):
        if not isinstance(message, dict):
            raise ValueError(
                f"{where}message {i} of {label} is {_describe(message)}; expected "
                "an object with 'role' and 'content'"
            )
        for key in ("role", "content"):
            if message.get(key) is None:
                raise ValueError(f"{where}message {i} of {label} has no {key!r}")
    return value


def _describe(value: Any) -> str:
    shown = json.dumps(value, default=repr)
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    kind = {
        bool: "a bool",
        type(None): "null",
        str: "a string",
        dict: "an object",
        list: "a list",
        int: "an integer",
        float: "a number",
    }.get(type(value), type(value).__name__)
    return f"{kind} ({shown})"


def _field_of(obj: Any, name: str | None, where: str) -> Any:
    """``obj[name]`` of a record; with ``name=None`` a string itself or a one-field record."""
    if name is None:
        if isinstance(obj, dict):
            if len(obj) == 1:
                return next(iter(obj.values()))
            raise ValueError(
                f"{where}{len(obj)} fields ({', '.join(map(str, obj))}); pass "
                "field= (text) or chat_field= (messages)"
            )
        return obj
    if not isinstance(obj, dict):
        raise ValueError(f"{where}expected a record with field {name!r}, got {_describe(obj)}")
    try:
        return obj[name]
    except KeyError:
        raise ValueError(f"{where}no field {name!r}; fields: {', '.join(map(str, obj))}") from None


# ---------------------------------------------------------------------------- pieces
@dataclass(frozen=True)
class _Job:
    """What every piece needs besides its own data."""

    spec: _Spec
    name: str | None  # the field/column holding the sample
    chat: bool
    want_lengths: bool


@dataclass(frozen=True)
class _JsonlRange:
    path: str
    start: int
    stop: int | None  # None: to the end (and the only way to read a .jsonl.gz)
    first_line: int

    def label(self) -> str:
        return (
            self.path
            if self.start == 0 and self.stop is None
            else f"{self.path} [lines from {self.first_line}]"
        )

    def batches(self, job: _Job) -> Iterator[list[Any]]:
        gz = self.path.lower().endswith(".gz")
        with gzip.open(self.path, "rb") if gz else open(self.path, "rb") as raw:
            handle: io.BufferedIOBase = raw
            handle.seek(self.start)
            lines = _lines_until(handle, self.start, self.stop)
            number = self.first_line
            while block := list(itertools.islice(lines, _BATCH)):
                yield _jsonl_values(block, job, self.path, number, bom=number == 1)
                number += len(block)


def _lines_until(handle: io.BufferedIOBase, start: int, stop: int | None) -> Iterator[bytes]:
    if stop is None:
        yield from handle
        return
    pos = start
    while pos < stop:
        line = handle.readline()
        if not line:
            return
        pos += len(line)
        yield line


def _jsonl_values(block: list[bytes], job: _Job, path: str, first: int, bom: bool) -> list[Any]:
    """The samples of a block of JSONL lines, parsed in one call (or line by line when that
    fails, to name the bad line), each checked."""
    try:
        text = [line.decode("utf-8") for line in block]
        if bom:
            text[0] = text[0].removeprefix("\ufeff")
        objects = json.loads("[" + ",".join(text) + "]")
        if len(objects) != len(block):
            raise ValueError("a line holds more than one value")
    except ValueError:  # also UnicodeDecodeError and json.JSONDecodeError
        objects = [_json_line(line, path, number) for number, line in enumerate(block, start=first)]
    if job.name is not None and not job.chat and all(type(o) is dict for o in objects):
        values = [o.get(job.name) for o in objects]
        if all(type(v) is str for v in values):
            return values
    checked = []
    for number, obj in enumerate(objects, start=first):
        where = f"{path}: line {number}: "
        if not isinstance(obj, dict):
            raise ValueError(f"{where}expected a JSON object, got {_describe(obj)}")
        checked.append(_check_value(_field_of(obj, job.name, where), job.chat, where, job.name))
    return checked


def _json_line(line: bytes, path: str, number: int) -> Any:
    where = f"{path}: line {number}: "
    try:
        decoded = line.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(f"{where}not UTF-8 (byte {err.start})") from None
    if number == 1:
        decoded = decoded.removeprefix("\ufeff")
    if not decoded.strip():
        raise ValueError(f"{where}blank line")
    try:
        return json.loads(decoded)
    except json.JSONDecodeError as err:
        raise ValueError(f"{where}not valid JSON ({err.msg})") from None


@dataclass(frozen=True)
class _ParquetGroup:
    path: str
    group: int
    first_row: int

    def label(self) -> str:
        return f"{self.path} [row group {self.group}]"

    def batches(self, job: _Job) -> Iterator[list[Any]]:
        import pyarrow.parquet as pq

        assert job.name is not None
        file = pq.ParquetFile(self.path, pre_buffer=False)
        row = self.first_row
        for batch in file.iter_batches(batch_size=_BATCH, row_groups=[self.group], columns=[job.name]):
            yield _column_values(batch.column(0).to_pylist(), job, self.path, row)
            row += batch.num_rows


def _column_values(values: list[Any], job: _Job, path: str, first_row: int) -> list[Any]:
    """Check a column's values (from Parquet, Arrow or CSV); errors name the row."""
    if not job.chat and all(type(v) is str for v in values):
        return values
    for i, v in enumerate(values):
        where = f"{path}: row {first_row + i}: "
        if v is None:
            raise ValueError(f"{where}missing value (null) in {job.name!r}")
        _check_value(v, job.chat, where, job.name)
    return values


@dataclass(frozen=True)
class _ArrowFile:
    """One ``data-NNNNN-of-MMMMM.arrow`` shard of a dataset saved with ``save_to_disk``."""

    path: str
    first_row: int

    def label(self) -> str:
        return self.path

    def batches(self, job: _Job) -> Iterator[list[Any]]:
        import pyarrow as pa

        with pa.memory_map(self.path) as source:
            table = pa.ipc.open_stream(source).read_all().select([job.name])
            row = self.first_row
            for batch in table.to_batches(max_chunksize=_BATCH):
                yield _column_values(batch.column(0).to_pylist(), job, self.path, row)
                row += batch.num_rows


@dataclass(frozen=True)
class _CsvFile:
    path: str

    def label(self) -> str:
        return self.path

    def batches(self, job: _Job) -> Iterator[list[Any]]:
        import pandas as pd

        row = 0
        with pd.read_csv(
            self.path,
            sep=_csv_sep(self.path),
            usecols=[job.name],
            dtype=str,
            keep_default_na=False,
            chunksize=_BATCH,
            compression="infer",
        ) as reader:
            for chunk in reader:
                yield _column_values(chunk.iloc[:, 0].tolist(), job, self.path, row)
                row += len(chunk)


def _csv_sep(path: str) -> str:
    return "\t" if path.lower().removesuffix(".gz").endswith(".tsv") else ","


@dataclass(frozen=True)
class _TextFiles:
    """Plain-text files, each one sample."""

    paths: tuple[str, ...]

    def label(self) -> str:
        more = len(self.paths) - 1
        return self.paths[0] if not more else f"{self.paths[0]} (+{more} files)"

    def batches(self, job: _Job) -> Iterator[list[Any]]:
        for start in range(0, len(self.paths), _BATCH):
            texts = []
            for path in self.paths[start : start + _BATCH]:
                data = Path(path).read_bytes()
                try:
                    texts.append(data.decode("utf-8"))
                except UnicodeDecodeError as err:
                    raise ValueError(f"{path}: not UTF-8 text (byte {err.start})") from None
            yield texts


@dataclass(frozen=True)
class _Records:
    """A batch of an in-memory source (strings, records, or a dataset column's values)."""

    values: list[Any]
    first_row: int
    extracted: bool  # values are already the field's values

    def label(self) -> str:
        return ""

    def batches(self, job: _Job) -> Iterator[list[Any]]:
        for start in range(0, len(self.values), _BATCH):
            out = []
            for i, v in enumerate(self.values[start : start + _BATCH], start=self.first_row + start):
                where = where_prefix(None, i)
                if not self.extracted:
                    v = _field_of(v, job.name, where)
                elif v is None:
                    raise ValueError(f"{where}missing value (null) in {job.name!r}")
                out.append(_check_value(v, job.chat, where, job.name))
            yield out


@dataclass(frozen=True, eq=False)
class MeasuredPiece:
    """One measured piece of the input, in source order: what a progress wrapper sees.

    Parameters
    ----------
    where : str
        The file (and range or row group) the piece came from; ``""`` for in-memory input.
    n_samples : int
        Samples in the piece.
    n_tokens : int
        Their total length in tokens.
    """

    where: str
    n_samples: int
    n_tokens: int
    _lengths: np.ndarray | None  # per-sample lengths (int32), when ``out`` was asked
    _hist: tuple[np.ndarray, np.ndarray]  # (distinct lengths, counts)


_Piece = _JsonlRange | _ParquetGroup | _ArrowFile | _CsvFile | _TextFiles | _Records
