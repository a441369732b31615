"""The command line: ``python -m analysis`` and the ``padding-workbench`` console script.

Four subcommands, each a thin face over the engine::

    padding-workbench summary  SRC [--column C | --field F] [--max-len N] [--drop-zero]
    padding-workbench optimize SRC [--buckets K] [--batch-size B | --max-tokens T] [--method M]
                               [--max-len N] [--edge-multiple M] [--drop-zero] [--json]
    padding-workbench compare  SRC [--edges E0,E1,... | --buckets K] [--batch-size B | ...]
                               [--epochs N] [--seed S] [--world-size N] [--drop-zero]
                               [--tokens-per-s X --reference-strategy S] [--wide | --json]
    padding-workbench report   SRC --out DIR [--buckets K] [--batch-size B | --max-tokens T]
                               [--max-len N] [--world-size N] [--drop-zero]
                               [--tokens-per-s X --reference-strategy S]
                               [--step-times FILE.csv]

``SRC`` is anything :func:`analysis.load_lengths` reads (a file or a glob).  ``--quiet``
goes before or after the subcommand.  Tables print integers with thousands separators and
ratios as percentages.  Any error prints one line, ``padding-workbench: error: ...``, on
stderr and exits with status 2 (set ``PADDING_DEBUG=1`` to see the traceback instead).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import sys
import textwrap
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from analysis._cli_lengths import (
    add_lengths_subcommand,
    add_raw_data_options,
    measure_for_report,
    run_lengths_command,
)
from analysis.batching import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_EPOCHS,
    DEFAULT_METHOD,
    DEFAULT_N_BUCKETS,
    DEFAULT_SEED,
    MAX_RULE_VALUE,
    BatchRule,
    parse_edges,
)
from analysis.lengths import ZeroLengthError
from analysis.optimize import METHODS

__all__ = ["main", "build_parser"]

PROG = "padding-workbench"


class CLIError(Exception):
    """A user mistake found by the CLI itself (reported as one line, exit 2)."""


# ---------------------------------------------------------------------------- parsing
def _positive(text: str) -> int:
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    if value > MAX_RULE_VALUE:
        raise argparse.ArgumentTypeError(f"{text} exceeds the limit 2**62 = {MAX_RULE_VALUE:,}")
    return value


def _seed(text: str) -> int:
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def _edges(text: str) -> list[int]:
    try:
        return parse_edges(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


class _Formatter(argparse.HelpFormatter):
    """Show every default in --help (unless the help already states it)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (
            "default" in text.lower()
            or action.default in (None, False, argparse.SUPPRESS)
            or not action.option_strings
        ):
            return text
        return f"{text} (default: %(default)s)"


def _add_source(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "src", metavar="SRC", help="lengths: a file (csv, tsv, txt, npy, parquet, jsonl, ...) or a glob"
    )
    which = p.add_mutually_exclusive_group()
    which.add_argument(
        "--column",
        metavar="C",
        default=None,
        help="column holding the lengths (tables); default: the loader's choice",
    )
    which.add_argument(
        "--field",
        metavar="F",
        default=None,
        help="field holding the lengths (jsonl); default: the loader's choice",
    )
    p.add_argument(
        "--drop-zero",
        action="store_true",
        help="drop zero-length samples (empty files, blank answers) and say how many "
        "(default: off, a zero length is an error)",
    )


def _add_quiet(p: argparse.ArgumentParser, default: Any) -> None:
    # on the main parser (default False) and on every subcommand (default SUPPRESS, so a
    # subcommand that is not given the flag keeps the main parser's value)
    p.add_argument(
        "--quiet",
        action="store_true",
        default=default,
        help="no progress bars (default: off; bars show on a terminal)",
    )


def _add_world_size(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--world-size",
        metavar="N",
        type=_positive,
        default=1,
        help="data-parallel ranks: consecutive batches go to ranks round-robin, one "
        "optimizer step is one batch per rank",
    )


def _add_max_len(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--max-len",
        metavar="N",
        type=_positive,
        default=None,
        help="clip lengths at N tokens, as the trainer's truncation does (default: none, no clipping)",
    )


