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

This module and :mod:`analysis.loaders` are the only ones that read data files.  It imports
``tokenizers``, ``transformers``, ``datasets`` and ``distributed`` only when a call needs
them (the ``measure`` extra), and never a progress bar: a face passes ``progress=``.
"""

from __future__ import annotations

import glob
import gzip
import hashlib
import io
import itertools
import json
import multiprocessing
import os
import pickle
import re
import shutil
import sys
import tempfile
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from analysis.lengths import LengthHistogram, _where
from analysis.lengths import _Counter

__all__ = ["DEFAULT_CACHE_DIR", "MeasuredPiece", "load_lengths_distributed", "measure_lengths"]

#: Where :func:`measure_lengths` keeps its results unless ``cache_dir=`` says otherwise.
DEFAULT_CACHE_DIR = Path("~/.cache/padding-workbench/lengths")

#: Samples encoded per call of the tokenizer's batch API.
_BATCH = 1024
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
_CACHE_VERSION = "measure-1"
_INT32_MAX = np.iinfo(np.int32).max
_GLOB_CHARS = re.compile(r"[*?\[]")
#: Data formats by extension; any other file is plain text, one sample per file.
_JSONL, _PARQUET, _CSV = (".jsonl", ".jsonl.gz"), (".parquet",), (".csv", ".csv.gz", ".tsv",
                                                                  ".tsv.gz")


class _Progress(Protocol):
    def __call__(self, pieces: Iterable[MeasuredPiece], /) -> Iterable[MeasuredPiece]: ...


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


# ---------------------------------------------------------------------------- tokenizers
@dataclass(frozen=True)
class _Spec:
    """A tokenizer in a form that can travel to a worker process or a Dask worker."""

    kind: str  # "tokenizers" (obj: its JSON), "transformers", "tiktoken", "callable"
    obj: Any
    add_special_tokens: bool
    digest: str | None  # content hash for the cache; None: not cacheable


def _sha(*parts: bytes | str) -> str:
    h = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def _is_instance(obj: Any, module: str, name: str) -> bool:
    """``isinstance(obj, module.name)`` without importing ``module`` if nobody has."""
    mod = sys.modules.get(module)
    cls = getattr(mod, name, None) if mod is not None else None
    return cls is not None and isinstance(obj, cls)


def _load_tokenizer(path: Path) -> Any:
    """A tokenizer from a ``tokenizer.json`` file or a local Hugging Face directory, offline."""
    if not path.exists():
        raise ValueError(f"{path}: no such tokenizer file or directory")
    try:
        if path.is_file():
            from tokenizers import Tokenizer
            return Tokenizer.from_file(str(path))
        if not (path / "tokenizer_config.json").is_file() and (path / "tokenizer.json").is_file():
            from tokenizers import Tokenizer
            return Tokenizer.from_file(str(path / "tokenizer.json"))
        from transformers import AutoTokenizer
        return AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    except ImportError as err:
        raise ValueError(f"{path}: loading a tokenizer needs the 'measure' extra "
                         f"(pip install 'padding-workbench[measure]'): {err}") from None
    except Exception as err:  # noqa: BLE001 - any loader failure is one line naming the path
        raise ValueError(f"{path}: cannot load a tokenizer: {' '.join(str(err).split())}") \
            from None


def _spec(tokenizer: Any, *, add_special_tokens: bool, chat: bool) -> _Spec:
    """Recognise the tokenizer kind and check that it can do what is asked."""
    if isinstance(tokenizer, str | os.PathLike):
        tokenizer = _load_tokenizer(Path(os.path.expanduser(os.fspath(tokenizer))))
    is_transformers = _is_instance(tokenizer, "transformers", "PreTrainedTokenizerBase")
    if chat:
        if not is_transformers:
            raise ValueError(f"tokenizer: chat_field= needs a transformers tokenizer with a chat "
                             f"template, got {type(tokenizer).__name__}")
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError("tokenizer: has no chat template, which chat_field= needs (set "
                             "tokenizer.chat_template or pass field= for plain text)")
    if _is_instance(tokenizer, "tokenizers", "Tokenizer"):
        text = tokenizer.to_str()
        return _Spec("tokenizers", text, add_special_tokens, _sha("tokenizers", text))
    if is_transformers:
        backend = getattr(tokenizer, "backend_tokenizer", None)
        state = backend.to_str() if backend is not None else _pickle_or_none(tokenizer)
        special = json.dumps(getattr(tokenizer, "special_tokens_map", {}), sort_keys=True,
                             default=str)
        digest = None if state is None else _sha(
            "transformers", type(tokenizer).__qualname__, state,
            str(getattr(tokenizer, "chat_template", None)), special)
        return _Spec("transformers", tokenizer, add_special_tokens, digest)
    if callable(getattr(tokenizer, "encode_ordinary_batch", None)):
        state = _pickle_or_none(tokenizer)
        return _Spec("tiktoken", tokenizer, add_special_tokens,
                     None if state is None else _sha("tiktoken", state))
    if callable(tokenizer):
        state = _pickle_or_none(tokenizer)
        code = getattr(tokenizer, "__code__", None)
        body = b"" if code is None else code.co_code + repr(code.co_consts).encode()
        return _Spec("callable", tokenizer, add_special_tokens,
                     None if state is None else _sha("callable", state, body))
    raise ValueError(f"tokenizer: expected a path, a tokenizers.Tokenizer, a transformers "
                     "tokenizer, a tiktoken encoding or a callable, got "
                     f"{type(tokenizer).__name__}")


def _pickle_or_none(obj: Any) -> bytes | None:
    try:
        return pickle.dumps(obj)
    except Exception:  # noqa: BLE001 - lambdas, closures, objects holding handles
        return None


class _Encoder:
    """Counts tokens of batches of texts or conversations with one :class:`_Spec`."""

    def __init__(self, spec: _Spec) -> None:
        self.spec = spec
        self.backend: Any = None
        if spec.kind == "tokenizers":
            from tokenizers import Tokenizer
            self.backend = Tokenizer.from_str(spec.obj)
        elif spec.kind == "transformers" and getattr(spec.obj, "backend_tokenizer", None):
            from tokenizers import Tokenizer
            self.backend = Tokenizer.from_str(spec.obj.backend_tokenizer.to_str())
        if self.backend is not None:  # lengths are untruncated and unpadded
            self.backend.no_truncation()
            self.backend.no_padding()

    def texts(self, texts: list[str]) -> np.ndarray:
        """Token counts of ``texts`` (int64)."""
        spec = self.spec
        if self.backend is not None:
            encode = getattr(self.backend, "encode_batch_fast", self.backend.encode_batch)
            counts: Iterable[int] = map(len, encode(texts,
                                                    add_special_tokens=spec.add_special_tokens))
        elif spec.kind == "transformers":
            ids = spec.obj(texts, add_special_tokens=spec.add_special_tokens,
                           return_attention_mask=False, return_token_type_ids=False)["input_ids"]
            counts = map(len, ids)
        elif spec.kind == "tiktoken":
            counts = map(len, spec.obj.encode_ordinary_batch(texts))
        else:
            return _callable_lengths(spec.obj(texts), len(texts))
        return np.fromiter(counts, dtype=np.int64, count=len(texts))

    def chats(self, conversations: list[list[dict[str, Any]]]) -> np.ndarray:
        """Token counts of ``conversations`` rendered by the tokenizer's chat template."""
        ids = self.spec.obj.apply_chat_template(conversations, tokenize=True)
        if hasattr(ids, "keys"):  # transformers >= 5 returns a BatchEncoding
            ids = ids["input_ids"]
        return np.fromiter(map(len, ids), dtype=np.int64, count=len(conversations))


