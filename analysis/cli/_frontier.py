"""The padding-mixing frontier on the command line: ``frontier FILE`` (the table, or ``--json``)
and the ``--min-efficiency`` / ``--min-budget-fill`` / ``--min-mixing`` floors of ``optimize``,
``compare`` and ``report`` (:func:`analysis.optimize_edges`)."""

from __future__ import annotations

import argparse
import json
from typing import Any, TextIO

import numpy as np

from analysis.answers.frontier import (
    DEFAULT_EPOCHS,
    DEFAULT_LAMBDAS,
    DEFAULT_MAX_BUCKETS,
    FLOOR_CHECKS,
    frontier,
)
from analysis.answers.tradeoff import TRAINER_LABEL, read_tradeoff
from analysis.batching import DEFAULT_SEED
from analysis.cli._layout import frame_text, wrap
from analysis.cli._options import (
    MAX_EPOCHS,
    MAX_LAMBDAS,
    add_batch_rule,
    add_max_len,
    add_noise,
    add_source,
    add_step_times,
    at_most,
    batch_rule,
    check_rule,
    load,
    load_clock,
    load_noise,
    non_negative,
    positive,
    tail_hint,
)
from analysis.narrative.frontier import (
    FRONTIER_NOTES,
    MIXING_PROXY,
    MIXING_WORDS,
    floor_sentence,
    frontier_sentence,
    unchecked_sentence,
)
from analysis.optimize import Floor, as_floor, parse_share

__all__ = [
    "add_floors",
    "add_frontier_subcommand",
    "cmd_frontier",
    "floor_of",
    "floor_sentence",
]


