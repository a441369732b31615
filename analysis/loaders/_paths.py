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

import fnmatch
import os
import re
import stat
from collections.abc import Iterator
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
        found = [p for p in _unique(_walk(path, ("**", "*"), frozenset(), path)) if not _in_report(p, path)]
        if not found:
            raise ValueError(f"{text}: empty directory, no files")
        return text, found
    if path.exists():
        raise ValueError(f"{text}: not a regular file (a FIFO, socket or device); pass a file")
    if _GLOB_CHARS.search(text):
        parts = path.parts
        first = next(i for i, part in enumerate(parts) if _GLOB_CHARS.search(part))
        shown = Path(*parts[:first]) if first else None  # relative matches stay relative
        walked = _unique(_walk(shown or Path("."), parts[first:], frozenset(), shown))
        found = [p for p in walked if not _in_report(p, shown or Path())]
        if not found:
            raise ValueError(f"{text}: no files match this pattern")
        return text, found
    raise ValueError(f"{text}: no such file or directory")


def _in_report(path: Path, root: Path) -> bool:
    """Whether a folder between ``root`` (itself excluded) and the file ``path`` is a report's."""
    below = path.parts[len(root.parts) : -1]
    return any((root.joinpath(*below[: i + 1]) / REPORT_MARKER).is_file() for i in range(len(below)))


def _walk(
    folder: Path, pattern: tuple[str, ...], above: frozenset[tuple[int, int]], base: Path | None
) -> Iterator[tuple[Path, tuple[int, int]]]:
    """The files below ``folder`` (shown as ``base``) matching ``pattern`` (glob segments;
    ``**`` any depth of folders), with their (device, inode), as glob matches them (a
    wildcard never matches a hidden name), following symbolic links to folders; ``**`` never
    enters a folder it is already inside (a loop: ``above`` holds them), a fixed depth ends
    by itself."""
    try:
        info = folder.stat()
    except OSError:
        return
    here = (info.st_dev, info.st_ino)
    segment, rest = pattern[0], pattern[1:]
    if segment == "**" and here in above:  # a link back to a folder above: a loop, walked once
        return
    above = above | {here}
    if segment == "**":
        yield from _walk(folder, rest or ("*",), above - {here}, base)
        for entry in _entries(folder):
            if not entry.name.startswith(".") and _is_dir(entry):
                yield from _walk(folder / entry.name, pattern, above, _join(base, entry.name))
        return
    if not _GLOB_CHARS.search(segment):
        try:
            child = os.stat(folder / segment)
        except OSError:
            return
        if rest and stat.S_ISDIR(child.st_mode):
            yield from _walk(folder / segment, rest, above, _join(base, segment))
        elif not rest and stat.S_ISREG(child.st_mode):
            yield _join(base, segment), (child.st_dev, child.st_ino)
        return
    for entry in _entries(folder):
        if not fnmatch.fnmatchcase(entry.name, segment):
            continue
        if entry.name.startswith(".") and not segment.startswith("."):
            continue
        if rest:
            if _is_dir(entry):
                yield from _walk(folder / entry.name, rest, above, _join(base, entry.name))
            continue
        try:
            if not entry.is_file():
                continue
            if entry.is_symlink():
                target = entry.stat()
                key = (target.st_dev, target.st_ino)
            else:
                key = (info.st_dev, entry.inode())
        except OSError:
            continue
        yield _join(base, entry.name), key


def pick_column(
    columns: list[str],
    name: str | None,
    where: str,
    *,
    noun: str = "column",
    hint: str = "pass column= (--column) naming the lengths column",
) -> str:
    """The column (or field) holding the values: ``name`` if present, else the only one.

    Examples
    --------
    >>> pick_column(["tokens"], None, "a.csv"), pick_column(["id", "tokens"], "tokens", "a.csv")
    ('tokens', 'tokens')
    >>> pick_column(["id", "tokens"], None, "a.csv")
    Traceback (most recent call last):
    ...
    ValueError: a.csv: 2 columns (id, tokens); pass column= (--column) naming the lengths column
    """
    if name is not None:
        if name not in columns:
            raise ValueError(f"{where}: no {noun} {name!r}; {noun}s: {', '.join(columns)}")
        return name
    if len(columns) == 1:
        return columns[0]
    raise ValueError(f"{where}: {len(columns)} {noun}s ({', '.join(columns)}); {hint}")


def _join(base: Path | None, name: str) -> Path:
    return Path(name) if base is None else base / name


def _entries(folder: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as found:
            return list(found)
    except OSError:
        return []


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()  # follows a symbolic link
    except OSError:
        return False


def _unique(found: Iterator[tuple[Path, tuple[int, int]]]) -> list[Path]:
    """The files ``found`` sorted, each once (the first name of a file reached by several)."""
    seen: set[tuple[int, int]] = set()
    unique = []
    for path, key in sorted(found):
        if key not in seen:
            seen.add(key)
            unique.append(path)
    return unique
