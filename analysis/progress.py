"""Progress bars for the faces: a wrapper the engine's ``progress=`` parameters accept.

The engine never draws; a face (the CLI, the report, a notebook) passes ``progress=bar()``.
:func:`bar` decides once: a bar when stderr is a terminal or the code runs in a notebook
opened in a Jupyter server (the server sets ``JPY_SESSION_NAME`` for its kernels; nbval,
papermill and nbconvert kernels have neither, so stored outputs never hold a bar).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

__all__ = ["bar"]

T = TypeVar("T")


def _in_jupyter_session() -> bool:
    """True in a kernel started by a Jupyter server for an open notebook."""
    return bool(os.environ.get("JPY_SESSION_NAME")) and "ipykernel" in sys.modules


def _interactive() -> bool:
    if _in_jupyter_session():
        return True
    try:
        return bool(sys.stderr is not None and sys.stderr.isatty())
    except (AttributeError, ValueError):  # closed or replaced stream
        return False


def bar(enabled: bool | None = None) -> Callable[..., Iterable[Any]] | None:
    """A ``progress(iterable, desc)`` wrapper drawing a tqdm bar, or ``None`` (no bar) when
    ``enabled`` is False, or when it is None and nobody is watching (see the module docstring).

    Examples
    --------
    >>> bar(enabled=False) is None
    True
    >>> import io
    >>> wrap = bar(enabled=True)
    >>> list(wrap(range(3), "counting", file=io.StringIO()))
    [0, 1, 2]
    """
    if enabled is False or (enabled is None and not _interactive()):
        return None
    if _in_jupyter_session():
        from tqdm.auto import tqdm
    else:
        from tqdm import tqdm

    def wrap(iterable: Iterable[T], desc: str | None = None, **kwargs: Any) -> Iterable[T]:
        return tqdm(iterable, desc=desc, leave=False, dynamic_ncols=True, **kwargs)  # type: ignore[no-any-return]

    return wrap
