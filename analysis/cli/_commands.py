"""The four commands over lengths files: ``summary``, ``optimize``, ``compare``, ``report``.

Each is a thin face over the engine: read SRC as the options say (:mod:`._options`), call the
engine, print its result through :mod:`analysis.tables` (the one number formatter: integers
with thousands separators, ratios as percentages, missing values as ``–``), fitted to the
terminal's width (:mod:`._layout`), or as JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import pandas as pd

from analysis.answers.recommendation import Recommendation, recommend
from analysis.batching import DEFAULT_N_BUCKETS, BatchRule, check_budget, check_edges
from analysis.cli._frontier import floor_of, floor_sentence
from analysis.cli._layout import frame_text, wrap
from analysis.cli._lengths import measure_for_report
from analysis.cli._options import (
    AUTO,
    PROG,
    batch_rule,
    check_calibration,
    gain_rule,
    load,
    load_raw,
    progress_bar,
)
from analysis.lengths import LengthHistogram
from analysis.optimize import evaluate_edges, optimize_edges, sweep_measure
from analysis.simulation.epochs import compare_strategies
from analysis.tables import column_kind, format_bound, format_count, format_value

__all__ = ["cmd_compare", "cmd_optimize", "cmd_report", "cmd_summary"]


def _print_series(title: str, series: pd.Series, out: TextIO) -> None:
    print(wrap(title), file=out)
    width = max(len(str(k)) for k in series.index)
    for key, value in series.items():
        print(f"  {str(key):<{width}}  {format_value(value, column_kind(str(key)))}", file=out)


def _json_value(value: Any) -> Any:
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


def _json_series(series: pd.Series) -> dict[str, Any]:
    return {str(k): _json_value(v) for k, v in series.items()}


def cmd_summary(args: argparse.Namespace, out: TextIO) -> None:
    raw = load_raw(args)
    if args.json:
        shown = raw if args.max_len is None else raw.clip(args.max_len)
        value = {
            "source": str(args.src),
            "max_len": args.max_len,
            "summary": _json_series(shown.summary()),
            "clipping": None if args.max_len is None else _json_series(raw.clip_summary(args.max_len)),
        }
        print(json.dumps(value, allow_nan=False), file=out)
        return
    if args.max_len is None:
        _print_series(f"Distribution of {args.src}", raw.summary(), out)
        return
    _print_series(
        f"Distribution of {args.src}, clipped at max_len = {args.max_len:,}",
        raw.clip(args.max_len).summary(),
        out,
    )
    print(file=out)
    _print_series(f"What clipping at max_len = {args.max_len:,} cut", raw.clip_summary(args.max_len), out)


def _gain_rule_json(rec: Recommendation | None, max_buckets: int) -> dict[str, Any] | None:
    """What ``--buckets auto`` read, for ``--json`` (None without it)."""
    if rec is None:
        return None
    return {
        "n_buckets_suggested": rec.n_buckets_suggested,
        "max_buckets": max_buckets,
        "min_gain": rec.min_gain,
    }


def _auto_line(rec: Recommendation, max_buckets: int) -> str:
    """Which K ``--buckets auto`` took, and why (the gain of one more bucket)."""
    k = rec.n_buckets_suggested
    measure = sweep_measure(rec.sweep)
    optimal = rec.sweep[rec.sweep["method"] == "optimal"].set_index("n_buckets")[measure]
    rule = f"--min-gain {rec.min_gain:g}"
    if k + 1 in optimal.index:
        gain = 100 * float(optimal.loc[k + 1] - optimal.loc[k])
        return (
            f"--buckets auto took K = {k}: one more bucket gains {format_bound(gain, upper=False)} points of "
            f"{measure.replace('_', ' ')}, less than {rule} (the gain rule over "
            f"K = 1..{int(optimal.index.max())})"
        )
    limit = f"--max-buckets {max_buckets}" if max_buckets <= k else "the data's distinct lengths"
    return f"--buckets auto took K = {k}: the largest K swept ({limit}), each bucket gaining at least {rule}"


def _buckets(
    args: argparse.Namespace, hist: LengthHistogram, rule: BatchRule
) -> tuple[int, Recommendation | None, int]:
    """The K of ``--buckets`` (the gain rule's suggestion for ``auto``), the recommendation
    that suggested it (None unless ``auto``), and ``--max-buckets``."""
    max_buckets, min_gain = gain_rule(args)
    if args.buckets != AUTO:
        return (args.buckets or DEFAULT_N_BUCKETS), None, max_buckets
    rec = recommend(hist, 1, rule, max_buckets=max_buckets, min_gain=min_gain)
    return rec.n_buckets_suggested, rec, max_buckets


def cmd_optimize(args: argparse.Namespace, out: TextIO) -> None:
    from analysis.exports import export_all

    hist = load(args)
    rule = batch_rule(args)
    check_budget(hist, rule)
    k, auto, max_buckets = _buckets(args, hist, rule)
    plan = optimize_edges(
        hist,
        k,
        rule,
        method=args.method,
        edge_multiple=args.edge_multiple,
        floor=floor_of(args),
    )
    if args.json:
        value = {
            **plan.to_dict(),
            "max_len": args.max_len,
            "n_buckets_asked": args.buckets,
            "gain_rule": _gain_rule_json(auto, max_buckets),
            "exports": export_all(plan),
        }
        print(json.dumps(value, allow_nan=False), file=out)
        return
    print(
        wrap(
            f"{plan.method} edges for {plan.n_buckets} bucket{'' if plan.n_buckets == 1 else 's'} "
            f"({rule.text}"
            f"{'' if args.max_len is None else f', max_len = {args.max_len:,}'}):"
        ),
        file=out,
    )
    if auto is not None:
        print(wrap(_auto_line(auto, max_buckets), indent="  ", subsequent="    "), file=out)
    print(wrap(", ".join(map(str, plan.edges)), indent="  edges        ", subsequent=" " * 15), file=out)
    print(
        wrap(", ".join(map(str, plan.batch_sizes)), indent="  batch sizes  ", subsequent=" " * 15), file=out
    )
    efficiency = format_value(plan.efficiency, column_kind("efficiency"))
    print(f"  efficiency   {efficiency} (expected useful / padded tokens)", file=out)
    print(f"  padded tokens {format_count(plan.padded_tokens)} for {plan.useful_tokens:,} useful", file=out)
    if plan.budget_fill is not None:
        fill = format_value(plan.budget_fill, column_kind("efficiency"))
        print(
            f"  budget fill  {fill} ({plan.n_batches:,} steps of {rule.text}: useful / steps' tokens)",
            file=out,
        )
    print(
        f"  mixing       {format_value(plan.mixing, 'ratio')} (of the length variance a batch keeps)",
        file=out,
    )
    if plan.floor is not None:
        print(wrap(str(floor_sentence(plan)), indent="  ", subsequent="    "), file=out)
    if plan.n_buckets != k:
        print(f"  ({k} buckets asked; the data allow {plan.n_buckets})", file=out)
    print_warnings(plan.warnings, out)
    print(file=out)
    print(frame_text(plan.to_frame()), file=out)


#: The columns ``compare`` prints by default (the rest with ``--wide`` or ``--json``).
_COMPARE_COLUMNS = [
    "batch_rule",
    "efficiency",
    "expected_efficiency",
    "batches",
    "steps",
    "straggler_factor",
    "efficiency_se",
    "predicted_tokens_per_s",
]


def cmd_compare(args: argparse.Namespace, out: TextIO) -> None:
    check_calibration(args)
    hist = load(args)
    rule = batch_rule(args)
    check_budget(hist, rule)
    k, auto, max_buckets = _buckets(args, hist, rule)
    if args.edges is None:
        plan = optimize_edges(hist, k, rule, floor=floor_of(args))
        source = (
            f"the {'frontier' if floor_of(args) else 'optimal'} edges for {k} bucket{'' if k == 1 else 's'}"
        )
    else:
        plan = evaluate_edges(hist, check_edges(args.edges, hist), rule)
        source = "the given edges"
    edges = plan.edges
    table = compare_strategies(
        hist,
        rule,
        rng=np.random.default_rng(args.seed),
        epochs=args.epochs,
        edges=edges,
        world_size=args.world_size,
        reference_strategy=args.reference_strategy,
        reference_tokens_per_s=args.tokens_per_s,
        progress=progress_bar(args),
    )
    settings = {
        "edges": edges,
        "batch_rule": rule.text,
        "epochs": args.epochs,
        "seed": args.seed,
        "world_size": args.world_size,
        "max_len": args.max_len,
        "n_buckets_asked": None if args.edges is not None else (args.buckets or DEFAULT_N_BUCKETS),
        "gain_rule": _gain_rule_json(auto, max_buckets),
        "warnings": list(plan.warnings),
        "floor": None if plan.floor is None else plan.floor.to_dict(),
    }
    if args.json:
        rows = {str(name): {str(c): _json_value(v) for c, v in row.items()} for name, row in table.iterrows()}
        print(json.dumps({**settings, "strategies": rows}, allow_nan=False), file=out)
        return
    print(
        wrap(
            f"Strategies on {source} ({rule.text}, {args.epochs} epoch"
            f"{'s' if args.epochs > 1 else ''}, seed {args.seed}, world size {args.world_size}):"
        ),
        file=out,
    )
    if auto is not None:
        print(wrap(_auto_line(auto, max_buckets), indent="  ", subsequent="    "), file=out)
    if "simulated_samples" in table.columns:
        text = (
            f"(simulated on a uniform subsample of {int(table['simulated_samples'].iloc[0]):,} "
            f"of the {table.attrs['population_samples']:,} samples; efficiency_se is the "
            "standard error this leaves; expected_efficiency is exact)"
        )
        print(wrap(text, indent="  ", subsequent="   "), file=out)
    # as --edges takes them (comma-separated, copy-pasteable), wrapped at commas if long
    print(
        wrap(", ".join(map(str, edges)), indent="  edges ", subsequent=" " * 8).replace(", ", ","), file=out
    )
    if plan.floor is not None:
        print(wrap(str(floor_sentence(plan)), indent="  ", subsequent="    "), file=out)
    print_warnings(plan.warnings, out)
    shown = table if args.wide else table[[c for c in _COMPARE_COLUMNS if c in table.columns]]
    print(frame_text(shown), file=out)
    if not args.wide:
        print("(more columns with --wide or --json)", file=out)


def cmd_report(args: argparse.Namespace, out: TextIO, argv: Sequence[str] | None) -> None:
    import tempfile

    from analysis.report import check_output_folder, run_report

    check_calibration(args)
    max_buckets, min_gain = gain_rule(args)
    rule = batch_rule(args)
    folder = Path(args.out).resolve()
    with contextlib.ExitStack() as stack:
        src, column, field = args.src, args.column, args.field
        if args.tokenizer is not None:  # raw data: measured beside the folder, moved into it
            check_output_folder(folder)  # before measuring: a folder the report may not replace
            folder.parent.mkdir(parents=True, exist_ok=True)
            beside = stack.enter_context(
                tempfile.TemporaryDirectory(prefix=f".{folder.name}.lengths-", dir=folder.parent)
            )
            src, column, field = measure_for_report(args, beside), None, None
        result = run_report(
            src,
            args.out,
            n_buckets=args.buckets,
            max_buckets=max_buckets,
            min_gain=min_gain,
            rule=rule,
            max_len=args.max_len,
            method=args.method,
            column=column,
            field=field,
            seed=args.seed,
            tokens_per_s=args.tokens_per_s,
            reference_strategy=args.reference_strategy,
            quiet=args.quiet,
            world_size=args.world_size,
            drop_zero=args.drop_zero,
            step_times=args.step_times,
            command=_command_line(argv),
            keep_source=args.tokenizer is not None,
            floor=floor_of(args),
        )
    if args.buckets == AUTO:
        print(wrap(_report_auto_line(result.recommendation)), file=out)
    if result.floor_text is not None:
        print(wrap(result.floor_text, indent="  ", subsequent="    "), file=out)
    print_warnings(result.recommendation["plan"]["warnings"], out)
    print(f"report written to {result.out_dir} ({len(result.files)} files):", file=out)
    for path in result.files:
        print(f"  {path.relative_to(result.out_dir)}", file=out)


def print_warnings(warnings: Sequence[str], out: TextIO) -> None:
    """A plan's warnings (:attr:`analysis.BucketPlan.warnings`), one ``warning:`` line each
    (wrapped to the terminal, its continuation indented)."""
    for line in warnings:
        print(wrap(f"warning: {line}", indent="  ", subsequent="    "), file=out)


def _report_auto_line(recommendation: dict[str, Any]) -> str:
    """Which K ``report --buckets auto`` took (``recommendation.json``'s settings)."""
    settings = recommendation["settings"]
    return (
        f"--buckets auto took K = {settings['n_buckets']}: the gain rule's K "
        f"(--min-gain {settings['min_gain']:g} over K = 1..{settings['max_buckets']})"
    )


def _command_line(argv: Sequence[str] | None) -> str:
    """The exact command line, as a shell would need it to re-run: ``python -m analysis ...``
    or ``padding-workbench ...`` as invoked (``argv=None``), else ``padding-workbench`` and
    ``argv`` (an in-process call)."""
    if argv is not None:
        return shlex.join([PROG, *argv])
    first = sys.argv[0] if sys.argv else PROG
    prog = ["python", "-m", "analysis"] if first.endswith("__main__.py") else [os.path.basename(first)]
    return shlex.join([*prog, *sys.argv[1:]])
