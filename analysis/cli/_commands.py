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
from typing import TYPE_CHECKING, Any, TextIO

import numpy as np
import pandas as pd

from analysis._validate import check_bucket_count
from analysis.answers.gradient_noise import PlanQuality, plan_quality, strategy_noise
from analysis.answers.recommendation import Recommendation, recommend
from analysis.batching import DEFAULT_N_BUCKETS, BatchRule, check_edges
from analysis.cli._frontier import floor_of, floor_sentence
from analysis.cli._layout import frame_text, wrap
from analysis.cli._lengths import measure_for_report
from analysis.cli._options import (
    AUTO,
    PROG,
    CLIError,
    batch_rule,
    check_calibration,
    check_rule,
    gain_rule,
    load,
    load_clock,
    load_noise,
    load_raw,
    progress_bar,
    tail_hint,
)
from analysis.lengths import LengthHistogram
from analysis.loaders import load_gradient_noise
from analysis.narrative.frontier import MIXING_PROXY, MIXING_PROXY_CLAUSE
from analysis.narrative.noise import describe_plan_gradient, describe_plan_noise
from analysis.narrative.plan import describe_warning, plan_warnings
from analysis.narrative.provenance import describe_default_k
from analysis.narrative.recommendation import describe_auto_k, describe_report_auto_k
from analysis.narrative.strategies import describe_subsample
from analysis.optimize import BucketPlan, PlanWarning, evaluate_edges, optimize_edges
from analysis.simulation.epochs import compare_strategies
from analysis.simulation.strategies import ALL_STRATEGIES
from analysis.tables import column_kind, format_count, format_estimate, format_value
from analysis.timing.noise import GradientNoise

if TYPE_CHECKING:  # the report (papermill) is imported when `report` runs
    from analysis.report import ReportResult

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


def _buckets(
    args: argparse.Namespace, hist: LengthHistogram, rule: BatchRule
) -> tuple[int, Recommendation | None, int]:
    """The K of ``--buckets`` (the gain rule's suggestion for ``auto``), the recommendation
    that suggested it (None unless ``auto``), and ``--max-buckets``."""
    max_buckets, min_gain = gain_rule(args)
    if args.buckets is None:  # not typed: the default K, or every distinct length when fewer
        return min(DEFAULT_N_BUCKETS, int(hist.lengths.size)), None, max_buckets
    if args.buckets != AUTO:
        check_bucket_count(args.buckets, int(hist.lengths.size))
        return args.buckets, None, max_buckets
    rec = recommend(hist, 1, rule, max_buckets=max_buckets, min_gain=min_gain)
    return rec.n_buckets_suggested, rec, max_buckets


def _print_k(
    args: argparse.Namespace, k: int, auto: Recommendation | None, max_buckets: int, out: TextIO
) -> None:
    """Which K ``--buckets auto`` took, or what the default K became (nothing otherwise)."""
    if auto is not None:
        print(wrap(describe_auto_k(auto, max_buckets), indent="  ", subsequent="    "), file=out)
    if getattr(args, "edges", None) is None and args.buckets is None and k != DEFAULT_N_BUCKETS:
        print(wrap(describe_default_k(k, DEFAULT_N_BUCKETS), indent="  ", subsequent="   "), file=out)