def _callable_lengths(result: Any, expected: int) -> np.ndarray:
    arr = np.asarray(result)
    if arr.ndim != 1 or arr.shape[0] != expected:
        raise ValueError(f"tokenizer: the callable returned {arr.shape} for {expected} texts; "
                         "expected one length per text")
    if arr.dtype.kind not in "iu" or (arr.size and int(arr.min()) < 0):
        raise ValueError("tokenizer: the callable must return non-negative integer lengths, "
                         f"got dtype {arr.dtype}")
    return arr.astype(np.int64)


# ---------------------------------------------------------------------------- one sample
def _check_value(value: Any, chat: bool, where: str, name: str | None) -> Any:
    """A sample's text (a ``str``) or conversation (a list of role/content messages)."""
    label = "the sample" if name is None else f"field {name!r}"
    if not chat:
        if isinstance(value, str):
            return value
        raise ValueError(f"{where}{label} is {_describe(value)}; expected a string")
    if not isinstance(value, list):
        raise ValueError(f"{where}{label} is {_describe(value)}; expected a list of "
                         "{'role', 'content'} messages")
    for i, message in enumerate(value):
        if not isinstance(message, dict):
            raise ValueError(f"{where}message {i} of {label} is {_describe(message)}; expected "
                             "an object with 'role' and 'content'")
        for key in ("role", "content"):
            if message.get(key) is None:
                raise ValueError(f"{where}message {i} of {label} has no {key!r}")
    return value


