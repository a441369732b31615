"""Writing ``out``: the per-sample lengths in source order, all or nothing.

``out`` is one file or a folder of per-shard files.  A file (``.npy`` int32, or Parquet with
``sample_id`` and ``length``) is streamed to a temporary file beside it and renamed onto it at
the end.  A folder gets one ``.npy`` per shard (piece) that has samples, ``{index:05d}.npy`` in
source order (written by the Dask worker that measured it, or here), and ``index.json``
listing the files with their sample counts; it is built in a temporary folder beside ``out``
and swapped in at the end, so ``load_lengths("out/*.npy")`` reads exactly one run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from analysis.measure._pieces import MeasuredPiece

#: Digits of a shard file's index in an ``out`` folder (more when there are more shards, so
#: that the sorted file names are in source order).
_SHARD_DIGITS = 5
#: The listing of an ``out`` folder: its files, with their sample counts, in source order.
INDEX = "index.json"
_SHARD_FILE = re.compile(r"[0-9]+\.npy")


def is_folder(out: str | os.PathLike[str]) -> bool:
    """``out`` names a folder: an existing one, a path ending in a separator, or no suffix."""
    text = os.fspath(out)
    path = Path(os.path.expanduser(text))
    return path.is_dir() or text.endswith(("/", os.sep)) or not path.suffix


def check_out(out: Path, folder: bool = False) -> None:
    if not folder and not out.name.lower().endswith((".npy", ".parquet")):
        raise ValueError(f"{out}: out= must end in .npy or .parquet, or name a folder")
    if not out.parent.is_dir():
        raise ValueError(f"{out}: no such directory {out.parent}")
    if folder and out.exists():
        if not out.is_dir():
            raise ValueError(
                f"{out}: exists and is not a folder; out= a folder gets per-shard "
                "files, a .npy or .parquet file one ordered file"
            )
        others = sorted(
            p.name for p in out.iterdir() if p.name != INDEX and not _SHARD_FILE.fullmatch(p.name)
        )
        if others:
            raise ValueError(
                f"{out}: holds {others[0]!r}; out= a folder must be empty or hold "
                "the lengths of an earlier run (NNNNN.npy and index.json)"
            )


def is_lengths_file(path: Path) -> bool:
    """Whether ``path`` holds per-sample lengths as ``out=`` writes them: a 1-D int32 ``.npy``,
    or a Parquet file whose columns are exactly ``sample_id`` and ``length`` (headers read only)."""
    try:
        if path.name.lower().endswith(".npy"):
            array = np.load(path, mmap_mode="r", allow_pickle=False)
            return bool(array.ndim == 1 and array.dtype == np.dtype("<i4"))
        import pyarrow.parquet as pq

        return list(pq.read_schema(path).names) == ["sample_id", "length"]
    except Exception:  # unreadable, or another format: not ours
        return False


def check_overwrite(out: Path, folder: bool, overwrite: bool) -> None:
    """Refuse a file ``out`` that exists and holds something other than lengths written by
    ``out=`` (an earlier run's output is replaced), unless ``overwrite``."""
    if overwrite or folder or not out.exists() or out.is_dir():
        return
    if not is_lengths_file(out):
        raise ValueError(
            f"{out}: exists and is not a lengths file written by an earlier run; choose another "
            "out= or pass --force (overwrite=True) to replace it"
        )


def check_not_input(out: Path, folder: bool, inputs: tuple[str, ...]) -> None:
    """Refuse an ``out`` that is one of the input files, or (a folder) holds one."""
    target = out.resolve()
    for name in inputs:
        path = Path(name)
        same = target == path.resolve() or (out.exists() and not folder and os.path.samefile(out, path))
        if same or (folder and target in path.resolve().parents):
            raise ValueError(
                f"{out}: is {'where the input' if folder else 'the input'} {name} "
                f"{'lies' if folder else 'itself'}; out= must not write over its own input"
            )


def temp_file(path: Path) -> tuple[int, str]:
    """A new hidden temporary file beside ``path`` (fd, name), with the permissions a plain
    ``open`` gives (0666 less the umask), where ``tempfile.mkstemp`` gives 0600."""
    while True:
        name = str(path.parent / f".{path.name}.{uuid.uuid4().hex[:12]}.tmp")
        try:
            return os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), name
        except FileExistsError:
            continue


