"""The padding workbench: how much padding your batching costs, and where bucket edges go.

The engine (everything importable from here) is pure NumPy/pandas: it never imports
matplotlib or Jupyter.  Figures live in :mod:`analysis.plots`.
"""

from importlib.metadata import PackageNotFoundError, version

from analysis import (case, lengths, loaders, measure, optimize, simulate, strategies, synthetic,
                      throughput, waste)

# Each engine module's ``__all__`` is re-exported here.  The lists are read before the star
# imports because ``from analysis.simulate import *`` rebinds ``simulate`` to the function.
_EXPORTS = [*lengths.__all__, *loaders.__all__, *waste.__all__, *throughput.__all__,
            *strategies.__all__, *simulate.__all__, *optimize.__all__, *synthetic.__all__,
            *case.__all__, *measure.__all__]

from analysis.case import *  # noqa: E402, F403
from analysis.lengths import *  # noqa: E402, F403
from analysis.loaders import *  # noqa: E402, F403
from analysis.measure import *  # noqa: E402, F403
from analysis.optimize import *  # noqa: E402, F403
from analysis.simulate import *  # noqa: E402, F403
from analysis.strategies import *  # noqa: E402, F403
from analysis.synthetic import *  # noqa: E402, F403
from analysis.throughput import *  # noqa: E402, F403
from analysis.waste import *  # noqa: E402, F403

try:
    __version__ = version("padding-workbench")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0+unknown"

__all__ = [*_EXPORTS, "__version__"]  # plus the lazy `explore` (not star-exported: it loads ipywidgets)


def __getattr__(name: str):  # noqa: ANN202 - module-level lazy attribute (PEP 562)
    """``analysis.explore`` imports ipywidgets only when the explorer is first used."""
    if name == "explore":
        from analysis.explorer import explore

        return explore
    raise AttributeError(f"module 'analysis' has no attribute {name!r}")