def _describe(value: Any) -> str:
    shown = json.dumps(value, default=repr)
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    kind = {bool: "a bool", type(None): "null", str: "a string", dict: "an object",
            list: "a list", int: "an integer", float: "a number"}.get(type(value),
                                                                     type(value).__name__)
    return f"{kind} ({shown})"


def _field_of(obj: Any, name: str | None, where: str) -> Any:
    """``obj[name]`` of a record; with ``name=None`` a string itself or a one-field record."""
    if name is None:
        if isinstance(obj, dict):
            if len(obj) == 1:
                return next(iter(obj.values()))
            raise ValueError(f"{where}{len(obj)} fields ({', '.join(map(str, obj))}); pass "
                             "field= (text) or chat_field= (messages)")
        return obj
    if not isinstance(obj, dict):
        raise ValueError(f"{where}expected a record with field {name!r}, got {_describe(obj)}")
    try:
        return obj[name]
    except KeyError:
        raise ValueError(f"{where}no field {name!r}; fields: {', '.join(map(str, obj))}") \
            from None


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
        return self.path if self.start == 0 and self.stop is None else \
            f"{self.path} [lines from {self.first_line}]"

    def batches(self, job: _Job) -> Iterator[list[Any]]:
        gz = self.path.lower().endswith(".gz")
        with (gzip.open(self.path, "rb") if gz else open(self.path, "rb")) as raw:
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
        objects = [_json_line(line, path, number)
                   for number, line in enumerate(block, start=first)]
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
        for batch in file.iter_batches(batch_size=_BATCH, row_groups=[self.group],
                                       columns=[job.name]):
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
        with pd.read_csv(self.path, sep=_csv_sep(self.path), usecols=[job.name], dtype=str,
                         keep_default_na=False, chunksize=_BATCH, compression="infer") as reader:
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
            for path in self.paths[start:start + _BATCH]:
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
            for i, v in enumerate(self.values[start:start + _BATCH], start=self.first_row + start):
                where = _where(None, i)
                if not self.extracted:
                    v = _field_of(v, job.name, where)
                elif v is None:
                    raise ValueError(f"{where}missing value (null) in {job.name!r}")
                out.append(_check_value(v, job.chat, where, job.name))
            yield out


_Piece = _JsonlRange | _ParquetGroup | _ArrowFile | _CsvFile | _TextFiles | _Records


