"""Reading one piece of the input into checked samples, batch by batch.

A piece is a byte range of a ``.jsonl`` file (cut at line ends), a row group of a Parquet file,
a whole ``.jsonl.gz``/CSV file or saved-dataset shard, a group of plain-text files, or a batch
of an in-memory iterable.  Each yields lists of samples (strings, or conversations for
``chat_field``) checked on the way: an error names the file and the line or row.

The records of the work: :class:`Job` (what every piece needs), the pieces, and
:class:`MeasuredPiece` (a piece once measured, what comes back in source order).
"""

from __future__ import annotations

import csv
import gzip
import io
import itertools
import json
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

from analysis._validate import where_prefix
from analysis.measure._records import (
    BATCH,
    MAX_RECORD_BYTES,
    arrow_values,
    check_unicode,
    check_value,
    describe,
    field_of,
    too_large,
)
from analysis.measure._tokenizer import Spec


# ---------------------------------------------------------------------------- pieces
@dataclass(frozen=True)
class Job:
    """What every piece needs besides its own data."""

    spec: Spec
    name: str | None  # the field/column holding the sample
    chat: bool
    want_lengths: bool


@dataclass(frozen=True)
class JsonlRange:
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

    def batches(self, job: Job) -> Iterator[list[Any]]:
        gz = self.path.lower().endswith(".gz")
        number = self.first_line
        try:
            with gzip.open(self.path, "rb") if gz else open(self.path, "rb") as raw:
                handle: io.BufferedIOBase = raw
                handle.seek(self.start)
                lines = _lines_until(handle, self.start, self.stop, self.path, number)
                while block := list(itertools.islice(lines, BATCH)):
                    yield _jsonl_values(block, job, self.path, number, bom=number == 1)
                    number += len(block)
        except (EOFError, zlib.error, gzip.BadGzipFile) as err:
            raise ValueError(
                f"{self.path}: near line {number}: corrupt gzip data ({' '.join(str(err).split())})"
            ) from None


def _lines_until(
    handle: io.BufferedIOBase, start: int, stop: int | None, path: str, first: int
) -> Iterator[bytes]:
    """The lines from ``start`` to ``stop`` (or the end), none read whole past the limit."""
    pos = start
    number = first
    while stop is None or pos < stop:
        line = handle.readline(MAX_RECORD_BYTES + 1)
        if not line:
            return
        if len(line) > MAX_RECORD_BYTES:
            raise too_large(f"{path}: line {number}: ", _line_size(handle, len(line)), "line")
        pos += len(line)
        number += 1
        yield line


def _line_size(handle: io.BufferedIOBase, read: int) -> int:
    """The size of a too-long line, read on in blocks (never whole) to say how long it is."""
    while block := handle.readline(1 << 20):
        read += len(block)
        if block.endswith(b"\n"):
            break
    return read


def _jsonl_values(block: list[bytes], job: Job, path: str, first: int, bom: bool) -> list[Any]:
    """The samples of a block of JSONL lines, each line parsed on its own (so that lines that
    are not one JSON value each are never joined into one), each checked."""
    try:
        text = [line.decode("utf-8") for line in block]
        if bom:
            text[0] = text[0].removeprefix("\ufeff")
        objects = list(map(json.loads, text))
    except (ValueError, RecursionError):  # also UnicodeDecodeError and json.JSONDecodeError
        objects = [_json_line(line, path, number) for number, line in enumerate(block, start=first)]
    if job.name is not None and not job.chat and all(type(o) is dict for o in objects):
        values = [o.get(job.name) for o in objects]
        if all(type(v) is str for v in values):
            check_unicode(values, lambda i: f"{path}: line {first + i}: ")
            return values
    checked = []
    for number, obj in enumerate(objects, start=first):
        where = f"{path}: line {number}: "
        if not isinstance(obj, dict):
            raise ValueError(f"{where}expected a JSON object, got {describe(obj)}")
        checked.append(check_value(field_of(obj, job.name, where), job.chat, where, job.name))
    check_unicode(checked, lambda i: f"{path}: line {first + i}: ")
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
    except RecursionError:
        raise ValueError(f"{where}JSON nested too deeply to read") from None


@dataclass(frozen=True)
class ParquetGroup:
    path: str
    group: int
    first_row: int

    def label(self) -> str:
        return f"{self.path} [row group {self.group}]"

    def batches(self, job: Job) -> Iterator[list[Any]]:
        import pyarrow.parquet as pq

        assert job.name is not None
        file = pq.ParquetFile(self.path, pre_buffer=False)
        row = self.first_row
        for batch in file.iter_batches(batch_size=BATCH, row_groups=[self.group], columns=[job.name]):
            yield _column_values(arrow_values(batch.column(0), self.path, row), job, self.path, row)
            row += batch.num_rows


def _column_values(values: list[Any], job: Job, path: str, first_row: int) -> list[Any]:
    """Check a column's values (from Parquet, Arrow or CSV); errors name the row."""
    if not job.chat and all(type(v) is str for v in values):
        return values
    for i, v in enumerate(values):
        where = f"{path}: row {first_row + i}: "
        if v is None:
            raise ValueError(f"{where}missing value (null) in {job.name!r}")
        check_value(v, job.chat, where, job.name)
    return values


