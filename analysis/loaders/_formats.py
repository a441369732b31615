"""The length-file formats: each file read in chunks into a running :class:`LengthCounter`.

One reader per format (``.npy``; ``.txt``; ``.csv``/``.tsv``, per-sample or the
``length,count`` histogram; Parquet; JSONL), chosen by extension by :func:`read_file`.
Memory is one chunk plus the distinct lengths; errors name the file and the ``line`` (1-based,
as an editor shows it) or ``row`` (0-based, as ``arr[N]``).
"""

from __future__ import annotations

import gzip
import io
import itertools
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analysis._validate import as_length_array
from analysis.counting import LengthCounter
from analysis.lengths import LengthHistogram
from analysis.loaders._paths import pick_column

#: File extensions :func:`load_lengths` reads (longest match wins).
SUPPORTED_EXTENSIONS = (
    ".npy",
    ".txt",
    ".txt.gz",
    ".csv",
    ".csv.gz",
    ".tsv",
    ".tsv.gz",
    ".parquet",
    ".jsonl",
    ".jsonl.gz",
)

#: Rows read (and validated) at a time; bounds the memory of every loader.
_CHUNK_ROWS = 1 << 20
_INT64_MAX = np.iinfo(np.int64).max


def load_file(path: Path, *, column: str | None, field: str | None, allow_zero: bool) -> LengthHistogram:
    """The histogram of one length file (what a Dask worker computes for its file)."""
    counter = LengthCounter()
    if read_file(path, counter, column=column, field=field, allow_zero=allow_zero) == 0:
        raise ValueError(f"{path}: empty file, no lengths")
    return counter.histogram(str(path))


def _extension(path: Path) -> str:
    name = path.name.lower()
    matches = [ext for ext in SUPPORTED_EXTENSIONS if name.endswith(ext)]
    if not matches:
        raise ValueError(
            f"{path}: unknown file type {''.join(path.suffixes) or '(none)'!r}; "
            f"supported: {', '.join(SUPPORTED_EXTENSIONS)}"
        )
    return max(matches, key=len)


def read_file(
    path: Path, counter: LengthCounter, *, column: str | None, field: str | None, allow_zero: bool
) -> int:
    """Count one file's lengths into ``counter``; return the number of rows read."""
    ext = _extension(path)
    kind = ext.removesuffix(".gz")
    if field is not None and kind != ".jsonl":
        raise ValueError(
            f"{path}: field= (--field) applies to .jsonl files; use column= (--column) for tables"
        )
    if column is not None and kind in (".npy", ".txt", ".jsonl"):
        hint = "use field= (--field)" if kind == ".jsonl" else "the file has a single unnamed column"
        raise ValueError(f"{path}: column= (--column) does not apply to {kind} files ({hint})")
    try:
        if kind == ".npy":
            return _read_npy(path, counter, allow_zero)
        if kind == ".txt":
            return _read_text_table(path, counter, sep=",", header=False, column=None, allow_zero=allow_zero)
        if kind in (".csv", ".tsv"):
            return _read_text_table(
                path,
                counter,
                sep="," if kind == ".csv" else "\t",
                header=True,
                column=column,
                allow_zero=allow_zero,
            )
        if kind == ".parquet":
            return _read_parquet(path, counter, column, allow_zero)
        return _read_jsonl(path, counter, field, allow_zero)
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: {_first_bad_utf8(path)}") from err
    except (OSError, EOFError, pd.errors.ParserError) as err:
        message = " ".join(str(err).split())
        fields = re.search(r"Expected (\d+) fields? in line (\d+), saw (\d+)", message)
        if fields:
            expected, line, found = fields.groups()
            raise ValueError(
                f"{path}: line {line}: expected {expected} field(s) like the first line, found {found}"
            ) from err
        raise ValueError(f"{path}: cannot read: {message}") from err


