"""Progress bars for long work, shown to people and hidden from tests.

One rule decides whether a bar is drawn (:func:`progress_enabled`):

1. ``PADDING_QUIET=1`` (set by the CLI's ``--quiet`` and by ``analysis.report`` for the
   notebooks it executes) -> never.
2. ``PADDING_PROGRESS=1`` -> always (an explicit opt-in, e.g. a script whose stderr is a file).
3. Inside pytest (``PYTEST_CURRENT_TEST`` is set) -> never.
4. Otherwise: when stderr is a terminal, or in a notebook opened in a Jupyter server
   (JupyterLab, Notebook 7, VS Code via jupyter_server: the server starts each kernel with
   ``JPY_SESSION_NAME`` set).  Kernels started by nbval, papermill or nbconvert have neither
   a terminal nor that variable, so executed and validated notebooks never store a bar.

In a Jupyter kernel the bar is ``tqdm.auto`` (a widget); elsewhere the plain text bar on
stderr.  When disabled, :func:`progress` returns the iterable itself (no wrapper, no cost).

This module imports no project code, so the engine may use it (tqdm is a core dependency).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import Any, TypeVar

__all__ = ["progress", "progress_bar", "progress_enabled"]

T = TypeVar("T")
_TRUE = {"1", "true", "yes", "on"}


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in _TRUE


def _in_jupyter_session() -> bool:
    """True in a kernel started by a Jupyter server for an open notebook."""
    return bool(os.environ.get("JPY_SESSION_NAME")) and "ipykernel" in sys.modules


def progress_enabled() -> bool:
    """Whether progress bars are drawn now (see the module docstring for the rule).

    Examples
    --------
    >>> import os
    >>> os.environ["PADDING_QUIET"] = "1"
    >>> progress_enabled()
    False
    >>> del os.environ["PADDING_QUIET"]
    """
    if _flag("PADDING_QUIET"):
        return False
    if _flag("PADDING_PROGRESS"):
        return True
    if os.environ.get("PYTEST_CURRENT_TEST"):
        return False
    if _in_jupyter_session():
        return True
    stream = sys.stderr
    try:
        return bool(stream is not None and stream.isatty())
    except (AttributeError, ValueError):  # closed or replaced stream
        return False


def _tqdm_class() -> Any:
    if _in_jupyter_session():
        from tqdm.auto import tqdm
    else:
        from tqdm import tqdm
    return tqdm


def progress(iterable: Iterable[T], desc: str | None = None, total: int | None = None, *,
             unit: str = "it", enabled: bool | None = None) -> Iterable[T]:
    """``iterable`` wrapped in a tqdm bar when bars are enabled, else ``iterable`` itself.

    Parameters
    ----------
    iterable : iterable
        What to loop over.
    desc : str, optional
        Label shown left of the bar.
    total : int, optional
        Number of items, when ``len(iterable)`` doesn't tell.
    unit : str
        Unit name shown in the rate.
    enabled : bool, optional
        Force the bar on or off; ``None`` applies :func:`progress_enabled`.

    Examples
    --------
    >>> items = [1, 2, 3]
    >>> progress(items, "loading", enabled=False) is items
    True
    >>> sum(progress(items, "loading"))
    6
    """
    if not (progress_enabled() if enabled is None else enabled):
        return iterable
    return _tqdm_class()(iterable, desc=desc, total=total, unit=unit, leave=False)


class _NullBar:
    """Stands in for a tqdm bar when bars are disabled."""

    def update(self, n: int = 1) -> None:
        """Do nothing."""

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        """Do nothing."""

    def close(self) -> None:
        """Do nothing."""

    def __enter__(self) -> _NullBar:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def progress_bar(total: int | None = None, desc: str | None = None, *, unit: str = "it",
                 enabled: bool | None = None) -> Any:
    """A bar updated by hand (``with progress_bar(n, "epochs") as bar: bar.update()``).

    Returns a tqdm bar when enabled, else an object whose ``update``/``close`` do nothing.

    Examples
    --------
    >>> with progress_bar(3, "epochs", enabled=False) as bar:
    ...     bar.update(3)
    """
    if not (progress_enabled() if enabled is None else enabled):
        return _NullBar()
    return _tqdm_class()(total=total, desc=desc, unit=unit, leave=False)