def cmd_optimize(args: argparse.Namespace, out: TextIO) -> None:
    from analysis.exports import export_all

    _check_optimize_models(args)
    noise, clock = load_noise(args), load_clock(args)
    hist = load(args)
    rule = batch_rule(args)
    check_rule(hist, rule)
    k, auto, max_buckets = _buckets(args, hist, rule)
    plan = optimize_edges(
        hist,
        k,
        rule,
        method=args.method,
        edge_multiple=args.edge_multiple,
        floor=floor_of(args),
        noise=noise,
        step_time=clock,
    )
    if args.json:
        value = {
            **plan.to_dict(),
            "max_len": args.max_len,
            "n_buckets_asked": args.buckets or DEFAULT_N_BUCKETS,
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
    _print_k(args, k, auto, max_buckets, out)
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
    print(_mixing_line(plan), file=out)
    _print_gradient(plan, out)
    if plan.floor is not None:
        print(wrap(str(floor_sentence(plan)), indent="  ", subsequent="    "), file=out)
    if plan.n_buckets != k:
        print(f"  ({k} buckets asked; the data allow {plan.n_buckets})", file=out)
    print_warnings(plan_warnings(plan), out, tail_hint(hist, rule))
    print(file=out)
    print(frame_text(plan.to_frame()), file=out)


def _print_gradient(plan: BucketPlan, out: TextIO) -> None:
    """The figures of a plan placed with ``--noise`` (nothing for another)."""
    if plan.gradient is not None and plan.rule.batch_size is not None:
        text = describe_plan_gradient(plan.gradient, plan.n_buckets, plan.rule.batch_size)
        print(wrap(text, indent="  ", subsequent="    "), file=out)


def _check_optimize_models(args: argparse.Namespace) -> None:
    """``optimize``'s ``--noise`` and ``--step-times``: the combinations the optimiser takes,
    each other one refused in one line before anything is read."""
    noise, timed = args.noise is not None, args.step_times is not None
    floor = floor_of(args)
    if floor is not None and floor.measure == "effective_batch" and not noise:
        raise CLIError(
            "--min-effective-batch floors the effective batch of a gradient-noise model: give --noise"
        )
    if not noise:
        return
    if args.max_tokens is not None:
        raise CLIError(
            "--noise places edges for batches of one size: give --batch-size, not --max-tokens (under a "
            "token budget each bucket has its own batch size)"
        )
    if args.method != "optimal":
        raise CLIError(f"--noise places edges with --method optimal only, got {args.method}")
    if floor is not None and floor.measure == "mixing":
        raise CLIError(
            "with --noise the trade-off is on the gradient axis: give --min-effective-batch, not --min-mixing"
        )
    if floor is not None and floor.measure == "efficiency" and timed:
        raise CLIError(
            "--step-times places edges for time, which --min-efficiency cannot floor: give "
            "--min-effective-batch"
        )
    if floor is None and not timed:
        raise CLIError(
            "--noise places edges for time to the same loss, which needs --step-times FILE.csv (or give "
            "--min-effective-batch or --min-efficiency for a floor on the gradient axis)"
        )


def _mixing_line(plan: BucketPlan) -> str:
    """``optimize``'s mixing line, which says it is a proxy (or, with ``--noise``, that the
    gradient noise below measures what it stands for)."""
    proxy = MIXING_PROXY_CLAUSE if plan.gradient is None else "the gradient noise below is what it stands for"
    text = f"{format_value(plan.mixing, 'ratio')} (of the length variance a batch keeps; {proxy})"
    return wrap(text, indent="  mixing       ", subsequent=" " * 15)


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


def _compare_plan(
    args: argparse.Namespace, hist: LengthHistogram, rule: BatchRule, k: int
) -> tuple[BucketPlan, str]:
    """The plan ``compare`` puts beside the strategies, and where its edges came from."""
    if args.edges is not None:
        return evaluate_edges(hist, check_edges(args.edges, hist), rule), "the given edges"
    plan = optimize_edges(hist, k, rule, floor=floor_of(args))
    return (
        plan,
        f"the {'frontier' if floor_of(args) else 'optimal'} edges for {k} bucket{'' if k == 1 else 's'}",
    )


def cmd_compare(args: argparse.Namespace, out: TextIO) -> None:
    check_calibration(args)
    noise = load_gradient_noise(args.noise) if args.noise is not None else None
    hist = load(args)
    rule = batch_rule(args)
    check_rule(hist, rule, args.world_size)
    k, auto, max_buckets = _buckets(args, hist, rule)
    plan, source = _compare_plan(args, hist, rule, k)
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
        "warnings": [w.to_dict() for w in plan.warnings],
        "floor": None if plan.floor is None else plan.floor.to_dict(),
    }
    priced = _gradient_noise(args, noise, hist, rule, edges, [str(s) for s in table.index])
    if args.json:
        rows = {str(name): {str(c): _json_value(v) for c, v in row.items()} for name, row in table.iterrows()}
        extra = {} if priced is None else {"gradient_noise": _noise_json(*priced)}
        print(json.dumps({**settings, "strategies": rows, **extra}, allow_nan=False), file=out)
        return
    print(
        wrap(
            f"Strategies on {source} ({rule.text}, {args.epochs} epoch"
            f"{'s' if args.epochs > 1 else ''}, seed {args.seed}, world size {args.world_size}):"
        ),
        file=out,
    )
    _print_k(args, k, auto, max_buckets, out)
    if "simulated_samples" in table.columns:
        print(wrap(f"({describe_subsample(table)})", indent="  ", subsequent="   "), file=out)
    # as --edges takes them (comma-separated, copy-pasteable), wrapped at commas if long
    print(
        wrap(", ".join(map(str, edges)), indent="  edges ", subsequent=" " * 8).replace(", ", ","), file=out
    )
    if plan.floor is not None:
        print(wrap(str(floor_sentence(plan)), indent="  ", subsequent="    "), file=out)
    print_warnings(plan_warnings(plan), out, tail_hint(hist, rule))
    shown = table if args.wide else table[[c for c in _COMPARE_COLUMNS if c in table.columns]]
    print(frame_text(shown), file=out)
    _print_after_table(args, shown, priced, out)


