"""How the optimiser's kernel runs on threads: the lock that keeps two Python threads out of
numba's parallel code at once (the token budget's table of bounds runs on every thread).
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

# numba's default (workqueue) threading layer aborts the process when two Python threads enter
# parallel code at once (the explorer optimises in the background): threaded kernels take it
_THREADS_LOCK = threading.Lock()


def threads_lock(threaded: bool) -> contextlib.AbstractContextManager[Any]:
    """``_THREADS_LOCK`` around a threaded kernel's call, nothing around a serial one."""
    return _THREADS_LOCK if threaded else contextlib.nullcontext()