def _measure_piece(piece: _Piece, job: _Job, encoder: _Encoder) -> MeasuredPiece:
    """Tokenize one piece: its per-sample lengths (if asked) and its histogram."""
    parts = []
    for values in piece.batches(job):
        if values:
            parts.append(encoder.chats(values) if job.chat else encoder.texts(values))
    lengths = np.concatenate(parts) if parts else np.empty(0, np.int64)
    if lengths.size:
        distinct, counts = np.unique(lengths, return_counts=True)
    else:
        distinct, counts = lengths, lengths
    per_sample = None
    if job.want_lengths:
        if lengths.size and int(distinct[-1]) > _INT32_MAX:
            raise ValueError(f"{piece.label()}: a sample of {int(distinct[-1])} tokens does not "
                             "fit the int32 lengths of out=")
        per_sample = lengths.astype(np.int32)
    return MeasuredPiece(piece.label(), int(lengths.size), int(lengths.sum()), per_sample,
                         (distinct.astype(np.int64), counts.astype(np.int64)))


# Worker processes (spawned): the job and its encoder, built once per process.
_WORKER: tuple[_Job, _Encoder] | None = None
# Dask workers: encoders by tokenizer digest, built once per worker process.
_DASK_ENCODERS: dict[str, _Encoder] = {}


def _init_worker(job: _Job) -> None:
    global _WORKER
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # the processes are the parallelism
    _WORKER = (job, _Encoder(job.spec))


def _worker_measure(piece: _Piece) -> MeasuredPiece:
    assert _WORKER is not None
    return _measure_piece(piece, *_WORKER)


def _dask_measure(piece: _Piece, job: _Job) -> MeasuredPiece:
    key = job.spec.digest or str(id(job.spec))
    encoder = _DASK_ENCODERS.get(key)
    if encoder is None:
        encoder = _DASK_ENCODERS[key] = _Encoder(job.spec)
    return _measure_piece(piece, job, encoder)


# ---------------------------------------------------------------------------- planning
@dataclass
class _Plan:
    pieces: Iterable[_Piece]
    where: str  # names the whole source in messages
    n_bytes: int | None  # None: an in-memory source of unknown size
    shards: list[tuple[str, int, int, str]] | None  # (path, size, mtime_ns, hash); None: no cache
    small: bool  # a single piece, or a few bytes: not worth worker processes


def _expand(source: str | os.PathLike[str]) -> tuple[str, list[Path]]:
    """A path, directory (all files below it) or glob -> its files, in sorted order."""
    text = os.path.expanduser(os.fspath(source))
    path = Path(text)
    if path.is_file():
        return text, [path]
    if path.is_dir():
        found = [p for p in sorted(path.rglob("*")) if p.is_file()
                 and not any(part.startswith(".") for part in p.relative_to(path).parts)]
        if not found:
            raise ValueError(f"{text}: empty directory, no files")
        return text, found
    if _GLOB_CHARS.search(text):
        found = [Path(p) for p in sorted(glob.glob(text, recursive=True)) if Path(p).is_file()]
        if not found:
            raise ValueError(f"{text}: no files match this pattern")
        return text, found
    raise ValueError(f"{text}: no such file or directory")


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


def _is_saved_dataset(path: Path) -> bool:
    return path.is_dir() and (path / "state.json").is_file() and \
        (path / "dataset_info.json").is_file()


