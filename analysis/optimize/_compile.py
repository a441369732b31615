"""How the optimiser's kernel runs on threads: one Python function compiled twice (serial and
threaded), and the lock that keeps two Python threads out of numba's parallel code at once.

numba treats ``numba.prange`` as ``range`` when a function is compiled with
``parallel=False``, so a loop written once with ``prange`` gives both kernels: the serial one
and the one on every thread, with the same arithmetic in every cell.
"""

from __future__ import annotations

import contextlib
import threading
import types
from collections.abc import Callable
from typing import Any

import numba

# numba's default (workqueue) threading layer aborts the process when two Python threads enter
# parallel code at once (the explorer optimises in the background): threaded kernels take it
_THREADS_LOCK = threading.Lock()


def threads_lock(threaded: bool) -> contextlib.AbstractContextManager[Any]:
    """``_THREADS_LOCK`` around a threaded kernel's call, nothing around a serial one."""
    return _THREADS_LOCK if threaded else contextlib.nullcontext()


def serial_and_threaded(body: Callable[..., Any]) -> tuple[Any, Any]:
    """``body`` (its parallel loops written with ``numba.prange``) compiled serial and on every
    thread, each cached on disk.  numba's cache file is named after the function's qualified
    name, so the threaded one is compiled from a copy named ``<name>_threads``: two compilations
    of one function would share one cache file, the second loading the first's code."""
    name = f"{body.__name__}_threads"
    twin = types.FunctionType(body.__code__, body.__globals__, name, body.__defaults__, body.__closure__)
    twin.__qualname__ = name
    twin.__doc__ = body.__doc__
    options: dict[str, Any] = {"cache": True, "nogil": True, "error_model": "numpy"}
    return numba.njit(**options)(body), numba.njit(parallel=True, **options)(twin)