# ---------------------------------------------------------------------------- readers
def _read_npy(path: Path, counter: LengthCounter, allow_zero: bool) -> int:
    try:
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
    except ValueError as err:  # object arrays, corrupt headers
        raise ValueError(f"{path}: cannot read: {' '.join(str(err).split())}") from err
    if not isinstance(arr, np.ndarray):
        raise ValueError(f"{path}: expected a .npy array, got {type(arr).__name__}")
    if arr.ndim != 1:
        raise ValueError(f"{path}: expected a 1-D array of lengths, got shape {arr.shape}")
    for start in range(0, arr.shape[0], _CHUNK_ROWS):
        chunk = np.asarray(arr[start : start + _CHUNK_ROWS])
        counter.add_lengths(as_length_array(chunk, allow_zero=allow_zero, source=str(path), first_row=start))
    return int(arr.shape[0])


def _first_bad_utf8(path: Path) -> str:
    """Where the first byte that is not UTF-8 is: ``"line 3, byte 1: ..."`` (1-based)."""
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    with opener(path, "rb") as fh:
        for number, line in enumerate(fh, 1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as err:
                return (
                    f"line {number}, byte {err.start + 1}: {line[err.start : err.start + 1]!r} is "
                    "not UTF-8 text; save the file as UTF-8"
                )
    return "not UTF-8 text; save the file as UTF-8"


def _open_text(path: Path) -> io.TextIOBase:
    if path.name.lower().endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8-sig", newline="")
    return open(path, encoding="utf-8-sig", newline="")


def _read_text_table(
    path: Path, counter: LengthCounter, *, sep: str, header: bool, column: str | None, allow_zero: bool
) -> int:
    """``.txt`` (no header, one value a line) or ``.csv``/``.tsv`` (header line)."""
    where = str(path)
    # low_memory=False: a chunk is typed in one piece (no DtypeWarning before our own error)
    options: dict[str, Any] = dict(
        sep=sep, skip_blank_lines=False, skipinitialspace=True, compression="infer", low_memory=False
    )
    if header:
        try:
            names = list(map(str, pd.read_csv(path, nrows=0, **options).columns))
        except pd.errors.EmptyDataError:
            raise ValueError(f"{where}: empty file, no lengths") from None
        if column is None and sorted(names) == ["count", "length"]:
            return _read_histogram_table(path, counter, options, allow_zero)
        numeric = [n for n in names if re.fullmatch(r"[+-]?\d+(\.\d*)?", n.strip())]
        if numeric:  # a data row read as the header would be dropped: never read such a file
            raise ValueError(
                f"{where}: line 1: header {numeric[0]!r} looks like a length, so the file has no "
                "header line; add one naming the columns (e.g. length), or use .txt for one "
                "integer per line"
            )
        name = pick_column(names, column, where)
        reader = pd.read_csv(path, usecols=[name], chunksize=_CHUNK_ROWS, **options)
        offset = 2  # line 1 is the header; data row 0 is on line 2
    else:
        try:
            reader = pd.read_csv(path, header=None, chunksize=_CHUNK_ROWS, **options)
        except pd.errors.EmptyDataError:
            raise ValueError(f"{where}: empty file, no lengths") from None
        offset = 1
    rows = 0
    with reader:
        for chunk in reader:
            if chunk.empty:
                continue
            if chunk.shape[1] != 1:
                raise ValueError(
                    f"{where}: line {offset + int(chunk.index[0])}: expected one "
                    f"integer per line, found {chunk.shape[1]} fields"
                )
            first = offset + int(chunk.index[0])
            values = _text_values(chunk.iloc[:, 0], where, first, "length")
            counter.add_lengths(
                as_length_array(values, allow_zero=allow_zero, source=where, first_row=first, unit="line")
            )
            rows += len(chunk)
    return rows


def _read_histogram_table(
    path: Path, counter: LengthCounter, options: dict[str, Any], allow_zero: bool
) -> int:
    where = str(path)
    rows = 0
    with pd.read_csv(path, chunksize=_CHUNK_ROWS, **options) as reader:
        for chunk in reader:
            if chunk.empty:
                continue
            first = 2 + int(chunk.index[0])
            lengths = _line_values(chunk, "length", where, first, allow_zero=allow_zero)
            counts = _line_values(chunk, "count", where, first, allow_zero=True, what="count")
            keep = counts > 0
            counter.add_counts(lengths[keep], counts[keep], where)
            rows += len(chunk)
    return rows


def _line_values(
    chunk: pd.DataFrame, name: str, where: str, first: int, *, allow_zero: bool, what: str = "length"
) -> np.ndarray:
    """Column ``name`` of a chunk whose first row is on line ``first``, checked as lengths."""
    values = _text_values(chunk[name], where, first, name)
    return as_length_array(
        values, allow_zero=allow_zero, source=where, first_row=first, unit="line", what=what
    )


def _text_values(series: pd.Series, where: str, first_line: int, what: str) -> np.ndarray:
    """Numbers parsed by pandas from a text column; blanks and unparsable text are errors."""
    missing = series.isna().to_numpy()
    if series.dtype.kind in "iuf" and not missing.any():
        return series.to_numpy()
    raw = series.tolist()
    out: list[Any] = []
    for i, v in enumerate(raw):
        if missing[i]:
            raise ValueError(f"{where}: line {first_line + i}: no {what} (blank line, empty field or NaN)")
        if isinstance(v, str):
            try:
                v = int(v.strip())
            except ValueError:
                try:
                    v = float(v)
                except ValueError:
                    raise ValueError(
                        f"{where}: line {first_line + i}: cannot read {v!r} as a {what}"
                    ) from None
        out.append(v)
    return np.array(out, dtype=object)


def _read_parquet(path: Path, counter: LengthCounter, column: str | None, allow_zero: bool) -> int:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    where = str(path)
    try:
        file = pq.ParquetFile(path, pre_buffer=False)  # pre-buffering doubles peak memory
    except pa.ArrowException as err:
        raise ValueError(f"{where}: cannot read as Parquet: {' '.join(str(err).split())}") from err
    schema = file.schema_arrow
    name = pick_column(list(schema.names), column, where)
    kind = schema.field(name).type
    is_list = pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind)
    if is_list and not pa.types.is_integer(kind.value_type):
        raise ValueError(
            f"{where}: column {name!r} holds lists of {kind.value_type}, not lengths: expected "
            "integers or lists of token ids"
        )
    if not (is_list or pa.types.is_integer(kind) or pa.types.is_floating(kind)):
        raise ValueError(f"{where}: column {name!r} has type {kind}; expected integers or lists of token ids")
    row = 0
    batches = file.iter_batches(batch_size=_CHUNK_ROWS, columns=[name])
    while True:
        try:
            batch = next(batches, None)
        except pa.ArrowException as err:
            raise ValueError(f"{where}: near row {row}: cannot read: {' '.join(str(err).split())}") from err
        if batch is None:
            break
        values = batch.column(0)
        if is_list:
            values = pc.list_value_length(values)
        if values.null_count:
            i = int(np.argmax(values.is_null().to_numpy(zero_copy_only=False)))
            raise ValueError(f"{where}: row {row + i}: missing value (null)")
        counter.add_lengths(
            as_length_array(
                values.to_numpy(zero_copy_only=False), allow_zero=allow_zero, source=where, first_row=row
            )
        )
        row += len(batch)
    return row


