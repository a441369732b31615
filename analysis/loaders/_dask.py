"""Length files too many for one machine: read on a Dask cluster, merged exactly."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, Protocol

from analysis.counting import LengthCounter
from analysis.lengths import LengthHistogram
from analysis.loaders._formats import load_file
from analysis.loaders._paths import expand_paths

__all__ = ["DaskClient", "load_lengths_distributed"]


class DaskClient(Protocol):
    """What the workbench uses of a ``distributed.Client`` (here and in :mod:`analysis.measure`)."""

    def submit(self, func: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any: ...

    def cancel(self, futures: Any, /) -> Any: ...

    def scatter(self, data: Any, /, **kwargs: Any) -> Any: ...

    def nthreads(self) -> Any: ...


def load_lengths_distributed(
    source: str | os.PathLike[str],
    client: DaskClient,
    *,
    column: str | None = None,
    field: str | None = None,
    allow_zero: bool = False,
) -> LengthHistogram:
    """:func:`analysis.load_lengths` of length files too many for one machine, on Dask.

    Each file of ``source`` (a file, a glob or a directory) is read on a worker of ``client``
    (which must see the same paths), and the per-file histograms are merged exactly; the
    result equals ``load_lengths(source, ...)`` count for count.

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
    text, files = expand_paths(source)
    futures = [
        client.submit(load_file, p, column=column, field=field, allow_zero=allow_zero, pure=False)
        for p in files
    ]
    counter = LengthCounter()
    try:
        for future in futures:
            part = future.result()
            counter.add_counts(part.lengths, part.counts, text)
            future.release()
    finally:
        client.cancel(futures)
    return counter.histogram(text)
