"""How the optimiser's kernel runs on threads: the lock that keeps two Python threads out of
numba's parallel code at once (a token budget's table of bounds, when it is large enough to
run on every thread: :func:`analysis.optimize._budget._bound_table`).
"""

from __future__ import annotations

import threading

# numba's default (workqueue) threading layer aborts the process when two Python threads enter
# parallel code at once (the explorer optimises in the background): threaded kernels take it
THREADS_LOCK = threading.Lock()