def _read_jsonl(path: Path, counter: LengthCounter, field: str | None, allow_zero: bool) -> int:
    where = str(path)
    rows = 0
    with _open_text(path) as handle:
        while block := list(itertools.islice(handle, _CHUNK_ROWS // 8)):
            field, values = _jsonl_block(block, field, where, rows + 1)
            counter.add_lengths(
                as_length_array(values, allow_zero=allow_zero, source=where, first_row=rows + 1, unit="line")
            )
            rows += len(block)
    return rows


def _jsonl_block(block: list[str], field: str | None, where: str, first_line: int) -> tuple[str, np.ndarray]:
    """Lengths of a block of JSONL lines: parsed in one call, or line by line on any error
    (which then names the exact line).

    Each line is parsed as the one element of its own array (``[[line1],[line2],...]``), so
    lines that are not one JSON value each (an object spread over two lines, two objects on
    one) never pass as the right number of records: a string cannot hold the newline that
    ends a line, so no line's brackets can pair with another's without breaking the count."""
    try:
        wrapped = json.loads("[[" + "],[".join(block) + "]]")
        if len(wrapped) != len(block) or not all(type(w) is list and len(w) == 1 for w in wrapped):
            raise ValueError("a line holds more or less than one value")
        objects = [w[0] for w in wrapped]
        if field is None:
            field = _pick_field(objects[0], where, first_line)
        values = [obj[field] for obj in objects]
        kinds = set(map(type, values))
        if kinds == {int}:
            return field, np.array(values, dtype=np.int64)  # OverflowError beyond int64
        if kinds == {list} and all(not v or type(v[0]) is int for v in values):  # token ids
            return field, np.fromiter(map(len, values), dtype=np.int64, count=len(values))
    except (ValueError, TypeError, KeyError, IndexError, OverflowError, RecursionError):
        pass
    lengths = []
    for number, line in enumerate(block, start=first_line):
        obj = _json_object(line, where, number)
        if field is None:
            field = _pick_field(obj, where, number)
        try:
            value = obj[field]
        except KeyError:
            raise ValueError(
                f"{where}: line {number}: no field {field!r}; fields: {', '.join(obj)}"
            ) from None
        lengths.append(_json_length(value, field, where, number))
    assert field is not None
    return field, np.array(lengths, dtype=np.int64)


def _json_object(line: str, where: str, number: int) -> dict[str, Any]:
    if not line.strip():
        raise ValueError(f"{where}: line {number}: blank line")
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as err:
        raise ValueError(f"{where}: line {number}: not valid JSON ({err.msg})") from None
    except RecursionError:
        raise ValueError(f"{where}: line {number}: JSON nested too deeply to read") from None
    if not isinstance(obj, dict):
        raise ValueError(f"{where}: line {number}: expected a JSON object, got {type(obj).__name__}")
    return obj


def _pick_field(obj: Any, where: str, number: int) -> str:
    if not isinstance(obj, dict):
        raise TypeError("not an object")  # the line-by-line pass names the line
    hint = "pass field= (--field) naming the length field"
    return pick_column(list(map(str, obj)), None, f"{where}: line {number}", noun="field", hint=hint)


def _json_length(value: Any, field: str, where: str, number: int) -> int:
    """An integer (or integral float) value, or the length of a list."""
    kind = type(value)
    if kind is int:
        if value > _INT64_MAX:
            raise ValueError(f"{where}: line {number}: length {value} is too large")
        if value < -_INT64_MAX:
            raise ValueError(f"{where}: line {number}: negative length {value}")
        return int(value)
    if kind is list and (not value or type(value[0]) is int):  # token ids: one per token
        return len(value)
    if kind is float:
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"{where}: line {number}: length is {value!r}, not a number")
        if not value.is_integer():
            raise ValueError(f"{where}: line {number}: length {value!r} is not an integer")
        if abs(value) >= 2.0**63:
            raise ValueError(f"{where}: line {number}: length {value!r} is too large")
        return int(value)
    shown = json.dumps(value)
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    names = {bool: "a bool", type(None): "null", str: "a string", dict: "an object", list: "a list"}
    what = names.get(kind, kind.__name__)
    if kind is list:
        what = f"a list of {_plural(type(value[0]))}"
    hint = (
        f"; to count its tokens run padding-workbench lengths SRC --tokenizer PATH "
        f"--{'chat-field' if kind is list and type(value[0]) is dict else 'field'} {field}"
        if kind in (str, list)
        else ""
    )
    raise ValueError(
        f"{where}: line {number}: field {field!r} holds {what} ({shown}), not a length: expected an "
        f"integer or a list of token ids{hint}"
    )


def _plural(kind: type) -> str:
    return {dict: "objects", str: "strings", list: "lists", float: "numbers", bool: "bools"}.get(
        kind, f"{kind.__name__} values"
    )