def _plan_paths(source: str | os.PathLike[str], name: str | None, chat: bool,
                hashing: bool) -> tuple[_Plan, str | None]:
    """Plan a path source; also return the field name resolved from a table's schema."""
    root = Path(os.path.expanduser(os.fspath(source)))
    if root.is_dir() and (root / "dataset_dict.json").is_file():
        splits = json.loads((root / "dataset_dict.json").read_text()).get("splits", [])
        raise ValueError(f"{root}: a DatasetDict; pass one split's folder: "
                         f"{', '.join(str(root / s) for s in splits)}")
    if _is_saved_dataset(root):
        state = json.loads((root / "state.json").read_text())
        files = [root / f["filename"] for f in state.get("_data_files", [])]
        text = str(root)
        kinds = {"arrow"}
    else:
        text, files = _expand(source)
        kinds = {_kind(p) for p in files}
    if len(kinds) > 1:
        raise ValueError(f"{text}: mixes {' and '.join(sorted(kinds))} files; measure one "
                         "format at a time")
    kind = kinds.pop()
    if kind == "text" and (name is not None or chat):
        raise ValueError(f"{text}: plain-text files are one sample each; field= and chat_field= "
                         "apply to JSONL, Parquet, CSV/TSV and datasets")
    if kind == "csv" and chat:
        raise ValueError(f"{text}: chat_field= needs JSONL, Parquet or a dataset (a CSV cell "
                         "holds text, not a list of messages)")
    pieces: list[_Piece] = []
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
            pieces += [_JsonlRange(str(path), s, stop, line)
                       for (s, line), stop in zip(starts, [*stops, None], strict=True)]
        elif kind == "parquet":
            name, sizes = _parquet_groups(path, name, chat)
            for g, n in enumerate(sizes):
                pieces.append(_ParquetGroup(str(path), g, row))
                row += n
            row = 0
        elif kind == "arrow":
            name, n = _arrow_rows(path, name, chat)
            pieces.append(_ArrowFile(str(path), row))
            row += n
        elif kind == "csv":
            name = _csv_column(path, name)
            pieces.append(_CsvFile(str(path)))
        else:
            group.append(str(path))
            group_bytes += stat.st_size
            if group_bytes >= _TEXT_PIECE_BYTES or len(group) >= _TEXT_PIECE_FILES:
                pieces.append(_TextFiles(tuple(group)))
                group, group_bytes = [], 0
    if group:
        pieces.append(_TextFiles(tuple(group)))
    plan = _Plan(pieces, text, n_bytes, shards if hashing else None,
                 small=len(pieces) < 2 or n_bytes < _SMALL_INPUT_BYTES)
    return plan, name


def _pick_name(columns: list[str], name: str | None, where: str) -> str:
    if name is not None:
        if name not in columns:
            raise ValueError(f"{where}: no column {name!r}; columns: {', '.join(columns)}")
        return name
    if len(columns) == 1:
        return columns[0]
    raise ValueError(f"{where}: {len(columns)} columns ({', '.join(columns)}); pass field= "
                     "(text) or chat_field= (messages)")


def _check_arrow_type(kind: Any, name: str, chat: bool, where: str) -> None:
    import pyarrow as pa

    if chat:
        ok = pa.types.is_list(kind) or pa.types.is_large_list(kind)
        expected = "a list of {role, content} structs"
    else:
        ok = pa.types.is_string(kind) or pa.types.is_large_string(kind) or \
            getattr(pa.types, "is_string_view", lambda _: False)(kind)
        expected = "strings"
    if not ok:
        raise ValueError(f"{where}: column {name!r} has type {kind}; expected {expected}")


def _parquet_groups(path: Path, name: str | None, chat: bool) -> tuple[str, list[int]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        file = pq.ParquetFile(path, pre_buffer=False)
    except pa.ArrowException as err:
        raise ValueError(f"{path}: cannot read as Parquet: {' '.join(str(err).split())}") \
            from None
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
        raise ValueError(f"{path}: cannot read a saved dataset shard: "
                         f"{' '.join(str(err).split())}") from None
    name = _pick_name(list(table.schema.names), name, str(path))
    _check_arrow_type(table.schema.field(name).type, name, chat, str(path))
    return name, table.num_rows


def _csv_column(path: Path, name: str | None) -> str:
    import pandas as pd

    try:
        columns = list(map(str, pd.read_csv(path, sep=_csv_sep(str(path)), nrows=0,
                                            compression="infer").columns))
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError, OSError) as err:
        raise ValueError(f"{path}: cannot read the header: {' '.join(str(err).split())}") \
            from None
    return _pick_name(columns, name, str(path))


