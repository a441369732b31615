"""A pytest plugin (``-p tests.kernel_files`` in pyproject's addopts): nbval's kernels keep
their files in a private folder, as the report's do (:func:`analysis.report._notebooks.kernel_config`):
Unix sockets in place of TCP ports, and the connection file.

Jupyter picks a kernel's TCP ports by binding and releasing them, so under xdist any other
process (another worker's kernel, Dask, a client's outgoing connection) can take one before
the kernel binds it, and the notebook's test errors after a minute.  nbval builds its
``KernelManager`` without configuration; this plugin hands each one its own.
"""

from __future__ import annotations

import contextlib
import itertools
from typing import Any

import pytest

from analysis.report._notebooks import kernel_config, kernel_folder

_FOLDER = pytest.StashKey[contextlib.ExitStack]()


def pytest_configure(config: pytest.Config) -> None:
    try:
        import nbval.kernel
    except ImportError:  # nbval not installed: nothing to configure
        return
    stack = contextlib.ExitStack()
    folder = stack.enter_context(kernel_folder())
    config.stash[_FOLDER] = stack
    manager, names = nbval.kernel.KernelManager, (f"kernel{n}" for n in itertools.count(1))

    def configured(**kwargs: Any) -> Any:
        return manager(config=kernel_config(folder, next(names)), **kwargs)

    nbval.kernel.KernelManager = configured  # type: ignore[misc,assignment]  # nbval's one use


def pytest_unconfigure(config: pytest.Config) -> None:
    stack = config.stash.get(_FOLDER, None)
    if stack is not None:
        stack.close()
