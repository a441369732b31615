"""The package's version, read once from its installed metadata (``0+unknown`` in a bare
source tree); ``analysis.__version__`` and the report's ``recommendation.json`` show it."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

__all__ = ["__version__"]

try:
    __version__ = version("padding-workbench")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0+unknown"
