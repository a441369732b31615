"""Which files a path names, and which column of a table holds the values.

The one path expander of the package (:func:`analysis.loaders.load_lengths` and
:func:`analysis.measure.measure_lengths` both use it) and the one column picker (tables,
JSON objects, datasets).

A path names: a file (itself); a directory (every file below it, in sorted order, hidden
files and folders skipped), as a folder of shards is usually handed over; or a glob
(``"shards/*.parquet"``, ``**`` recurses) of files, in sorted order.  A report's own folder
(marked by :data:`analysis.paths.REPORT_MARKER`) below the folder or the glob's fixed part is
skipped: a report written among its inputs is never read as one.
"""

from __future__ import annotations

import glob
import itertools
import os
import re
from pathlib import Path

from analysis.paths import REPORT_MARKER

__all__ = ["expand_paths", "pick_column"]

_GLOB_CHARS = re.compile(r"[*?\[]")


def expand_paths(source: str | os.PathLike[str]) -> tuple[str, list[Path]]:
    """``source`` (``~`` expanded) as text for messages, and the files it names, sorted.

    Raises
    ------
    ValueError
        An empty path, a FIFO/socket/device, an empty directory, a glob matching no file, or
        a path that does not exist.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> for name in ("b.npy", "a.npy", "sub/c.npy", ".hidden/d.npy"):
    ...     (d / name).parent.mkdir(exist_ok=True)
    ...     _ = (d / name).write_bytes(b"")
    >>> [p.relative_to(d).as_posix() for p in expand_paths(d)[1]]
    ['a.npy', 'b.npy', 'sub/c.npy']
    >>> [p.name for p in expand_paths(f"{d}/*.npy")[1]]
    ['a.npy', 'b.npy']
    >>> expand_paths(d / "nope.csv")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: .../nope.csv: no such file or directory
    """
    text = os.path.expanduser(os.fspath(source))
    if not text.strip():
        raise ValueError("source is an empty path; pass a file such as data/lengths.csv")
    path = Path(text)
    if path.is_file():
        return text, [path]
    if path.is_dir():
        found = [
            p
            for p in sorted(path.rglob("*"))
            if p.is_file()
            and not any(part.startswith(".") for part in p.relative_to(path).parts)
            and not _in_report(p, path)
        ]
        if not found:
            raise ValueError(f"{text}: empty directory, no files")
        return text, found
    if path.exists():
        raise ValueError(f"{text}: not a regular file (a FIFO, socket or device); pass a file")
    if _GLOB_CHARS.search(text):
        fixed = Path(*itertools.takewhile(lambda part: not _GLOB_CHARS.search(part), path.parts))
        found = [
            Path(p)
            for p in sorted(glob.glob(text, recursive=True))
            if Path(p).is_file() and not _in_report(Path(p), fixed)
        ]
        if not found:
            raise ValueError(f"{text}: no files match this pattern")
        return text, found
    raise ValueError(f"{text}: no such file or directory")


def _in_report(path: Path, root: Path) -> bool:
    """Whether a folder between ``root`` (itself excluded) and the file ``path`` is a report's."""
    below = path.parts[len(root.parts) : -1]
    return any((root.joinpath(*below[: i + 1]) / REPORT_MARKER).is_file() for i in range(len(below)))


def pick_column(
    columns: list[str],
    name: str | None,
    where: str,
    *,
    noun: str = "column",
    hint: str = "pass column= naming the lengths column",
) -> str:
    """The column (or field) holding the values: ``name`` if present, else the only one.

    Examples
    --------
    >>> pick_column(["tokens"], None, "a.csv"), pick_column(["id", "tokens"], "tokens", "a.csv")
    ('tokens', 'tokens')
    >>> pick_column(["id", "tokens"], None, "a.csv")
    Traceback (most recent call last):
    ...
    ValueError: a.csv: 2 columns (id, tokens); pass column= naming the lengths column
    """
    if name is not None:
        if name not in columns:
            raise ValueError(f"{where}: no {noun} {name!r}; {noun}s: {', '.join(columns)}")
        return name
    if len(columns) == 1:
        return columns[0]
    raise ValueError(f"{where}: {len(columns)} {noun}s ({', '.join(columns)}); {hint}")
