"""A pytest plugin (``-p tests.kernel_sockets`` in pyproject's addopts): nbval's kernels take
Unix sockets in a private folder, as the report's do (:func:`analysis.report._notebooks.kernel_sockets`).

Jupyter picks a kernel's TCP ports by binding and releasing them, so under xdist any other
process (another worker's kernel, Dask, a client's outgoing connection) can take one before
the kernel binds it, and the notebook's test errors after a minute.  nbval builds its
``KernelManager`` without configuration; this plugin hands it one.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

from analysis.report._notebooks import kernel_sockets

_SOCKETS = pytest.StashKey[contextlib.ExitStack]()


def pytest_configure(config: pytest.Config) -> None:
    try:
        import nbval.kernel
    except ImportError:  # nbval not installed: nothing to configure
        return
    stack = contextlib.ExitStack()
    settings = stack.enter_context(kernel_sockets())
    config.stash[_SOCKETS] = stack
    if settings is None:
        return
    manager = nbval.kernel.KernelManager

    def configured(**kwargs: Any) -> Any:
        return manager(config=settings, **kwargs)

    nbval.kernel.KernelManager = configured  # type: ignore[misc,assignment]  # nbval's one use


def pytest_unconfigure(config: pytest.Config) -> None:
    stack = config.stash.get(_SOCKETS, None)
    if stack is not None:
        stack.close()
