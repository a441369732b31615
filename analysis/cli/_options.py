"""The CLI's argument types, its shared options, and what every command does first.

Argument types (:func:`positive`, :func:`non_negative`, :func:`positive_float`,
:func:`gain`, :func:`bucket_count`, :func:`edge_list`) turn a bad value into argparse's usage
error; the ``add_*`` functions add an option shared by several subcommands; :func:`load` reads
SRC as the options say, :func:`gain_rule` checks ``--max-buckets`` / ``--min-gain``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Literal

from analysis.batching import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_MAX_BUCKETS,
    DEFAULT_MIN_GAIN,
    DEFAULT_N_BUCKETS,
    BatchRule,
    check_budget,
    parse_edges,
    parse_rule_value,
)
from analysis.lengths import LengthHistogram
from analysis.loaders import load_gradient_noise, load_lengths, load_step_times
from analysis.simulation.epochs import check_batch_tokens

PROG = "padding-workbench"


class CLIError(Exception):
    """A user mistake found by the CLI itself (reported as one line, exit 2)."""


def package_version() -> str:
    """The installed distribution's version (what ``--version`` prints)."""
    try:
        return version("padding-workbench")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0+unknown"


def positive(text: str) -> int:
    """A positive integer option (:func:`analysis.batching.parse_rule_value`, the rule the
    explorer's box reads its text with too)."""
    try:
        return parse_rule_value(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


#: The most simulated epochs (``--epochs``) and frontier passes (``--lambdas``) the CLI runs:
#: each epoch keeps every batch in memory, each pass is an exact DP.
MAX_EPOCHS = 10_000
MAX_LAMBDAS = 1_000


def at_most(limit: int, unit: str, *, zero: bool = False) -> Callable[[str], int]:
    """An integer option type: positive (or ``>= 0`` with ``zero``) and at most ``limit``."""

    def parse(text: str) -> int:
        value = non_negative(text) if zero else positive(text)
        if value > limit:
            raise argparse.ArgumentTypeError(f"{value:,} {unit}: more than the {limit:,} this command runs")
        return value

    parse.__name__ = "integer"
    return parse


def non_negative(text: str) -> int:
    """A non-negative integer option (a seed): ``0`` or what :func:`positive` reads."""
    cleaned = str(text).strip().replace("_", "").replace(",", "")
    if cleaned.isascii() and cleaned.isdigit() and int(cleaned) == 0:
        return 0
    try:
        return parse_rule_value(text)
    except ValueError as exc:
        message = str(exc).replace("a positive integer", "a non-negative integer")
        raise argparse.ArgumentTypeError(message) from None


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def gain(text: str) -> float:
    """An efficiency gain: a number in [0, 1] (``0.01`` is one percentage point)."""
    message = f"expected a number in [0, 1] (0.01 = one percentage point), got {text!r}"
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(message) from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(message)
    return value


#: What ``--buckets auto`` asks for: the K the gain rule suggests.
AUTO: Literal["auto"] = "auto"


def bucket_count(text: str) -> int | Literal["auto"]:
    """A positive bucket count, or ``auto`` (the K the gain rule suggests)."""
    if text.strip().lower() == AUTO:
        return AUTO
    try:
        return positive(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected a positive integer or auto, got {text!r}") from None


def edge_list(text: str) -> list[int]:
    try:
        return parse_edges(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


class Formatter(argparse.HelpFormatter):
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


def add_source(p: argparse.ArgumentParser) -> None:
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


def add_quiet(p: argparse.ArgumentParser, default: bool | str) -> None:
    # on the main parser (default False) and on every subcommand (default SUPPRESS, so a
    # subcommand that is not given the flag keeps the main parser's value)
    p.add_argument(
        "--quiet",
        action="store_true",
        default=default,
        help="no progress bars (default: off; bars show on a terminal)",
    )


def add_world_size(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--world-size",
        metavar="N",
        type=positive,
        default=1,
        help="data-parallel ranks: consecutive batches go to ranks round-robin, one "
        "optimizer step is one batch per rank",
    )


def add_max_len(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--max-len",
        metavar="N",
        type=positive,
        default=None,
        help="clip lengths at N tokens, as the trainer's truncation does (default: none, no clipping)",
    )


def add_batch_rule(p: argparse.ArgumentParser) -> None:
    rule = p.add_mutually_exclusive_group()
    rule.add_argument(
        "--batch-size",
        metavar="B",
        type=positive,
        default=None,
        help=f"samples per batch (default: {DEFAULT_BATCH_SIZE}, the case's "
        "setting, unless --max-tokens is given)",
    )
    rule.add_argument(
        "--max-tokens",
        metavar="T",
        type=positive,
        default=None,
        help="token budget per batch: a bucket takes max(1, T // its upper edge) "
        "samples (default: none, use --batch-size)",
    )
    p.add_argument(
        "--pad-to-multiple-of",
        metavar="M",
        type=positive,
        default=None,
        help="round each batch's longest up to a multiple of M, as the collator "
        "does (default: 1, no rounding)",
    )


#: The help of ``--buckets``' ``auto``.
BUCKETS_AUTO_HELP = (
    "; auto: the K the gain rule suggests (the smallest K after which one more bucket "
    "gains less than --min-gain efficiency, K = 1..--max-buckets)"
)


def add_buckets(p: argparse.ArgumentParser, *, report: bool = False) -> None:
    default = (
        f"the gain rule's K on your data, {DEFAULT_N_BUCKETS} (the case's) on the bundled case data"
        if report
        else f"{DEFAULT_N_BUCKETS}, or the data's distinct lengths when fewer"
    )
    p.add_argument(
        "--buckets",
        metavar="K",
        type=bucket_count,
        default=None,
        help=f"number of buckets{BUCKETS_AUTO_HELP} (default: {default})",
    )


def add_gain_rule(p: argparse.ArgumentParser, *, report: bool = False) -> None:
    """``--max-buckets`` and ``--min-gain``: the gain rule that suggests K."""
    use = (
        "notebook 03's sweep, recommendation.json's n_buckets_suggested and --buckets auto"
        if report
        else "with --buckets auto"
    )
    p.add_argument(
        "--max-buckets",
        metavar="M",
        type=positive,
        default=None,
        help=f"the gain rule sweeps K = 1..M ({use}; default: {DEFAULT_MAX_BUCKETS})",
    )
    p.add_argument(
        "--min-gain",
        metavar="X",
        type=gain,
        default=None,
        help="the gain rule stops once one more bucket gains less than X efficiency, "
        f"0.01 = one percentage point ({use}; default: {DEFAULT_MIN_GAIN})",
    )


def gain_rule(args: argparse.Namespace) -> tuple[int, float]:
    """``(max_buckets, min_gain)`` with their defaults; given without ``--buckets auto``
    (where nothing reads them) they are a mistake."""
    given = [
        f for f, v in (("--max-buckets", args.max_buckets), ("--min-gain", args.min_gain)) if v is not None
    ]
    if given and args.buckets != AUTO and args.command != "report":
        verb, them = ("apply", "them") if len(given) > 1 else ("applies", "it")
        raise CLIError(
            f"{' and '.join(given)} {verb} only with --buckets auto (give --buckets auto or leave {them} out)"
        )
    return (
        DEFAULT_MAX_BUCKETS if args.max_buckets is None else args.max_buckets,
        DEFAULT_MIN_GAIN if args.min_gain is None else args.min_gain,
    )


def add_calibration(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--tokens-per-s",
        metavar="X",
        type=positive_float,
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


def add_noise(p: argparse.ArgumentParser, effect: str) -> None:
    """``--noise FILE.npz``: a gradient-noise model of the user's model (what it adds: ``effect``)."""
    p.add_argument(
        "--noise",
        metavar="FILE.npz",
        default=None,
        help="a gradient-noise model of your model (analysis.timing.noise.measure_gradient_noise, "
        f"saved by analysis.loaders.save_gradient_noise): {effect} (default: none)",
    )


def add_step_times(p: argparse.ArgumentParser, effect: str) -> None:
    """``--step-times FILE.csv``: step times measured on the user's model (what they add: ``effect``)."""
    p.add_argument(
        "--step-times",
        metavar="FILE.csv",
        default=None,
        help=f"step times measured on your model (batch_size,length,seconds; analysis.measure_step_times): "
        f"{effect}",
    )


def load_noise(args: argparse.Namespace) -> Any:
    """The ``--noise`` model (a :class:`~analysis.timing.noise.GradientNoise`), or None."""
    path = getattr(args, "noise", None)
    return None if path is None else load_gradient_noise(path)


def load_clock(args: argparse.Namespace) -> Any:
    """The step-time model fitted to ``--step-times`` (a :class:`~analysis.StepTimeModel`), or None."""
    from analysis.timing.step_time import StepTimeModel

    path = getattr(args, "step_times", None)
    return None if path is None else StepTimeModel.fit(load_step_times(path))


def check_calibration(args: argparse.Namespace) -> None:
    """``--tokens-per-s`` and ``--reference-strategy``: both or neither."""
    if (args.tokens_per_s is None) != (args.reference_strategy is None):
        raise CLIError("--tokens-per-s and --reference-strategy go together (give both or neither)")


def batch_rule(args: argparse.Namespace) -> BatchRule:
    """The batch rule of ``--batch-size`` / ``--max-tokens`` / ``--pad-to-multiple-of``."""
    return BatchRule.resolve(args.batch_size, args.max_tokens, args.pad_to_multiple_of)


def check_rule(hist: LengthHistogram, rule: BatchRule, world_size: int = 1) -> None:
    """What every command that plans or simulates refuses first, each in the same one line:
    samples over the token budget (:func:`analysis.batching.check_budget`), batches of more
    tokens than an int64 counts (:func:`analysis.simulation.epochs.check_batch_tokens`)."""
    check_budget(hist, rule)
    check_batch_tokens(hist, rule, world_size)


def tail_hint(hist: LengthHistogram, rule: BatchRule) -> str | None:
    """The one-line ``--max-len`` hint where batches are sized for a heavy tail
    (:func:`analysis.answers.tail.heavy_tail`), prefixed as a face prints it; None otherwise."""
    from analysis.answers.tail import heavy_tail
    from analysis.narrative.tail import describe_heavy_tail

    tail = heavy_tail(hist, rule)
    return None if tail is None else f"hint: {describe_heavy_tail(tail)}"


def progress_bar(args: argparse.Namespace) -> Callable[..., Iterable[Any]] | None:
    """The progress wrapper the engine accepts (none with ``--quiet`` or off a terminal)."""
    from analysis.progress import bar

    return bar(enabled=False if args.quiet else None)


def load_raw(args: argparse.Namespace) -> LengthHistogram:
    """The lengths as read, without zero-length samples when ``--drop-zero`` (the count
    dropped is said on stderr)."""
    hist = load_lengths(
        args.src, column=args.column, field=args.field, allow_zero=args.drop_zero, progress=progress_bar(args)
    )
    if args.drop_zero:
        hist, dropped = hist.drop_zero()
        print(f"{PROG}: dropped {dropped:,} zero-length sample{'' if dropped == 1 else 's'}", file=sys.stderr)
    return hist


def load(args: argparse.Namespace) -> LengthHistogram:
    """The lengths as read, clipped at ``--max-len`` when given."""
    hist = load_raw(args)
    if getattr(args, "max_len", None) is not None:
        hist = hist.clip(args.max_len)
    return hist