def save_shard(path: str, lengths: np.ndarray) -> None:
    """One shard's lengths as ``.npy`` int32 (on a Dask worker, or here)."""
    np.save(path, lengths.astype("<i4", copy=False))


def open_out(out: Path, folder: bool) -> OutWriter | ShardFolder:
    return ShardFolder(out) if folder else OutWriter(out)


class ShardFolder:
    """Per-shard length files and their ``index.json``, built beside ``out``, swapped in."""

    def __init__(self, out: Path) -> None:
        check_out(out, folder=True)
        self.out = out
        self.tmp = out.parent / f".{out.name}.{uuid.uuid4().hex[:12]}.tmp"
        self.tmp.mkdir()  # not mkdtemp: the folder keeps the umask's permissions
        self.files: list[dict[str, Any]] = []
        self.n_pieces = 0
        self.n_samples = 0

    def path(self, index: int) -> str:
        """Where shard ``index`` (its place in source order) is written."""
        return str(self.tmp / f"{index:0{_SHARD_DIGITS}d}.npy")

    def add(self, piece: MeasuredPiece) -> None:
        """The next piece in source order: saved here, or already saved by its Dask worker."""
        path = self.path(self.n_pieces)
        self.n_pieces += 1
        if piece.n_samples == 0:  # no file: load_lengths refuses an empty one
            return
        if piece._lengths is not None:
            save_shard(path, piece._lengths)
        self._list(Path(path).name, piece.where, piece.n_samples)

    def replay(self, entries: list[dict[str, Any]], lengths: np.ndarray) -> None:
        """Write a stored run again: its ``index.json`` entries and all their lengths."""
        for entry in entries:
            start = int(entry["first_sample"])
            save_shard(
                str(self.tmp / entry["file"]), np.asarray(lengths[start : start + int(entry["n_samples"])])
            )
            self._list(entry["file"], entry["where"], int(entry["n_samples"]))

    def _list(self, name: str, where: str, n_samples: int) -> None:
        self.files.append(
            {"file": name, "where": where, "first_sample": self.n_samples, "n_samples": n_samples}
        )
        self.n_samples += n_samples

    def commit(self) -> None:
        if self.n_pieces > 10**_SHARD_DIGITS:  # wider names, so sorted is source order
            width = len(str(self.n_pieces - 1))
            for entry in self.files:
                name = f"{int(entry['file'].removesuffix('.npy')):0{width}d}.npy"
                os.replace(self.tmp / entry["file"], self.tmp / name)
                entry["file"] = name
        entries = ",\n".join(" " + json.dumps(entry, ensure_ascii=False) for entry in self.files)
        (self.tmp / INDEX).write_text(  # one line per file
            f'{{"n_samples": {self.n_samples}, "n_files": {len(self.files)}, "files": [\n{entries}\n]}}\n',
            encoding="utf-8",
        )
        old = None
        if self.out.exists():  # empty, or an earlier run's files: moved aside, then removed
            old = Path(tempfile.mkdtemp(prefix=f".{self.out.name}.", suffix=".old", dir=self.out.parent))
            os.replace(self.out, old / self.out.name)
        os.replace(self.tmp, self.out)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)

    def abort(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)  # a worker may still be writing into it


class OutWriter:
    """Per-sample lengths streamed to a temporary file beside ``out``, renamed at the end."""

    def __init__(self, out: Path) -> None:
        check_out(out)
        self.out = out
        self.parquet = out.name.lower().endswith(".parquet")
        fd, tmp = temp_file(out)
        self.tmp = Path(tmp)
        self.handle: Any = os.fdopen(fd, "wb")
        self.n = 0
        self.writer: Any = None

    def add(self, piece: MeasuredPiece) -> None:
        """The next piece in source order."""
        if piece._lengths is not None:
            self.write(piece._lengths)

    def write(self, lengths: np.ndarray) -> None:
        if self.parquet:
            import pyarrow as pa
            import pyarrow.parquet as pq

            table = pa.table(
                {
                    "sample_id": np.arange(self.n, self.n + lengths.size, dtype=np.int64),
                    "length": lengths.astype(np.int32, copy=False),
                }
            )
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
            fd, final = temp_file(self.out)
            with os.fdopen(fd, "wb") as dest, open(self.tmp, "rb") as raw:
                np.lib.format.write_array_header_1_0(
                    dest, {"descr": "<i4", "fortran_order": False, "shape": (self.n,)}
                )
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
