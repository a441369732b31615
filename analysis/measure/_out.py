"""Writing ``out``: the per-sample lengths in source order, all or nothing.

Lengths stream to a temporary file beside ``out`` (``.npy`` int32, or Parquet with
``sample_id`` and ``length``), renamed onto ``out`` only when every piece was measured.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np


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