def _gradient_noise(
    args: argparse.Namespace,
    noise: GradientNoise | None,
    hist: LengthHistogram,
    rule: BatchRule,
    edges: Sequence[int],
    strategies: list[str],
) -> tuple[PlanQuality, pd.DataFrame] | None:
    """The plan's exact gradient noise and every strategy's simulated window noise (``--noise``)."""
    if noise is None:
        return None
    plan = plan_quality(noise, hist, rule, edges=edges)
    names = [s for s in strategies if s in ALL_STRATEGIES]
    frame = strategy_noise(
        noise,
        hist,
        names,
        rule,
        rng=np.random.default_rng(args.seed),
        edges=edges,
        epochs=max(2, args.epochs),
    )
    return plan, frame


def _noise_json(plan: PlanQuality, frame: pd.DataFrame) -> dict[str, Any]:
    figures = {
        name: {"value": _json_value(r["value"]), "se": _json_value(r["se"])}
        for name, r in plan.noise.to_frame().iterrows()
    }
    share = plan.effective_batch_share
    figures["effective_batch_share"] = {"value": _json_value(share.value), "se": _json_value(share.se)}
    rows = [{str(c): _json_value(v) for c, v in row.items()} for _, row in frame.iterrows()]
    return {"bucketed_plan": figures, "strategies": rows}


def _print_after_table(
    args: argparse.Namespace,
    shown: pd.DataFrame,
    priced: tuple[PlanQuality, pd.DataFrame] | None,
    out: TextIO,
) -> None:
    """What ``compare`` prints under its table: where the other columns are, the length mixing
    said to be a proxy (``--wide`` shows it; without ``--noise``), the gradient noise (with it)."""
    if not args.wide:
        print("(more columns with --wide or --json)", file=out)
    elif priced is None and "mixing" in shown.columns:  # a paragraph of its own under the table
        print(f"\n{wrap(MIXING_PROXY)}", file=out)
    if priced is not None:
        _print_noise(*priced, out)


