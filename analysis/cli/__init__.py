"""The command line: ``python -m analysis`` and the ``padding-workbench`` console script.

Six subcommands, each a thin face over the engine (``padding-workbench COMMAND --help`` lists
every option and its default)::

    padding-workbench summary  SRC [--max-len N] [--json]           the distribution, what clipping cuts
    padding-workbench optimize SRC [--buckets K|auto] [--batch-size B | --max-tokens T] [--json] ...
                                                                    the bucket plan
    padding-workbench compare  SRC [--edges E0,E1,... | --buckets K|auto] [--epochs N] ...
                                                                    every strategy, simulated
    padding-workbench report   SRC --out DIR [--buckets K|auto] [--step-times FILE.csv] [--noise FILE.npz] ...
                                                                    every notebook into a folder
    padding-workbench frontier SRC [--max-buckets N] [--all | --json] ...
                                                                    efficiency against mixing
    padding-workbench lengths  SRC --tokenizer PATH --out FILE ...  raw text to a lengths file

``SRC`` is anything :func:`analysis.load_lengths` reads (a file, a folder or a glob).
``--quiet`` goes before or after the subcommand.  ``--buckets auto`` takes the K the gain
rule suggests (``--max-buckets``, ``--min-gain``; :func:`analysis.recommend`) and says which.
Tables print numbers as :mod:`analysis.tables` formats them (integers with thousands
separators, ratios as percentages, missing values as ``–``), in blocks of columns that fit
the terminal (``shutil.get_terminal_size``: ``$COLUMNS``, else the terminal, else 80).  Any
error, a usage error included, prints one line, ``padding-workbench: error: ...``, on stderr
and exits with status 2 (set ``PADDING_DEBUG=1`` to see the traceback instead); a mistyped
option or subcommand is named with its closest spelling (options are never abbreviated).

The package: ``_options`` (argument types, shared options, reading SRC), ``_parser`` (one-line
usage errors, close-match suggestions), ``_layout`` (the terminal width: tables and sentences
fitted to it), ``_commands`` (summary, optimize, compare and report: the commands over lengths
files), ``_frontier`` (the ``frontier`` subcommand), ``_lengths`` (the ``lengths`` subcommand:
raw text through a tokenizer); here, the parser and :func:`main`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from typing import TextIO

from analysis._validate import ZeroLengthError
from analysis.batching import DEFAULT_EPOCHS, DEFAULT_METHOD, DEFAULT_N_BUCKETS, DEFAULT_SEED
from analysis.cli._commands import cmd_compare, cmd_optimize, cmd_report, cmd_summary
from analysis.cli._frontier import add_floors, add_frontier_subcommand, cmd_frontier
from analysis.cli._lengths import add_lengths_subcommand, add_raw_data_options, run_lengths_command
from analysis.cli._options import (
    BUCKETS_AUTO_HELP,
    MAX_EPOCHS,
    PROG,
    CLIError,
    Formatter,
    add_batch_rule,
    add_buckets,
    add_calibration,
    add_gain_rule,
    add_max_len,
    add_noise,
    add_quiet,
    add_source,
    add_step_times,
    add_world_size,
    at_most,
    bucket_count,
    edge_list,
    non_negative,
    package_version,
    positive,
)
from analysis.cli._parser import Parser, spelling_error
from analysis.optimize import METHODS

__all__ = ["main", "build_parser"]


def _command(sub: argparse._SubParsersAction[Parser], name: str, *, help: str, description: str) -> Parser:
    """Subcommand ``name``, its help showing every default."""
    return sub.add_parser(name, formatter_class=Formatter, help=help, description=description)


def _add_training(p: argparse.ArgumentParser, noise_effect: str) -> None:
    """The options that describe the training run: ``--world-size``, the throughput
    calibration and ``--noise`` (what the noise model adds: ``noise_effect``)."""
    add_world_size(p)
    add_calibration(p)
    add_noise(p, noise_effect)


def build_parser() -> Parser:
    """The argparse parser of the whole CLI (also used by the docs and tests)."""
    parser = Parser(
        prog=PROG,
        formatter_class=Formatter,
        description="How much padding does your batching cost, and where should the bucket boundaries go?",
        epilog="Errors print one line on stderr and exit with status 2.",
    )
    add_quiet(parser, False)
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = _command(
        sub,
        "summary",
        help="the distribution summary (and what clipping would cut)",
        description="Print the numbers a design review asks first: samples, "
        "tokens, quantiles, the token share of the longest samples.",
    )
    add_source(p)
    add_max_len(p)
    p.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object (source, max_len, summary, clipping) instead of tables (default: off)",
    )
    p = _command(
        sub,
        "optimize",
        help="the bucket plan: edges, batch sizes, expected efficiency",
        description="Place K bucket edges to minimise the expected padding.",
    )
    add_source(p)
    add_buckets(p)
    add_gain_rule(p)
    add_batch_rule(p)
    p.add_argument(
        "--method",
        choices=METHODS,
        default=DEFAULT_METHOD,
        help="how to place the edges (optimal: the exact optimum; the others are the field's rules)",
    )
    add_floors(p, effective_batch=True)
    add_max_len(p)
    add_noise(
        p,
        "with --step-times, the edges that reach the same loss soonest (predicted: epoch time x steps "
        "to the loss, over a shuffle's); with --min-effective-batch or --min-efficiency, a floor on "
        "the gradient axis; needs --batch-size",
    )
    add_step_times(p, "minimise the predicted epoch time instead of padding (default: none)")
    p.add_argument(
        "--edge-multiple",
        metavar="M",
        type=positive,
        default=1,
        help="put edges at multiples of M (e.g. 64)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object (edges, batch_sizes, efficiency, padded_tokens, "
        "useful_tokens, method, max_len, n_buckets_asked, gain_rule, exports) instead of "
        "tables (default: off)",
    )
    p = _command(
        sub,
        "compare",
        help="the strategy table: random, sorted, bucketed... on the optimal or given edges",
        description="Simulate epochs of every batching strategy and compare "
        "their padding with the exact expectation.",
    )
    add_source(p)
    # shaped like add_floors and add_batch_rule on purpose: argparse's form of exclusive options
    edges = p.add_mutually_exclusive_group()
    edges.add_argument(
        "--edges",
        metavar="E0,E1,...",
        type=edge_list,
        default=None,
        help="bucket edges, e.g. 0,770,1216,1728,2432,3296,8192 (default: the optimal edges for --buckets)",
    )
    edges.add_argument(
        "--buckets",
        metavar="K",
        type=bucket_count,
        default=None,
        help=f"buckets of the optimal plan used when --edges is not given{BUCKETS_AUTO_HELP} "
        f"(default: {DEFAULT_N_BUCKETS})",
    )
    add_gain_rule(p)
    add_floors(p)
    add_batch_rule(p)
    add_max_len(p)
    p.add_argument(
        "--epochs",
        metavar="N",
        type=at_most(MAX_EPOCHS, "epochs"),
        default=DEFAULT_EPOCHS,
        help=f"simulated epochs per strategy, at most {MAX_EPOCHS:,}",
    )
    p.add_argument(
        "--seed", metavar="S", type=non_negative, default=DEFAULT_SEED, help="seed of the random generator"
    )
    _add_training(
        p,
        "adds each strategy's gradient noise against a shuffle's per 1, 4 and 16 steps, and the "
        "plan's effective batch",
    )
    out = p.add_mutually_exclusive_group()
    out.add_argument(
        "--wide",
        action="store_true",
        help="every column of the table (default: off, the main columns); a table wider than "
        "the terminal is split into blocks of columns",
    )
    out.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object (edges, settings, every column per strategy) "
        "instead of the table (default: off)",
    )
    p = _command(
        sub,
        "report",
        help="run every notebook on SRC into DIR: notebooks, HTML, figures, recommendation.json",
        description="Execute notebooks/*.ipynb with papermill on SRC (never in "
        "place) and write the executed notebooks, their HTML, every "
        "figure as PNG and SVG, and recommendation.json into DIR.",
    )
    add_source(p)
    p.add_argument(
        "--out",
        metavar="DIR",
        required=True,
        help="output folder, taken literally: new, empty or an earlier report's (its files "
        "replaced once the new one is complete, a file it did not write never deleted: refused "
        "instead; Ctrl-C leaves it as it was)",
    )
    add_buckets(p, report=True)
    add_gain_rule(p, report=True)
    add_floors(p)
    add_batch_rule(p)
    p.add_argument(
        "--method", choices=METHODS, default=DEFAULT_METHOD, help="how to place the recommended edges"
    )
    add_max_len(p)
    p.add_argument(
        "--seed", metavar="S", type=non_negative, default=DEFAULT_SEED, help="seed passed to the notebooks"
    )
    _add_training(
        p,
        "recommendation.json records the plan's and every strategy's gradient noise (with --step-times, "
        "the edges placed for time to quality too), and the summary page and notebook 02 read the "
        "trade-off on the gradient axis",
    )
    add_step_times(p, "adds the throughput notebook 04_throughput (default: none, that notebook is skipped)")
    add_raw_data_options(p, tokenizer_required=False)
    p.add_argument(
        "--chat-field",
        metavar="F",
        default=None,
        help="with --tokenizer: the field holding a list of {role, content} messages, "
        "counted with the tokenizer's chat template (default: none, --field is "
        "the text)",
    )

    add_lengths_subcommand(sub, formatter_class=Formatter)
    add_frontier_subcommand(sub, Formatter)
    for command in sub.choices.values():  # last, as every subcommand's final option
        add_quiet(command, argparse.SUPPRESS)
    parser.commands = dict(sub.choices)
    return parser


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


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread as an interrupt (so every ``finally`` runs)."""