@dataclass(frozen=True)
class ArrowFile:
    """One ``data-NNNNN-of-MMMMM.arrow`` shard of a dataset saved with ``save_to_disk``."""

    path: str
    first_row: int

    def label(self) -> str:
        return self.path

    def batches(self, job: Job) -> Iterator[list[Any]]:
        import pyarrow as pa

        with pa.memory_map(self.path) as source:
            table = pa.ipc.open_stream(source).read_all().select([job.name])
            row = self.first_row
            for batch in table.to_batches(max_chunksize=BATCH):
                yield _column_values(arrow_values(batch.column(0), self.path, row), job, self.path, row)
                row += batch.num_rows


@dataclass(frozen=True)
class CsvFile:
    path: str

    def label(self) -> str:
        return self.path

    def batches(self, job: Job) -> Iterator[list[Any]]:
        assert job.name is not None
        line = 1
        try:
            with open_csv(self.path) as handle:
                reader = csv.reader(handle, delimiter=csv_sep(self.path), strict=True)
                header = next(reader, [])
                column, width = header.index(job.name), len(header)
                line = reader.line_num + 1
                batch: list[str] = []
                for record in reader:
                    start, line = line, reader.line_num + 1
                    if not record:
                        continue  # a blank line
                    if len(record) != width:
                        raise ValueError(
                            f"{self.path}: line {start}: {len(record)} field(s), the header "
                            f"has {width} ({', '.join(header)})"
                        )
                    value = record[column]
                    if len(value) > MAX_RECORD_BYTES // 4 and len(value.encode()) > MAX_RECORD_BYTES:
                        raise too_large(f"{self.path}: line {start}: ", len(value.encode()), "field")
                    batch.append(value)
                    if len(batch) == BATCH:
                        yield batch
                        batch = []
                if batch:
                    yield batch
        except csv.Error as err:
            if "field limit" in str(err):
                raise too_large(f"{self.path}: line {line}: ", MAX_RECORD_BYTES + 1, "field") from None
            raise ValueError(f"{self.path}: line {line}: {' '.join(str(err).split())}") from None
        except UnicodeDecodeError as err:
            raise ValueError(f"{self.path}: near line {line}: not UTF-8 (byte {err.start})") from None
        except (EOFError, zlib.error, gzip.BadGzipFile) as err:
            raise ValueError(
                f"{self.path}: near line {line}: corrupt gzip data ({' '.join(str(err).split())})"
            ) from None


def open_csv(path: str) -> IO[str]:
    """A CSV/TSV file (``.gz`` too) as text, the BOM dropped, no field over the limit."""
    csv.field_size_limit(max(csv.field_size_limit(), MAX_RECORD_BYTES))
    if path.lower().endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8-sig", newline="")
    return open(path, encoding="utf-8-sig", newline="")


def csv_sep(path: str) -> str:
    return "\t" if path.lower().removesuffix(".gz").endswith(".tsv") else ","


@dataclass(frozen=True)
class TextFiles:
    """Plain-text files, each one sample."""

    paths: tuple[str, ...]

    def label(self) -> str:
        more = len(self.paths) - 1
        return self.paths[0] if not more else f"{self.paths[0]} (+{more} files)"

    def batches(self, job: Job) -> Iterator[list[Any]]:
        for start in range(0, len(self.paths), BATCH):
            texts = []
            for path in self.paths[start : start + BATCH]:
                size = Path(path).stat().st_size
                if size > MAX_RECORD_BYTES:
                    raise too_large(f"{path}: ", size, "file")
                data = Path(path).read_bytes()
                try:
                    texts.append(data.decode("utf-8"))
                except UnicodeDecodeError as err:
                    raise ValueError(f"{path}: not UTF-8 text (byte {err.start})") from None
            yield texts


@dataclass(frozen=True)
class RecordsPiece:
    """A batch of an in-memory source (strings, records, or a dataset column's values)."""

    values: list[Any]
    first_row: int
    extracted: bool  # values are already the field's values

    def label(self) -> str:
        return ""

    def batches(self, job: Job) -> Iterator[list[Any]]:
        for start in range(0, len(self.values), BATCH):
            out = []
            for i, v in enumerate(self.values[start : start + BATCH], start=self.first_row + start):
                where = where_prefix(None, i)
                if not self.extracted:
                    v = field_of(v, job.name, where)
                elif v is None:
                    raise ValueError(f"{where}missing value (null) in {job.name!r}")
                v = check_value(v, job.chat, where, job.name)
                if type(v) is str and len(v) > MAX_RECORD_BYTES:
                    raise too_large(where, len(v.encode("utf-8", "replace")), "sample")
                out.append(v)
            first = self.first_row + start

            def row_of(i: int, first: int = first) -> str:
                return where_prefix(None, first + i)

            check_unicode(out, row_of)
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


Piece = JsonlRange | ParquetGroup | ArrowFile | CsvFile | TextFiles | RecordsPiece