def _plan_records(source: Iterable[Any], name: str | None) -> _Plan:
    """An in-memory source: a ``datasets.Dataset`` (read by columns) or any iterable."""
    if _is_instance(source, "datasets", "Dataset"):
        dataset: Any = source  # a datasets.Dataset: sized, indexable, with column_names
        column = _pick_name(list(dataset.column_names), name, "the dataset")

        def dataset_pieces() -> Iterator[_Piece]:
            for start in range(0, len(dataset), _RECORDS_PER_PIECE):
                batch = dataset[start:start + _RECORDS_PER_PIECE][column]
                yield _Records(list(batch), start, extracted=True)

        return _Plan(dataset_pieces(), "the dataset", None, None,
                     small=len(dataset) <= _RECORDS_PER_PIECE)
    if isinstance(source, str | bytes | dict):
        raise ValueError(f"source: expected a path, a dataset or an iterable of samples, got a "
                         f"{type(source).__name__} (a path must be a pathlib.Path or exist)")
    iterator = iter(source)
    first = list(itertools.islice(iterator, _RECORDS_PER_PIECE))

    def record_pieces() -> Iterator[_Piece]:
        start, batch = 0, first
        while batch:
            yield _Records(batch, start, extracted=False)
            start += len(batch)
            batch = list(itertools.islice(iterator, _RECORDS_PER_PIECE))

    return _Plan(record_pieces(), "the input", None, None,
                 small=len(first) < _RECORDS_PER_PIECE)


# ---------------------------------------------------------------------------- running
def _ordered(submit: Callable[[_Piece], Any], pieces: Iterable[_Piece],
             window: int) -> Iterator[MeasuredPiece]:
    """Results of ``submit(piece)`` futures in submission order, at most ``window`` in flight."""
    pending: deque[Any] = deque()
    try:
        for piece in pieces:
            pending.append(submit(piece))
            if len(pending) >= window:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for future in pending:
            future.cancel()


def _run_local(plan: _Plan, job: _Job, processes: int) -> Iterator[MeasuredPiece]:
    if processes <= 1:
        encoder = _Encoder(job.spec)
        for piece in plan.pieces:
            yield _measure_piece(piece, job, encoder)
        return
    context = multiprocessing.get_context("spawn")  # no fork of a threaded Rust tokenizer
    with ProcessPoolExecutor(max_workers=processes, mp_context=context,
                             initializer=_init_worker, initargs=(job,)) as pool:
        yield from _ordered(lambda piece: pool.submit(_worker_measure, piece), plan.pieces,
                            window=2 * processes)


def _run_dask(plan: _Plan, job: _Job, client: Any) -> Iterator[MeasuredPiece]:
    [job_future] = client.scatter([job], broadcast=True, hash=False)
    n_threads = sum(client.nthreads().values()) or 1
    try:
        yield from _ordered(lambda piece: client.submit(_dask_measure, piece, job_future,
                                                        pure=False),
                            plan.pieces, window=max(16, 4 * n_threads))
    finally:
        job_future.release()


def _check_out(out: Path) -> None:
    if not out.name.lower().endswith((".npy", ".parquet")):
        raise ValueError(f"{out}: out= must end in .npy or .parquet")
    if not out.parent.is_dir():
        raise ValueError(f"{out}: no such directory {out.parent}")


class _OutWriter:
    """Per-sample lengths streamed to a temporary file beside ``out``, renamed at the end."""

    def __init__(self, out: Path) -> None:
        _check_out(out)
        self.out = out
        self.parquet = out.name.lower().endswith(".parquet")
        fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
        self.tmp = Path(tmp)
        self.handle: Any = os.fdopen(fd, "wb")
        self.n = 0
        self.writer: Any = None

    def write(self, lengths: np.ndarray) -> None:
        if self.parquet:
            import pyarrow as pa
            import pyarrow.parquet as pq

            table = pa.table({"sample_id": np.arange(self.n, self.n + lengths.size, dtype=np.int64),
                              "length": lengths.astype(np.int32, copy=False)})
            if self.writer is None:
                self.writer = pq.ParquetWriter(self.handle, table.schema)
            if table.num_rows:
                self.writer.write_table(table)
        else:
            self.handle.write(lengths.astype("<i4", copy=False).tobytes())
        self.n += int(lengths.size)

    def commit(self) -> None:
        if self.parquet:
            if self.writer is None:
                self.write(np.empty(0, np.int32))
            self.writer.close()
            self.handle.close()
        else:
            self.handle.close()
            fd, final = tempfile.mkstemp(prefix=f".{self.out.name}.", suffix=".tmp",
                                         dir=self.out.parent)
            with os.fdopen(fd, "wb") as dest, open(self.tmp, "rb") as raw:
                np.lib.format.write_array_header_1_0(
                    dest, {"descr": "<i4", "fortran_order": False, "shape": (self.n,)})
                shutil.copyfileobj(raw, dest, 1 << 22)
            self.tmp.unlink()
            self.tmp = Path(final)
        os.replace(self.tmp, self.out)

    def abort(self) -> None:
        try:
            if self.writer is not None:
                self.writer.close()
            self.handle.close()
        finally:
            self.tmp.unlink(missing_ok=True)