def _add_batch_rule(p: argparse.ArgumentParser) -> None:
    rule = p.add_mutually_exclusive_group()
    rule.add_argument(
        "--batch-size",
        metavar="B",
        type=_positive,
        default=None,
        help=f"samples per batch (default: {DEFAULT_BATCH_SIZE}, the case's "
        "setting, unless --max-tokens is given)",
    )
    rule.add_argument(
        "--max-tokens",
        metavar="T",
        type=_positive,
        default=None,
        help="token budget per batch: a bucket takes max(1, T // its upper edge) "
        "samples (default: none, use --batch-size)",
    )
    p.add_argument(
        "--pad-to-multiple-of",
        metavar="M",
        type=_positive,
        default=None,
        help="round each batch's longest up to a multiple of M, as the collator "
        "does (default: 1, no rounding)",
    )


def _add_buckets(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--buckets", metavar="K", type=_positive, default=DEFAULT_N_BUCKETS, help="number of buckets"
    )


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser of the whole CLI (also used by the docs and tests)."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        formatter_class=_Formatter,
        description="How much padding does your batching cost, and where should the bucket boundaries go?",
        epilog="Errors print one line on stderr and exit with status 2.",
    )
    _add_quiet(parser, False)
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser(
        "summary",
        formatter_class=_Formatter,
        help="the distribution summary (and what clipping would cut)",
        description="Print the numbers a design review asks first: samples, "
        "tokens, quantiles, the token share of the longest samples.",
    )
    _add_source(p)
    _add_max_len(p)
    _add_quiet(p, argparse.SUPPRESS)

    p = sub.add_parser(
        "optimize",
        formatter_class=_Formatter,
        help="the bucket plan: edges, batch sizes, expected efficiency",
        description="Place K bucket edges to minimise the expected padding.",
    )
    _add_source(p)
    _add_buckets(p)
    _add_batch_rule(p)
    p.add_argument(
        "--method",
        choices=METHODS,
        default=DEFAULT_METHOD,
        help="how to place the edges (optimal: the exact optimum; the others are the field's rules)",
    )
    _add_max_len(p)
    p.add_argument(
        "--edge-multiple",
        metavar="M",
        type=_positive,
        default=1,
        help="put edges at multiples of M (e.g. 64)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object (edges, batch_sizes, efficiency, padded_tokens, "
        "useful_tokens, method, max_len, exports) instead of tables "
        "(default: off)",
    )
    _add_quiet(p, argparse.SUPPRESS)

    p = sub.add_parser(
        "compare",
        formatter_class=_Formatter,
        help="the strategy table: random, sorted, bucketed... on the optimal or given edges",
        description="Simulate epochs of every batching strategy and compare "
        "their padding with the exact expectation.",
    )
    _add_source(p)
    edges = p.add_mutually_exclusive_group()
    edges.add_argument(
        "--edges",
        metavar="E0,E1,...",
        type=_edges,
        default=None,
        help="bucket edges, e.g. 0,770,1216,1728,2432,3296,8192 (default: the optimal edges for --buckets)",
    )
    edges.add_argument(
        "--buckets",
        metavar="K",
        type=_positive,
        default=None,
        help=f"buckets of the optimal plan used when --edges is not given (default: {DEFAULT_N_BUCKETS})",
    )
    _add_batch_rule(p)
    _add_max_len(p)
    p.add_argument(
        "--epochs", metavar="N", type=_positive, default=DEFAULT_EPOCHS, help="simulated epochs per strategy"
    )
    p.add_argument(
        "--seed", metavar="S", type=_seed, default=DEFAULT_SEED, help="seed of the random generator"
    )
    _add_world_size(p)
    _add_calibration(p)
    out = p.add_mutually_exclusive_group()
    out.add_argument(
        "--wide",
        action="store_true",
        help="every column of the table (default: off, the main columns in 120 characters)",
    )
    out.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object (edges, settings, every column per strategy) "
        "instead of the table (default: off)",
    )
    _add_quiet(p, argparse.SUPPRESS)

    p = sub.add_parser(
        "report",
        formatter_class=_Formatter,
        help="run every notebook on SRC into DIR: notebooks, HTML, figures, recommendation.json",
        description="Execute notebooks/*.ipynb with papermill on SRC (never in "
        "place) and write the executed notebooks, their HTML, every "
        "figure as PNG and SVG, and recommendation.json into DIR.",
    )
    _add_source(p)
    p.add_argument("--out", metavar="DIR", required=True, help="output folder (created)")
    _add_buckets(p)
    _add_batch_rule(p)
    p.add_argument(
        "--method", choices=METHODS, default=DEFAULT_METHOD, help="how to place the recommended edges"
    )
    _add_max_len(p)
    p.add_argument(
        "--seed", metavar="S", type=_seed, default=DEFAULT_SEED, help="seed passed to the notebooks"
    )
    _add_world_size(p)
    _add_calibration(p)
    p.add_argument(
        "--step-times",
        metavar="FILE.csv",
        default=None,
        help="step times measured on your model (batch_size,length,seconds; "
        "analysis.measure_step_times): adds the throughput notebook "
        "04_throughput (default: none, that notebook is skipped)",
    )
    add_raw_data_options(p, tokenizer_required=False)
    p.add_argument(
        "--chat-field",
        metavar="F",
        default=None,
        help="with --tokenizer: the field holding a list of {role, content} messages, "
        "counted with the tokenizer's chat template (default: none, --field is "
        "the text)",
    )
    _add_quiet(p, argparse.SUPPRESS)

    p = add_lengths_subcommand(sub, formatter_class=_Formatter)
    _add_quiet(p, argparse.SUPPRESS)
    return parser


