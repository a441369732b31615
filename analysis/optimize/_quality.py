"""Edges for time to quality: the ``K``-bucket plan that reaches the same loss soonest.

Under a gradient-noise model and a step-time model, a plan's time to a given loss over a
shuffle's is its epoch seconds ``T`` times its steps to that loss, which scale as
:func:`analysis.optimize.gradient.steps_factor`, ``Q = 1 / B_noise + (1 + (B - 1) ρ) / B``
(Kish's design effect: every batch counted as full), over the shuffle's constants.  ``T`` is
a sum over buckets (the exact DP's cost matrix of the time objective, plus ``per_sample * N``,
which no edge changes but which the product needs) and ``Q`` is affine in ``ρ``, a sum over
buckets (:mod:`analysis.optimize._gradient`).  So the problem is: minimise ``T * Q`` over the
points ``(T, Q)`` of every ``K``-bucket plan, both coordinates positive.

**Why the lower-left hull's vertices suffice.**  ``log(T Q) = log T + log Q`` is concave on
the positive quadrant, so its minimum over a polytope is at a vertex.  Take the polyhedron
``H = conv(points) + R²₊``: ``T Q`` increases in each coordinate, so its minimum over ``H``
is its minimum over the points, and it is attained at a vertex of ``H`` (a concave function
bounded below on a pointed polyhedron along whose recession directions it does not decrease).
The vertices of ``H`` are the lower-left hull of the points: each the unique minimiser of
``T + μ Q`` for some ``μ > 0``, one Lagrangian pass of the DP over ``costs - λ (1 - ρ)``
(``λ = μ (B - 1) / B``: ``Q`` is ``ρ`` scaled and shifted).

**How every vertex is found** (Eisner and Severance's walk): the two ends are the least
``T`` (ties to less ``Q``) and the least ``Q`` (ties to less ``T``).  Between two known vertices
``A`` (less ``T``) and ``C``, one pass at the slope of ``AC`` (``μ = (T_C - T_A) / (Q_A -
Q_C)``) returns a plan strictly below the line ``AC``, a new vertex between them (recurse on
both sides), or proves that ``AC`` is a hull edge.  **Pruning**: every vertex between ``A``
and ``C`` has ``T >= T_A`` and ``Q >= Q_C``, so ``T_A Q_C`` bounds its product; a segment
whose bound is not below the best product found needs no pass.  Each vertex costs at most
two passes; the best vertex is the exact minimiser over every allowed end (on long-context
data, over the frontier's candidate grid: ``PlanGradient.exact`` False).  Strictly below means
below by more than a relative ``1e-12`` (the DP's float sums): a plan missed by it is within
that of the line, so its product within about that of the best.

Under a token budget the batch size differs per bucket and the per-step variance is a ratio
of sums (steps of different sizes); that is refused, not approximated.
"""

from __future__ import annotations

from dataclasses import replace

from analysis.lengths import LengthHistogram
from analysis.optimize._frontier import TOL, Evaluator, Point, ends_at, lagrangian, most_mixing_ends
from analysis.optimize._problem import Problem
from analysis.optimize.gradient import plan_gradient, steps_factor
from analysis.optimize.plan import BucketPlan
from analysis.timing.noise import GradientNoise


def quality_plan(hist: LengthHistogram, prob: Problem, k: int, noise: GradientNoise) -> BucketPlan:
    """The ``k``-bucket plan of least ``T * Q`` (the module docstring), with its
    :class:`~analysis.optimize.gradient.PlanGradient`."""
    size = prob.rule.batch_size
    if size is None:
        raise ValueError(
            "time-to-quality edges need batch_size: under a token budget each bucket has its own batch size"
        )
    assert prob.step_time is not None
    lag = lagrangian(hist, prob, noise)
    assert lag.noise is not None
    arrays = lag.noise
    inverse = arrays.norm2 / arrays.trace if arrays.norm2 > 0 else 0.0
    const = float(getattr(prob.step_time, "per_sample", 0.0)) * arrays.samples
    ev = Evaluator(hist, lag, k)

    def at(x: Point) -> tuple[float, float]:
        return x.objective + const, steps_factor(1.0 - x.mixing, size, inverse)

    low = ev.point(ends_at(lag, k, 1e-9 * max(ev.point(ends_at(lag, k, 0.0)).objective, 1.0)))
    high = ev.point(most_mixing_ends(lag, k, low.objective))
    if at(high)[1] <= 0:
        raise ValueError("the noise model gives a plan a non-positive design effect: re-probe it")
    found = {low.edges: low, high.edges: high}
    best = min(at(x)[0] * at(x)[1] for x in found.values())
    stack, passes = [(low, high)], 3
    while stack:
        a, c = stack.pop()
        (ta, qa), (tc, qc) = at(a), at(c)
        if tc <= ta or qa <= qc or ta * qc >= best:
            continue
        mu = (tc - ta) / (qa - qc)
        r = ev.point(ends_at(lag, k, mu * (size - 1) / size))
        passes += 1
        tr, qr = at(r)
        line = ta + mu * qa
        if tr + mu * qr >= line - TOL * max(abs(line), 1.0) or r.edges in found:
            continue
        found[r.edges] = r
        best = min(best, tr * qr)
        stack += [(a, r), (r, c)]
    chosen = min(found.values(), key=lambda x: (at(x)[0] * at(x)[1], at(x)[0]))
    plan = ev.plans[chosen.edges]
    walk = {
        "exact": lag.exact,
        "vertices": len(found),
        "passes": passes,
        "grid": None if lag.exact else int(lag.points.size - 1),
    }
    figures = plan_gradient(hist, plan.edges, prob.rule, noise, 1.0 - chosen.mixing, prob.step_time, **walk)
    return replace(plan, method="optimal", gradient=figures)