def _cache_key(plan: _Plan, job: _Job) -> str | None:
    if plan.shards is None or job.spec.digest is None:
        return None
    options = {"version": _CACHE_VERSION, "name": job.name, "chat": job.chat,
               "add_special_tokens": job.spec.add_special_tokens, "tokenizer": job.spec.digest,
               "shards": [(size, mtime, digest) for _, size, mtime, digest in plan.shards]}
    return _sha(json.dumps(options, sort_keys=True))


def _atomic_save(path: Path, save: Callable[[io.BufferedWriter], None]) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            save(handle)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _cache_read(cache_dir: Path, key: str, out: Path | None) -> LengthHistogram | None:
    hist_path, samples_path = cache_dir / f"{key}.npz", cache_dir / f"{key}.lengths.npy"
    if not hist_path.is_file() or (out is not None and not samples_path.is_file()):
        return None
    with np.load(hist_path) as stored:
        hist = LengthHistogram(stored["lengths"], stored["counts"])
    if out is not None:
        samples = np.load(samples_path, mmap_mode="r")
        writer = _OutWriter(out)
        try:
            for start in range(0, samples.shape[0], 1 << 22):
                writer.write(np.asarray(samples[start:start + (1 << 22)]))
            writer.commit()
        except BaseException:
            writer.abort()
            raise
    return hist


def _cache_write(cache_dir: Path, key: str, hist: LengthHistogram, out: Path | None) -> None:
    cache_dir.mkdir(parents=True, exist_ok=True)
    if out is not None:
        if out.name.lower().endswith(".npy"):
            def copy(handle: io.BufferedWriter) -> None:
                with open(out, "rb") as source:
                    shutil.copyfileobj(source, handle, 1 << 22)

            _atomic_save(cache_dir / f"{key}.lengths.npy", copy)
        else:
            import pyarrow.parquet as pq
            column = pq.read_table(out, columns=["length"]).column(0).to_numpy()
            _atomic_save(cache_dir / f"{key}.lengths.npy", lambda h: np.save(h, column))
    _atomic_save(cache_dir / f"{key}.npz",
                 lambda h: np.savez(h, lengths=hist.lengths, counts=hist.counts))