def _add_calibration(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--tokens-per-s",
        metavar="X",
        type=_positive_float,
        default=None,
        help="measured throughput (useful tokens/s) of --reference-strategy, to "
        "predict the others' (default: none, no throughput prediction)",
    )
    p.add_argument(
        "--reference-strategy",
        metavar="S",
        default=None,
        help="the strategy --tokens-per-s was measured with, e.g. sorted or random (default: none)",
    )


def _check_calibration(args: argparse.Namespace) -> None:
    if (args.tokens_per_s is None) != (args.reference_strategy is None):
        raise CLIError("--tokens-per-s and --reference-strategy go together (give both or neither)")


def _version() -> str:
    from analysis import __version__

    return __version__


# ---------------------------------------------------------------------------- helpers
def _batch_rule(args: argparse.Namespace) -> BatchRule:
    return BatchRule.resolve(args.batch_size, args.max_tokens, args.pad_to_multiple_of)


def _progress(args: argparse.Namespace) -> Any:
    from analysis.progress import bar

    return bar(enabled=False if args.quiet else None)


def _load_raw(args: argparse.Namespace) -> Any:
    """The lengths as read, without zero-length samples when ``--drop-zero`` (the count
    dropped is said on stderr)."""
    from analysis import load_lengths

    hist = load_lengths(
        args.src, column=args.column, field=args.field, allow_zero=args.drop_zero, progress=_progress(args)
    )
    if args.drop_zero:
        hist, dropped = hist.drop_zero()
        print(f"{PROG}: dropped {dropped:,} zero-length sample{'' if dropped == 1 else 's'}", file=sys.stderr)
    return hist


def _load(args: argparse.Namespace) -> Any:
    hist = _load_raw(args)
    if getattr(args, "max_len", None) is not None:
        hist = hist.clip(args.max_len)
    return hist


#: Columns and keys shown as percentages; counts shown as integers with separators.
_COUNT_NAMES = {
    "samples",
    "tokens",
    "batches",
    "steps",
    "padded_tokens",
    "waste_tokens",
    "useful_tokens",
    "lower_edge",
    "upper_edge",
    "batch_size",
    "distinct_lengths",
    "min",
    "max",
    "max_len",
    "samples_clipped",
    "tokens_removed",
    "predicted_tokens_per_s",
    "expected_padded_tokens",
}


def _is_ratio(name: str) -> bool:
    return "efficiency" in name or "share" in name or name == "composition_repeat"


def _cell(name: str, value: Any) -> str:
    """One number as a table shows it: integers with thousands separators, ratios as
    percentages, other floats to 3 decimals; never ``-0``."""
    if value is None or (isinstance(value, float | np.floating) and not np.isfinite(value)):
        return "n/a"
    if isinstance(value, str | bool):
        return str(value)
    if isinstance(value, int | np.integer):
        return f"{int(value):,}"
    value = float(value) + 0.0
    if _is_ratio(name):
        pct = 100 * value
        text = f"{pct:.2g}%" if 0 < abs(pct) < 0.1 else f"{pct:.1f}%"
    elif name in _COUNT_NAMES or name.startswith("p") and name[1:].isdigit():
        text = f"{value:,.0f}"  # a count (or an expected or mean count): never a float
    elif name == "mean" or name.endswith("_mean") or abs(value) >= 1000:
        text = f"{value:,.1f}"
    else:
        text = f"{value:.3f}"
    return text[1:] if text.startswith("-") and float(text.strip("%").replace(",", "")) == 0 else text