def _print_noise(plan: PlanQuality, frame: pd.DataFrame, out: TextIO) -> None:
    scale = plan.noise.noise_scale
    text = (
        f"Gradient noise (the --noise model; B_noise = {format_estimate(scale.value, scale.se)}; a plan "
        f"trains like a shuffle of B_eff samples): {describe_plan_noise(plan)} Per-step noise of the "
        "sum of W consecutive batch gradients, over a shuffle's at the same W:"
    )
    print(wrap(text), file=out)
    table = frame.pivot(index="strategy", columns="window", values="ratio").loc[frame["strategy"].unique()]
    table.columns = [f"W={w}" for w in table.columns]
    print(frame_text(table), file=out)


def cmd_report(args: argparse.Namespace, out: TextIO, argv: Sequence[str] | None) -> None:
    import tempfile

    from analysis.report import Measured, check_inputs, check_output_folder, run_report, tokenizer_digest

    check_calibration(args)
    max_buckets, min_gain = gain_rule(args)
    rule = batch_rule(args)
    folder = Path(args.out).resolve()
    inputs = [p for p in (args.tokenizer, args.step_times) if p is not None]
    check_inputs(folder, args.src, inputs)  # before anything is measured or read: no input in DIR,
    check_output_folder(folder)  # nor a folder the report may not replace
    measured = None
    with contextlib.ExitStack() as stack:
        src, column, field = args.src, args.column, args.field
        if args.tokenizer is not None:  # raw data: measured beside the folder, moved into it
            measured = Measured(
                source=str(args.src),
                tokenizer=str(args.tokenizer),
                tokenizer_sha256=tokenizer_digest(args.tokenizer),
                field=args.field,
                chat_field=args.chat_field,
            )
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
            noise=args.noise,
            command=_command_line(argv),
            keep_source=args.tokenizer is not None,
            inputs=[] if args.tokenizer is None else [args.tokenizer],
            floor=floor_of(args),
            measured=measured,
        )
    _print_report(args, result, out)


def _print_report(args: argparse.Namespace, result: ReportResult, out: TextIO) -> None:
    """What ``report`` says when done: the K it took and why, the plan's warnings, the files."""
    settings = result.recommendation["settings"]
    if args.buckets == AUTO:
        line = describe_report_auto_k(settings["n_buckets"], settings["min_gain"], settings["max_buckets"])
        print(wrap(line), file=out)
    elif args.buckets is None:
        print(wrap(str(settings["n_buckets_reason"])), file=out)
    if result.floor_text is not None:
        print(wrap(result.floor_text, indent="  ", subsequent="    "), file=out)
    facts = result.recommendation["plan"]["warnings"]
    lines = [describe_warning(PlanWarning.from_dict(w)) for w in facts]
    print_warnings(lines, out, result.recommendation.get("tail_hint"))
    print(f"report written to {result.out_dir} ({len(result.files)} files):", file=out)
    for path in result.files:
        print(f"  {path.relative_to(result.out_dir)}", file=out)


def print_warnings(warnings: Sequence[str], out: TextIO, hint: str | None = None) -> None:
    """A plan's warnings (:func:`analysis.narrative.plan.plan_warnings`), one ``warning:`` line
    each (wrapped to the terminal, its continuation indented), then the ``--max-len`` hint."""
    for line in warnings:
        print(wrap(f"warning: {line}", indent="  ", subsequent="    "), file=out)
    if hint is not None:
        print(wrap(hint, indent="  ", subsequent="    "), file=out)


def _command_line(argv: Sequence[str] | None) -> str:
    """The exact command line, as a shell would need it to re-run: ``python -m analysis ...``
    or ``padding-workbench ...`` as invoked (``argv=None``), else ``padding-workbench`` and
    ``argv`` (an in-process call)."""
    if argv is not None:
        return shlex.join([PROG, *argv])
    first = sys.argv[0] if sys.argv else PROG
    prog = ["python", "-m", "analysis"] if first.endswith("__main__.py") else [os.path.basename(first)]
    return shlex.join([*prog, *sys.argv[1:]])