def _raise_terminated(signum: int, frame: object) -> None:
    raise _Terminated


@contextlib.contextmanager
def _interruptible(command: str) -> Iterator[None]:
    """While ``report`` runs, SIGINT (Ctrl-C) and SIGTERM raise in the main thread, even where
    SIGINT was ignored when the process started (a shell's background job): the report's
    staging folder is removed and :func:`main` says so in one line (exit 130 or 143), where
    the process would otherwise run on to the end or die with a half-written folder."""
    if command != "report" or threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        for signum, handler in old.items():
            signal.signal(signum, handler)


def _interrupted(exc: KeyboardInterrupt, args: argparse.Namespace) -> int:
    """Say in one line what stopped the command; the exit status (128 + the signal)."""
    signum = signal.SIGTERM if isinstance(exc, _Terminated) else signal.SIGINT
    left = f"; {args.out} is left as it was" if args.command == "report" else ""
    print(f"{PROG}: interrupted by {signum.name}{left}", file=sys.stderr)
    return 128 + int(signum)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI on ``argv`` (default ``sys.argv[1:]``); return the exit status.

    Examples
    --------
    >>> main(["--version"])  # doctest: +ELLIPSIS
    padding-workbench ...
    0
    """
    parser = build_parser()
    tokens = sys.argv[1:] if argv is None else list(argv)
    try:
        mistake = spelling_error(parser, tokens)
        if mistake is not None:
            parser.error(mistake)
        args = parser.parse_args(tokens)
    except SystemExit as exc:  # argparse: --help, --version, usage errors (status 2)
        return int(exc.code or 0) if not isinstance(exc.code, str) else 2
    out = sys.stdout
    try:
        with _interruptible(args.command):
            _dispatch(args, out, argv)
    except KeyboardInterrupt as exc:
        return _interrupted(exc, args)
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


def _dispatch(args: argparse.Namespace, out: TextIO, argv: Sequence[str] | None) -> None:
    """Run the subcommand ``args`` names."""
    if args.command == "summary":
        cmd_summary(args, out)
    elif args.command == "optimize":
        cmd_optimize(args, out)
    elif args.command == "compare":
        cmd_compare(args, out)
    elif args.command == "lengths":
        run_lengths_command(args, out)
    elif args.command == "frontier":
        cmd_frontier(args, out)
    else:
        cmd_report(args, out, argv)