def _print_series(title: str, series: pd.Series, out: Any) -> None:
    print(title, file=out)
    width = max(len(str(k)) for k in series.index)
    for key, value in series.items():
        print(f"  {str(key):<{width}}  {_cell(str(key), value)}", file=out)


def _frame_text(frame: pd.DataFrame) -> str:
    """The frame with every cell formatted by :func:`_cell`, right-aligned."""
    shown = pd.DataFrame({c: [_cell(str(c), v) for v in frame[c]] for c in frame.columns}, index=frame.index)
    with pd.option_context("display.width", 1000, "display.max_columns", 100, "display.max_colwidth", 60):
        return shown.to_string()


def _json_value(value: Any) -> Any:
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


# ---------------------------------------------------------------------------- commands
def _cmd_summary(args: argparse.Namespace, out: Any) -> None:
    raw = _load_raw(args)
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


def _cmd_optimize(args: argparse.Namespace, out: Any) -> None:
    from analysis import optimize_edges
    from analysis.exports import export_all
    from analysis.waste import tokens_text

    hist = _load(args)
    rule = _batch_rule(args)
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
    print(
        f"  efficiency   {_cell('efficiency', plan.efficiency)} (expected useful / padded tokens)", file=out
    )
    print(f"  padded tokens {tokens_text(plan.padded_tokens)} for {plan.useful_tokens:,} useful", file=out)
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


def _cmd_compare(args: argparse.Namespace, out: Any) -> None:
    from analysis import compare_strategies, optimize_edges
    from analysis.batching import check_edges

    _check_calibration(args)
    hist = _load(args)
    rule = _batch_rule(args)
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
        progress=_progress(args),
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


def _cmd_report(args: argparse.Namespace, out: Any, argv: Sequence[str] | None) -> None:
    from analysis.report import run_report

    _check_calibration(args)
    src, column, field = args.src, args.column, args.field
    if args.tokenizer is not None:  # raw data: measure it first (OUT/lengths.npy), --field = text
        src, column, field = measure_for_report(args, args.out), None, None
    result = run_report(
        src,
        args.out,
        n_buckets=args.buckets,
        rule=_batch_rule(args),
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


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    if isinstance(exc, ZeroLengthError):
        where = f"{exc.where}: " if exc.where else ""
        text = f"{where}a sample of length zero (pass --drop-zero to drop zero-length samples)"
    elif isinstance(exc, KeyError):
        text = f"missing key or column {text}"
    elif isinstance(exc, FileNotFoundError) and exc.filename:
        text = f"{exc.filename}: no such file or directory"
    elif not isinstance(exc, ValueError | CLIError | OSError):
        text = f"{type(exc).__name__}: {text}"
    return " ".join(text.split())


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI on ``argv`` (default ``sys.argv[1:]``); return the exit status.

    Examples
    --------
    >>> main(["--version"])  # doctest: +ELLIPSIS
    padding-workbench ...
    0
    """
    parser = build_parser()
    try:
        args = parser.parse_args(None if argv is None else list(argv))
    except SystemExit as exc:  # argparse: --help, --version, usage errors (status 2)
        return int(exc.code or 0) if not isinstance(exc.code, str) else 2
    out = sys.stdout
    try:
        if args.command == "summary":
            _cmd_summary(args, out)
        elif args.command == "optimize":
            _cmd_optimize(args, out)
        elif args.command == "compare":
            _cmd_compare(args, out)
        elif args.command == "lengths":
            run_lengths_command(args, out)
        else:
            _cmd_report(args, out, argv)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `padding-workbench ... | head`: stop quietly
        with contextlib.suppress(OSError, ValueError, AttributeError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except Exception as exc:  # one line, never a traceback for a user mistake
        if os.environ.get("PADDING_DEBUG"):
            raise
        print(f"{PROG}: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    return 0