# ---------------------------------------------------------------------------- public API
def measure_lengths(
    source: Any,
    tokenizer: Any,
    *,
    field: str | None = None,
    chat_field: str | None = None,
    add_special_tokens: bool = True,
    out: str | os.PathLike[str] | None = None,
    processes: int | None = None,
    client: Any = None,
    cache: bool = True,
    cache_dir: str | os.PathLike[str] | None = None,
    progress: _Progress | None = None,
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
        (columns ``sample_id``, ``length``).  Written to a temporary file and renamed at the end.
    processes : int, optional
        Worker processes (spawned) on this machine; default ``os.cpu_count()``, and this
        process alone for a small input (one piece or under 8 MiB).  ``1``: this process.
    client : distributed.Client, optional
        Tokenize the pieces on a Dask cluster's workers (which must see the same paths) and
        merge their histograms exactly; ``processes`` is then unused.
    cache : bool, default True
        Reuse the stored result of an identical call (same shard contents, sizes and
        modification times, same tokenizer serialisation, same options) without tokenizing.
        In-memory sources and tokenizers that cannot be pickled are never cached.
    cache_dir : str or os.PathLike, optional
        Where results are stored; default :data:`DEFAULT_CACHE_DIR`.
    progress : callable, optional
        Wraps the iterable of :class:`MeasuredPiece` (each with ``where``, ``n_samples`` and
        ``n_tokens``) and yields them unchanged, e.g. a tqdm bar.  The engine draws nothing.

    Returns
    -------
    LengthHistogram
        Zero-length samples (an empty text without special tokens) are kept.

    Raises
    ------
    ValueError
        One line naming the file, the line or row, and the problem: no such file, mixed
        formats, a missing field or column, a value that is not a string (or not a list of
        role/content messages), invalid JSON, text that is not UTF-8, a tokenizer path that does
        not exist, no chat template for ``chat_field``.  Nothing is returned or written then.

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
    spec = _spec(tokenizer, add_special_tokens=add_special_tokens, chat=chat)
    out_path = None if out is None else Path(os.path.expanduser(os.fspath(out)))
    if out_path is not None:
        _check_out(out_path)
    if isinstance(source, str | os.PathLike):
        plan, name = _plan_paths(source, name, chat, hashing=cache)
    else:
        plan = _plan_records(source, name)
    job = _Job(spec, name, chat, want_lengths=out_path is not None)

    key = _cache_key(plan, job) if cache else None
    store = Path(os.path.expanduser(os.fspath(cache_dir or DEFAULT_CACHE_DIR)))
    if key is not None:
        hit = _cache_read(store, key, out_path)
        if hit is not None:
            return hit

    if client is not None:
        pieces = _run_dask(plan, job, client)
    else:
        n = (os.cpu_count() or 1) if processes is None else processes
        if plan.small and processes is None:
            n = 1
        if n > 1 and _pickle_or_none(job) is None:
            if processes is not None:
                raise ValueError("tokenizer: cannot be sent to worker processes (it cannot be "
                                 "pickled, e.g. a lambda); pass processes=1 or a module-level "
                                 "function")
            n = 1
        pieces = _run_local(plan, job, n)
    writer = _OutWriter(out_path) if out_path is not None else None
    counter = _Counter()
    try:
        stream = progress(pieces) if progress is not None else pieces
        for piece in stream:
            counter.add_counts(*piece._hist, where=piece.where or plan.where)
            if writer is not None and piece._lengths is not None:
                writer.write(piece._lengths)
        hist = counter.histogram(plan.where)
        if writer is not None:
            writer.commit()
            writer = None
    finally:
        if writer is not None:
            writer.abort()
        close = getattr(pieces, "close", None)
        if close is not None:
            close()
    if key is not None:
        _cache_write(store, key, hist, out_path)
    return hist


def load_lengths_distributed(source: str | os.PathLike[str], client: Any, *,
                             column: str | None = None, field: str | None = None,
                             allow_zero: bool = False) -> LengthHistogram:
    """:func:`analysis.load_lengths` of length files too many for one machine, on Dask.

    Each file of ``source`` (a file, a glob or a directory) is read by
    :func:`~analysis.load_lengths` on a worker of ``client`` (which must see the same paths),
    and the per-file histograms are merged exactly; the result equals
    ``load_lengths(source, ...)`` count for count.

    Parameters
    ----------
    source : str or os.PathLike
        Length files as :func:`~analysis.load_lengths` reads them.
    client : distributed.Client
        The cluster to read on.
    column, field, allow_zero
        As in :func:`~analysis.load_lengths`.

    Returns
    -------
    LengthHistogram
    """
    from analysis.loaders import load_lengths

    text, files = _expand(source)
    futures = [client.submit(load_lengths, str(p), column=column, field=field,
                             allow_zero=allow_zero, pure=False) for p in files]
    counter = _Counter()
    try:
        for future in futures:
            part = future.result()
            counter.add_counts(part.lengths, part.counts, text)
            future.release()
    finally:
        client.cancel(futures)
    return counter.histogram(text)