def _share(text: str) -> float:
    """A floor in ``(0, 1]`` (``0.9``, or ``90%``): :func:`analysis.optimize.floors.parse_share`."""
    try:
        return parse_share(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


# Shaped like add_batch_rule (cli/_options.py) on purpose: two mutually exclusive options, each
# declared in full as argparse reads it; what they share is argparse's form, not a rule.
def add_floors(p: argparse.ArgumentParser, *, effective_batch: bool = False) -> None:
    """``--min-efficiency X`` / ``--min-budget-fill X`` / ``--min-mixing Y`` (at most one), and
    ``--min-effective-batch Y`` where the command takes ``--noise`` for its edges
    (``effective_batch``)."""
    group = p.add_mutually_exclusive_group()
    group.add_argument(
        "--min-efficiency",
        metavar="X",
        type=_share,
        default=None,
        help="the K-bucket plan with the most mixing whose padding efficiency is at least X (e.g. "
        "0.9 or 90%%; under --batch-size; default: the padding optimum)",
    )
    group.add_argument(
        "--min-budget-fill",
        metavar="X",
        type=_share,
        default=None,
        help="under --max-tokens: the K-bucket plan with the most mixing whose budget fill (useful "
        "over the steps' tokens) is at least X",
    )
    group.add_argument(
        "--min-mixing",
        metavar="Y",
        type=_share,
        default=None,
        help="the most efficient K-bucket plan (the best budget fill under --max-tokens) keeping at "
        "least Y of the data's length variance in each batch",
    )
    if effective_batch:
        group.add_argument(
            "--min-effective-batch",
            metavar="Y",
            type=_share,
            default=None,
            help="with --noise: the most efficient K-bucket plan (the fastest with --step-times) whose "
            "batch keeps at least Y of its samples' worth of gradient noise, B_eff / B = 1 / (1 + (B - 1) "
            "rho) (rho: the share of the gradient noise between buckets)",
        )


def floor_of(args: argparse.Namespace) -> Floor | None:
    """The floor given (None without one)."""
    return as_floor(
        min_efficiency=getattr(args, "min_efficiency", None),
        min_budget_fill=getattr(args, "min_budget_fill", None),
        min_mixing=getattr(args, "min_mixing", None),
        min_effective_batch=getattr(args, "min_effective_batch", None),
    )


def add_frontier_subcommand(sub: Any, formatter_class: type[argparse.HelpFormatter]) -> None:
    """The ``frontier`` subcommand."""
    p = sub.add_parser(
        "frontier",
        formatter_class=formatter_class,
        help="efficiency against mixing for every strategy and knob, and the Pareto set",
        description="Put every batching strategy and knob on the efficiency-mixing plane "
        "(bucketed K = 1..N with optimal and frontier edges, sorted, random, length_grouped, "
        "token_budget, packing) and mark the Pareto set.",
    )
    add_source(p)
    add_batch_rule(p)
    add_max_len(p)
    p.add_argument(
        "--max-buckets", metavar="N", type=positive, default=DEFAULT_MAX_BUCKETS, help="bucketed K = 1..N"
    )
    p.add_argument(
        "--lambdas",
        metavar="L",
        type=at_most(MAX_LAMBDAS, "passes", zero=True),
        default=DEFAULT_LAMBDAS,
        help=f"DP passes of frontier edges, at most {MAX_LAMBDAS:,}",
    )
    p.add_argument(
        "--epochs",
        metavar="E",
        type=at_most(MAX_EPOCHS, "epochs"),
        default=DEFAULT_EPOCHS,
        help=f"simulated epochs per strategy, at most {MAX_EPOCHS:,}",
    )
    p.add_argument("--seed", metavar="S", type=non_negative, default=DEFAULT_SEED, help="simulation seed")
    add_noise(
        p,
        "the second axis becomes the share of the effective batch each plan keeps (B_eff over its mean "
        "samples per step; exact for bucketed, sorted and random, simulated otherwise) and the frontier "
        "edges are placed for it",
    )
    add_step_times(
        p,
        "each point's predicted tokens/s, the Pareto set taken on it, and with --noise its predicted "
        "time to the same loss over a shuffle's (default: none)",
    )
    p.add_argument(
        "--all",
        action="store_true",
        help="print every point, not only the Pareto set with one row per K (its most efficient) and "
        "the rows that print alike merged",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object (every row) instead")


def cmd_frontier(args: argparse.Namespace, out: TextIO) -> None:
    noise, clock = load_noise(args), load_clock(args)
    hist = load(args)
    rule = batch_rule(args)
    check_rule(hist, rule)
    res = frontier(
        hist,
        rule,
        rng=np.random.default_rng(args.seed),
        max_buckets=args.max_buckets,
        n_lambdas=args.lambdas,
        epochs=args.epochs,
        noise=noise,
        step_time=clock,
        floor_checks=FLOOR_CHECKS,  # as the report and notebook 02 (analysis.answers.tradeoff)
    )
    if args.json:
        print(
            json.dumps(
                {
                    "source": str(args.src),
                    "max_len": args.max_len,
                    "mixing_axis": res.mixing_axis,
                    **res.to_dict(),
                },
                allow_nan=False,
            ),
            file=out,
        )
        return
    measure = {"budget_fill": "budget fill", "tokens_per_s": "tokens/s"}.get(res.axis, "efficiency")
    what, _, meaning = MIXING_WORDS[res.mixing_axis]
    if args.all:
        title = "Every point"
    else:
        title = (
            f"The Pareto set (no point beats these on both {measure} and {what.removeprefix('the ')}), one "
            f"row per K (its most {measure}), rows that print alike merged"
        )
    shown = res.table(short=not args.all)[res.shown_columns()].set_index("label")
    print(
        wrap(f"{title}, {rule.text}{'' if args.max_len is None else f', max_len = {args.max_len:,}'}:"),
        file=out,
    )
    if (hint := tail_hint(hist, rule)) is not None:
        print(wrap(hint, indent="  ", subsequent="    "), file=out)
    print(frame_text(shown), file=out)
    print(wrap(f"({meaning}, {FRONTIER_NOTES[res.mixing_axis]})"), file=out)
    if (
        note := unchecked_sentence(res.unchecked, res.floor_checks, res.unproven)
    ) is not None and not args.all:
        print(wrap(note), file=out)
    print(file=out)
    if (res.frame["label"] == TRAINER_LABEL).any():  # the trade-off, as the report and notebook 02 say it
        trade = read_tradeoff(res, hist, noise=noise, step_time=clock)
        print(wrap(frontier_sentence(trade, trade.mixing_axis)), file=out)  # the proxy said there
    elif res.mixing_axis == "mixing":
        print(wrap(MIXING_PROXY), file=out)
