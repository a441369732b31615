"""The plans the edges explorer has placed, kept by (method, batch rule) and K so that each is
placed once, and the optimiser passes it still lacks, handed out as jobs a worker thread may run
(:class:`Plans`, the panel's cache; see :mod:`analysis.explorer`)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

from analysis.batching import BatchRule
from analysis.lengths import LengthHistogram
from analysis.optimize import (
    BucketPlan,
    Floor,
    evaluate_edges,
    optimize_edges,
    reuse_matrices,
    sweep_bucket_counts,
)
from analysis.timing.noise import GradientNoise

__all__ = ["STAND_IN_METHOD"]

#: The method that places a provisional view's edges for a K the shown edges don't have (one
#: of the field's rules: milliseconds, and no rule of the field is closest to the optimum on
#: every data set, so the choice only has to be quick and named in the status).
STAND_IN_METHOD = "equal_tokens"

#: An optimiser run for the panel: called without the panel's lock, it runs the optimiser
#: and touches no shared state; the function it returns stores the result (under the lock).
Job = Callable[[], Callable[[], None]]

T = TypeVar("T")
V = TypeVar("V")

#: The floor searches' matrices kept, at most this many rules' (each tens of MB on a long
#: histogram: two quadratic matrices over its candidate grid, and the passes made on them).
MATRICES_KEPT = 2

#: What a pass is for: the batch rule, and the floor its optimal plans meet (None: none).
Key = tuple[BatchRule, Floor | None]


def _recent(table: OrderedDict[T, dict[int, V]], key: T, keep: int) -> tuple[dict[int, V], list[T]]:
    """``table[key]`` (a new empty one if missing) made the most recent entry, and the keys
    dropped so that at most ``keep`` remain (the oldest first)."""
    plans = table.pop(key, {})
    table[key] = plans  # most recent last
    dropped = []
    while len(table) > keep:
        old = next(iter(table))
        del table[old]
        dropped.append(old)
    return plans, dropped


class Plans:
    """The plans the panel has placed, by (method, batch rule) and K: each placed once.

    ``"optimal"`` edges for every K up to ``k_max`` come from one
    :func:`analysis.sweep_bucket_counts` pass (one DP pass serves every K), made the first
    time the rule is asked for; the plan of one K is then built from its edges with
    :func:`analysis.evaluate_edges` (the padding model, milliseconds).  The field's rules
    are placed per K by :func:`analysis.optimize_edges` (milliseconds).  The plans of the
    last ``keep`` (method, rule) pairs are kept.  With a :class:`~analysis.optimize.Floor`,
    ``"optimal"`` is the best plan meeting it (:func:`analysis.optimize_edges` with
    ``floor=``, and ``noise=`` when the panel has a model: the gradient axis), placed one K
    at a time on matrices kept per rule (:func:`analysis.optimize.reuse_matrices`: made by
    the first floor search under a rule, a second or so; each K's search then about a tenth
    of a second on the bundled data), the last ``keep`` (rule, floor) pairs and the matrices
    of the last :data:`MATRICES_KEPT` rules made kept; the field's rules ignore the floor.

    :meth:`cached` never runs the optimiser (it answers ``None`` where an optimal plan needs
    a pass); :meth:`claim` hands out the missing pass as a :data:`Job`, which a caller may
    run in another thread; :meth:`plan` runs the passes here.  The object itself holds no
    lock: the panel calls :meth:`cached`, :meth:`claim` and a job's store under its own.
    """

    def __init__(
        self, hist: LengthHistogram, k_max: int, keep: int = 8, noise: GradientNoise | None = None
    ) -> None:
        self.hist = hist
        self.k_max = k_max
        self.keep = keep
        self.noise = noise
        self.sweeps = 0  # optimiser sweeps started (a test counts them)
        self._plans: OrderedDict[tuple[str, BatchRule], dict[int, BucketPlan]] = OrderedDict()
        # per rule: the optimal edges of each K with the proven bound on their distance to the
        # optimum (plan.gap), or the message of its ValueError; a rule whose sweep failed
        # starts empty and is filled K by K
        self._optimal: dict[BatchRule, dict[int, tuple[list[int], float] | str]] = {}
        # per (rule, floor): the best plan meeting the floor for each K placed, or its error
        self._floored: OrderedDict[tuple[BatchRule, Floor], dict[int, BucketPlan | str]] = OrderedDict()
        # the floor searches' matrices (one set per rule, made once: reuse_matrices' kept
        # list), and one search at a time on them (their memos are not locked)
        self._matrices: list[Any] = []
        self._searching = threading.Lock()

    def plan(self, n_buckets: int, rule: BatchRule, method: str, floor: Floor | None = None) -> BucketPlan:
        """The plan ``optimize_edges(hist, n_buckets, rule, method=method)`` (equal to it; with
        ``floor`` and ``"optimal"``, the one with ``floor=floor``), running any optimiser pass
        it needs here."""
        while (plan := self.cached(n_buckets, rule, method, floor)) is None:
            job = self.claim((rule, floor), n_buckets)
            assert job is not None  # cached() lacks the plan, so a pass is missing
            job()()
        return plan

    def cached(
        self, n_buckets: int, rule: BatchRule, method: str, floor: Floor | None = None
    ) -> BucketPlan | None:
        """The plan of :meth:`plan` where it needs no optimiser pass (the field's rules are
        placed here, in milliseconds), else ``None``.  Raises ``ValueError`` as
        :func:`analysis.optimize_edges` would."""
        if floor is not None and method == "optimal":
            return self._floored_plan(n_buckets, rule, floor)
        plans, dropped = _recent(self._plans, (method, rule), self.keep)
        for old_method, old_rule in dropped:
            if old_method == "optimal":
                self._optimal.pop(old_rule, None)
        if n_buckets not in plans:
            if method != "optimal" or not 1 <= n_buckets <= self.k_max:
                plans[n_buckets] = optimize_edges(self.hist, n_buckets, rule, method=method)
            else:
                found = self._optimal.get(rule, {}).get(n_buckets)
                if found is None:
                    return None
                if isinstance(found, str):
                    raise ValueError(found)
                plans[n_buckets] = self._optimal_plan(n_buckets, rule, *found)
        return plans[n_buckets]

    def _floored_plan(self, n_buckets: int, rule: BatchRule, floor: Floor) -> BucketPlan | None:
        plans, _ = _recent(self._floored, (rule, floor), self.keep)
        found = plans.get(n_buckets)
        if isinstance(found, str):
            raise ValueError(found)
        return found

    def _optimal_plan(self, n_buckets: int, rule: BatchRule, edges: list[int], gap: float) -> BucketPlan:
        plan = evaluate_edges(self.hist, edges, rule, method="optimal")
        # the pass's proven gap ("auto" candidates above AUTO_CANDIDATES_ABOVE distinct lengths)
        return replace(plan, n_buckets_requested=n_buckets, gap=gap)

    def claim(self, key: Key, n_buckets: int | None) -> Job | None:
        """The optimiser pass the optimal plans of ``key`` (a rule and its floor) still lack,
        or ``None``: without a floor, the sweep over every K the first time the rule is asked
        for, and after a sweep that failed (some K has no finite optimum) ``n_buckets`` alone
        (``None``: none asked for); with a floor, ``n_buckets`` alone."""
        rule, floor = key
        if floor is not None:
            if n_buckets is not None and n_buckets not in self._floored.get((rule, floor), {}):
                return lambda: self._place_floored(rule, floor, n_buckets)
            return None
        if rule not in self._optimal:
            self.sweeps += 1
            return lambda: self._sweep(rule)
        if n_buckets is not None and 1 <= n_buckets <= self.k_max and n_buckets not in self._optimal[rule]:
            return lambda: self._place_one(rule, n_buckets)
        return None

    def _sweep(self, rule: BatchRule) -> Callable[[], None]:
        found: dict[int, tuple[list[int], float] | str]
        try:
            sweep = sweep_bucket_counts(self.hist, range(1, self.k_max + 1), ["optimal"], rule)
        except ValueError:  # some K has no finite optimum: place K by K, each with its own error
            found = {}
        else:
            placed = zip(sweep["n_buckets"].tolist(), sweep["edges"], sweep["gap"].tolist(), strict=True)
            found = {k: (edges, gap) for k, edges, gap in placed}

        def store() -> None:
            self._optimal[rule] = found

        return store

    def _place_one(self, rule: BatchRule, n_buckets: int) -> Callable[[], None]:
        found: tuple[list[int], float] | str
        try:
            plan = optimize_edges(self.hist, n_buckets, rule)
            found = (plan.edges, plan.gap)
        except ValueError as exc:
            found = str(exc)

        def store() -> None:
            self._optimal.setdefault(rule, {})[n_buckets] = found

        return store

    def _place_floored(self, rule: BatchRule, floor: Floor, n_buckets: int) -> Callable[[], None]:
        found: BucketPlan | str
        with self._searching, reuse_matrices(self._matrices):
            try:
                found = optimize_edges(self.hist, n_buckets, rule, floor=floor, noise=self.noise)
            except ValueError as exc:
                found = str(exc)
            del self._matrices[:-MATRICES_KEPT]  # the most recent rules' (appended last)

        def store() -> None:
            self._floored.setdefault((rule, floor), {})[n_buckets] = found

        return store
