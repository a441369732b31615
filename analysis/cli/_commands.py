"""The four commands over lengths files: ``summary``, ``optimize``, ``compare``, ``report``.

Each is a thin face over the engine: read SRC as the options say (:mod:`._options`), call the
engine, print its result through :mod:`analysis.tables` (the one number formatter: integers
with thousands separators, ratios as percentages, missing values as ``–``) or as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import textwrap
from collections.abc import Sequence
from typing import Any, TextIO

import numpy as np
import pandas as pd

from analysis.batching import DEFAULT_N_BUCKETS, check_edges
from analysis.cli._lengths import measure_for_report
from analysis.cli._options import PROG, batch_rule, check_calibration, load, load_raw, progress_bar
from analysis.optimize import optimize_edges
from analysis.simulation import compare_strategies
from analysis.tables import column_kind, format_count, format_value, tidy

__all__ = ["cmd_compare", "cmd_optimize", "cmd_report", "cmd_summary"]


def _print_series(title: str, series: pd.Series, out: TextIO) -> None:
    print(title, file=out)
    width = max(len(str(k)) for k in series.index)
    for key, value in series.items():
        print(f"  {str(key):<{width}}  {format_value(value, column_kind(str(key)))}", file=out)


def _frame_text(frame: pd.DataFrame) -> str:
    """The frame with every cell formatted by :func:`analysis.tables.tidy`, right-aligned."""
    with pd.option_context("display.width", 1000, "display.max_columns", 100, "display.max_colwidth", 60):
        return tidy(frame).to_string()


def _json_value(value: Any) -> Any:
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


def cmd_summary(args: argparse.Namespace, out: TextIO) -> None:
    raw = load_raw(args)
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


def cmd_optimize(args: argparse.Namespace, out: TextIO) -> None:
    from analysis.exports import export_all

    hist = load(args)
    rule = batch_rule(args)
    plan = optimize_edges(hist, args.buckets, rule, method=args.method, edge_multiple=args.edge_multiple)
    if args.json:
        print(
            json.dumps(
                {**plan.to_dict(), "max_len": args.max_len, "exports": export_all(plan)}, allow_nan=False
            ),
            file=out,
        )
        return
    print(
        f"{args.method} edges for {plan.n_buckets} buckets ({rule.text}"
        f"{'' if args.max_len is None else f', max_len = {args.max_len:,}'}):",
        file=out,
    )
    print(f"  edges        {', '.join(map(str, plan.edges))}", file=out)
    print(f"  batch sizes  {', '.join(map(str, plan.batch_sizes))}", file=out)
    efficiency = format_value(plan.efficiency, column_kind("efficiency"))
    print(f"  efficiency   {efficiency} (expected useful / padded tokens)", file=out)
    print(f"  padded tokens {format_count(plan.padded_tokens)} for {plan.useful_tokens:,} useful", file=out)
    if plan.n_buckets != args.buckets:
        print(f"  ({args.buckets} buckets asked; the data allow {plan.n_buckets})", file=out)
    print(file=out)
    print(_frame_text(plan.to_frame()), file=out)


#: The width ``compare`` keeps to without ``--wide``.
_WIDTH = 120
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
    if args.edges is None:
        k = args.buckets or DEFAULT_N_BUCKETS
        edges = optimize_edges(hist, k, rule).edges
        source = f"the optimal edges for {k} buckets"
    else:
        edges = check_edges(args.edges, hist)
        source = "the given edges"
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
    }
    if args.json:
        rows = {str(name): {str(c): _json_value(v) for c, v in row.items()} for name, row in table.iterrows()}
        print(json.dumps({**settings, "strategies": rows}, allow_nan=False), file=out)
        return
    print(
        f"Strategies on {source} ({rule.text}, {args.epochs} epoch"
        f"{'s' if args.epochs > 1 else ''}, seed {args.seed}, world size {args.world_size}):",
        file=out,
    )
    if "simulated_samples" in table.columns:
        print(
            f"  (simulated on a uniform subsample of {int(table['simulated_samples'].iloc[0]):,} "
            f"of the {table.attrs['population_samples']:,} samples; efficiency_se is the "
            "standard error this leaves; expected_efficiency is exact)",
            file=out,
        )
    # as --edges takes them (comma-separated, copy-pasteable), wrapped at commas if long
    print(
        textwrap.fill(
            ", ".join(map(str, edges)), width=_WIDTH, initial_indent="  edges ", subsequent_indent="        "
        ).replace(", ", ","),
        file=out,
    )
    shown = table if args.wide else table[[c for c in _COMPARE_COLUMNS if c in table.columns]]
    print(_frame_text(shown), file=out)
    if not args.wide:
        print("(more columns with --wide or --json)", file=out)


def cmd_report(args: argparse.Namespace, out: TextIO, argv: Sequence[str] | None) -> None:
    from analysis.report import run_report

    check_calibration(args)
    src, column, field = args.src, args.column, args.field
    if args.tokenizer is not None:  # raw data: measure it first (OUT/lengths.npy), --field = text
        src, column, field = measure_for_report(args, args.out), None, None
    result = run_report(
        src,
        args.out,
        n_buckets=args.buckets,
        rule=batch_rule(args),
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
    )
    print(f"report written to {result.out_dir} ({len(result.files)} files):", file=out)
    for path in result.files:
        print(f"  {path.relative_to(result.out_dir)}", file=out)


def _command_line(argv: Sequence[str] | None) -> str:
    """The exact command line, as a shell would need it to re-run: ``python -m analysis ...``
    or ``padding-workbench ...`` as invoked (``argv=None``), else ``padding-workbench`` and
    ``argv`` (an in-process call)."""
    if argv is not None:
        return shlex.join([PROG, *argv])
    first = sys.argv[0] if sys.argv else PROG
    prog = ["python", "-m", "analysis"] if first.endswith("__main__.py") else [os.path.basename(first)]
    return shlex.join([*prog, *sys.argv[1:]])
