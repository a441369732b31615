"""A floor on one measure of a plan (:class:`Floor`), and how a frontier search met it
(:class:`FloorChoice`).

The measure a floor names is the one it floors, on every face: ``"efficiency"`` (useful over
padded tokens: the padding objective's), ``"budget_fill"`` (useful over the steps' tokens:
what a token budget's edges are placed for), ``"mixing"`` (the share of the data's length
variance a batch keeps) or, with a gradient-noise model, ``"effective_batch"`` (the share of
the batch a plan keeps, ``B_eff / B = 1 / (1 + (B - 1) ρ)``:
:func:`analysis.timing.noise.effective_batch_share`, the design-effect form; a floor on it is a
floor on ``1 - ρ``).  ``min_efficiency=``, ``min_budget_fill=``, ``min_mixing=`` and
``min_effective_batch=`` are shorthands for ``floor=Floor(...)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from analysis.tables import format_percent

__all__ = ["FLOOR_MEASURES", "Floor", "FloorChoice", "as_floor", "parse_share"]

#: The measures a :class:`Floor` may name.
FLOOR_MEASURES = ("efficiency", "budget_fill", "mixing", "effective_batch")


@dataclass(frozen=True)
class Floor:
    """At least ``value`` (in ``(0, 1]``) of ``measure`` (one of :data:`FLOOR_MEASURES`).

    Examples
    --------
    >>> f = Floor("budget_fill", 0.7)
    >>> f.keyword, f.option, f.text
    ('min_budget_fill', '--min-budget-fill', 'budget fill of at least 70.0%')
    >>> Floor("padding", 0.5)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: a floor's measure must be one of efficiency, budget_fill, mixing, effective_batch, got ...
    """

    measure: str
    value: float

    def __post_init__(self) -> None:
        if self.measure not in FLOOR_MEASURES:
            raise ValueError(
                f"a floor's measure must be one of {', '.join(FLOOR_MEASURES)}, got {self.measure!r}"
            )
        v = self.value
        if isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v <= 1:
            raise ValueError(f"{self.keyword} must be a number in (0, 1], got {v!r}")
        object.__setattr__(self, "value", float(v))

    @property
    def keyword(self) -> str:
        """The keyword that gives it: ``min_efficiency``, ``min_budget_fill``, ``min_mixing``,
        ``min_effective_batch``."""
        return f"min_{self.measure}"

    @property
    def option(self) -> str:
        """The command-line option that gives it (``--min-budget-fill``)."""
        return "--" + self.keyword.replace("_", "-")

    @property
    def words(self) -> str:
        """The measure in words (``budget fill``)."""
        return self.measure.replace("_", " ")

    @property
    def text(self) -> str:
        """``budget fill of at least 70.0%``."""
        return f"{self.words} of at least {format_percent(self.value, 1)}"


def parse_share(text: str) -> float:
    """A floor's value as typed (the CLI's ``--min-*`` options, the explorer's floor box): a
    number in ``(0, 1]`` (``0.9``) or a percentage (``90%``).

    Examples
    --------
    >>> parse_share("0.3"), parse_share(" 90% ")
    (0.3, 0.9)
    >>> parse_share("120%")
    Traceback (most recent call last):
    ...
    ValueError: expected a number in (0, 1] or a percentage, got '120%'
    """
    clean = text.strip()
    message = f"expected a number in (0, 1] or a percentage, got {text!r}"
    try:
        value = float(clean[:-1]) / 100 if clean.endswith("%") else float(clean)
    except ValueError:
        raise ValueError(message) from None
    if not 0 < value <= 1:  # NaN fails too
        raise ValueError(message)
    return value


def as_floor(
    floor: Floor | None = None,
    *,
    min_efficiency: float | None = None,
    min_budget_fill: float | None = None,
    min_mixing: float | None = None,
    min_effective_batch: float | None = None,
) -> Floor | None:
    """The one floor given, as ``floor=`` or as one ``min_*`` keyword (None: no floor).

    Examples
    --------
    >>> as_floor(min_mixing=0.2), as_floor()
    (Floor(measure='mixing', value=0.2), None)
    >>> as_floor(min_efficiency=0.9, min_mixing=0.2)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: give one floor (floor, min_efficiency, ..., min_mixing or min_effective_batch), not 2
    """
    given: list[Floor] = []
    if floor is not None:
        if not isinstance(floor, Floor):
            raise ValueError(f"floor must be a Floor, got {type(floor).__name__}")
        given.append(floor)
    for measure, value in (
        ("efficiency", min_efficiency),
        ("budget_fill", min_budget_fill),
        ("mixing", min_mixing),
        ("effective_batch", min_effective_batch),
    ):
        if value is not None:
            given.append(Floor(measure, value))
    if len(given) > 1:
        raise ValueError(
            "give one floor (floor, min_efficiency, min_budget_fill, min_mixing or min_effective_batch), "
            f"not {len(given)}"
        )
    return given[0] if given else None


@dataclass(frozen=True, kw_only=True)
class FloorChoice:
    """How a plan was picked for a :class:`Floor` among the plans of ``K`` buckets.

    ``floor`` is the floor.  ``exact``: the plan is proven the best plan meeting it (the most
    mixing meeting an efficiency or budget-fill floor, the least objective, so the most
    efficiency or budget fill, meeting a mixing floor).  ``bound`` is proven: for an efficiency
    or budget-fill floor the most mixing any plan meeting it keeps, for a mixing floor the least
    objective any plan meeting it has (equal to the plan's where ``exact``); ``reach`` is the
    bound as a share: the most mixing, or the most efficiency (budget fill under a token
    budget's steps objective) a plan meeting the mixing floor can have (NaN under the time
    objective).  ``grid``: None when
    every allowed edge was searched, else the candidate ends searched (long-context data): then
    ``exact`` and ``bound`` speak of the plans on that grid.  ``below`` and ``above`` are the
    ``(axis, mixing)`` of the two hull vertices of the ``K``-bucket frontier the floor falls
    between (``below`` the one with less mixing), ``axis`` naming the first coordinate
    (``"efficiency"``, or ``"budget_fill"`` under a token budget's steps objective).
    ``searched``: ``"hull"`` when a hull vertex met the floor exactly, ``"labels"`` when the
    exact search of the gap ran to its end, ``"bounded"`` when it stopped at its work limit
    (the plan is then the hull vertex, with the hull's bound); ``labels`` the partial plans it
    kept, ``passes`` the λ passes of the hull search.  ``mixing_axis`` names the second
    coordinate of ``below``, ``above`` and an efficiency floor's ``bound``: ``"mixing"``, or
    with a gradient-noise model ``"effective_batch_share"`` (the design-effect share of
    :func:`analysis.timing.noise.effective_batch_share`).
    """

    floor: Floor
    bound: float
    exact: bool
    reach: float = math.nan
    below: tuple[float, float] = (math.nan, math.nan)
    above: tuple[float, float] = (math.nan, math.nan)
    axis: str = "efficiency"
    searched: str = "hull"
    labels: int = 0
    passes: int = 0
    grid: int | None = None
    mixing_axis: str = "mixing"

    @property
    def measure(self) -> str:
        """The measure floored."""
        return self.floor.measure

    @property
    def value(self) -> float:
        """The floor's value."""
        return self.floor.value

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "floor": self.floor.keyword,
            "measure": self.floor.measure,
            "value": float(self.floor.value),
            "bound": float(self.bound) if math.isfinite(self.bound) else None,
            "exact": bool(self.exact),
            "reach": float(self.reach) if math.isfinite(self.reach) else None,
            "searched": self.searched,
            "axis": self.axis,
            "below": [float(x) for x in self.below],
            "above": [float(x) for x in self.above],
            "labels": int(self.labels),
            "passes": int(self.passes),
            "grid": self.grid,
            "mixing_axis": self.mixing_axis,
        }
