"""The ``lengths`` subcommand of the CLI, and the raw-data options ``report`` can share.

:mod:`analysis.cli` wires it in (two calls)::

    add_lengths_subcommand(sub, formatter_class=Formatter)   # in build_parser()
    elif args.command == "lengths": run_lengths_command(args, out)   # in main()

which gives::

    padding-workbench lengths SRC --tokenizer PATH (--field F | --chat-field F) --out FILE
                              [--processes N] [--scheduler ADDRESS] [--no-special-tokens]
                              [--no-cache] [--force]

For ``report SRC --tokenizer PATH ...``: :func:`add_raw_data_options` adds ``--tokenizer``,
``--chat-field``, ``--processes``, ``--scheduler``, ``--no-special-tokens`` and ``--no-cache``
to the report parser (whose ``--field`` then names the text), and
:func:`measure_for_report` turns SRC into a lengths file in the report folder.

This is a face: it draws the progress bar (:mod:`analysis.progress`) that the engine
(:func:`analysis.measure.measure_lengths`) only accepts as a wrapper.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TextIO, TypeVar

from analysis.cli._options import PROG, positive
from analysis.lengths import LengthHistogram
from analysis.measure import MeasuredPiece, measure_lengths
from analysis.progress import bar

__all__ = [
    "add_lengths_subcommand",
    "add_raw_data_options",
    "measure_for_report",
    "progress_wrapper",
    "run_lengths_command",
]


def add_raw_data_options(p: argparse.ArgumentParser, *, tokenizer_required: bool) -> None:
    """``--tokenizer``, ``--chat-field``, ``--processes``, ``--scheduler`` and the switches.

    ``--field`` is not added here: ``lengths`` adds it beside ``--chat-field``, ``report``
    already has one (the text field when ``--tokenizer`` is given).
    """
    p.add_argument(
        "--tokenizer",
        metavar="PATH",
        required=tokenizer_required,
        default=None,
        help="tokenizer.json or a local Hugging Face tokenizer folder (nothing is downloaded)",
    )
    p.add_argument(
        "--processes",
        metavar="N",
        type=positive,
        default=None,
        help="worker processes (default: the machine's cores; one for a small input)",
    )
    p.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        default=None,
        help="tokenize on a Dask cluster, e.g. tcp://10.0.0.5:8786 (its workers "
        "must see SRC at the same path; default: this machine)",
    )
    p.add_argument(
        "--no-special-tokens",
        action="store_true",
        help="do not count the special tokens the tokenizer adds (default: count them)",
    )
    p.add_argument(
        "--no-cache",
        action="store_true",
        help="tokenize even when an identical run is cached (default: reuse it)",
    )


_Parser = TypeVar("_Parser", bound=argparse.ArgumentParser)


def add_lengths_subcommand(
    sub: argparse._SubParsersAction[_Parser],
    *,
    formatter_class: type[argparse.HelpFormatter] = argparse.HelpFormatter,
) -> _Parser:
    """Add ``lengths`` to the subparsers ``sub`` of the CLI; return its parser."""
    p = sub.add_parser(
        "lengths",
        formatter_class=formatter_class,
        help="token lengths of raw text or chats, with your tokenizer: a lengths file",
        description="Tokenize SRC (JSONL, Parquet, CSV/TSV, plain-text files, a saved Hugging "
        "Face dataset; a file, glob or folder) with your tokenizer and its chat "
        "template, and write the per-sample lengths, in source order, to FILE "
        "(.npy or .parquet): the SRC every other command takes.",
    )
    p.add_argument("src", metavar="SRC", help="raw data: a file, a glob or a folder")
    which = p.add_mutually_exclusive_group()
    which.add_argument(
        "--field", metavar="F", default=None, help="field or column holding the text (default: the only one)"
    )
    which.add_argument(
        "--chat-field",
        metavar="F",
        default=None,
        help="field holding a list of {role, content} messages, counted with "
        "the tokenizer's chat template (default: none)",
    )
    p.add_argument(
        "--out",
        metavar="FILE",
        required=True,
        help="lengths file to write (.npy or .parquet); an existing file is replaced only if it "
        "holds lengths an earlier run wrote, or with --force",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="replace an existing --out file whatever it holds (default: off, refused)",
    )
    add_raw_data_options(p, tokenizer_required=True)
    return p


def progress_wrapper(
    enabled: bool | None = None,
) -> Callable[[Iterable[MeasuredPiece]], Iterator[MeasuredPiece]] | None:
    """A bar of samples per second with the tokens per second beside it, or None when no bar
    shows (:func:`analysis.progress.bar` decides)."""
    if bar(enabled) is None:
        return None
    from tqdm import tqdm

    def wrap(pieces: Iterable[MeasuredPiece]) -> Iterator[MeasuredPiece]:
        tokens = 0
        with tqdm(desc="tokenizing", unit="samples", leave=False, dynamic_ncols=True) as shown:
            for piece in pieces:
                tokens += piece.n_tokens
                shown.update(piece.n_samples)
                elapsed = shown.format_dict.get("elapsed") or 0
                if elapsed:
                    shown.set_postfix_str(f"{tokens / elapsed / 1e6:.2f} M tokens/s")
                yield piece

    return wrap


@contextlib.contextmanager
def _client(address: str | None) -> Iterator[Any]:
    if address is None:
        yield None
        return
    from distributed import Client

    with Client(address) as client:  # type: ignore[no-untyped-call]
        yield client


@contextlib.contextmanager
def _one_line_warnings() -> Iterator[None]:
    """The engine's warnings (an unwritable cache) as one line each on stderr."""

    def show(message: Warning | str, *_: Any, **__: Any) -> None:
        print(f"{PROG}: warning: {' '.join(str(message).split())}", file=sys.stderr)

    with warnings.catch_warnings():
        warnings.simplefilter("default")
        warnings.showwarning = show
        yield


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the program is, so that it stops as on Ctrl-C: its workers
    ended, its temporary files removed, one line and a non-zero exit."""


@contextlib.contextmanager
def _sigterm_stops() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread can take a signal handler
        return

    def stop(signum: int, frame: Any) -> None:
        raise _Terminated("terminated (SIGTERM)")

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _measure(args: argparse.Namespace, out: str | Path) -> LengthHistogram:
    with _sigterm_stops(), _one_line_warnings(), _client(args.scheduler) as client:
        return measure_lengths(
            args.src,
            args.tokenizer,
            field=args.field,
            chat_field=getattr(args, "chat_field", None),
            add_special_tokens=not args.no_special_tokens,
            out=out,
            processes=args.processes,
            client=client,
            cache=not args.no_cache,
            progress=progress_wrapper(False if getattr(args, "quiet", False) else None),
            overwrite=getattr(args, "force", False),
        )


def run_lengths_command(args: argparse.Namespace, out: TextIO) -> LengthHistogram:
    """Run ``lengths``: measure, write ``--out``, print one summary line on ``out``."""
    hist = _measure(args, args.out)
    print(
        f"{args.out}: {hist.n_samples:,} samples, {hist.total_tokens:,} tokens "
        f"(lengths {hist.min:,} to {hist.max:,}, mean {hist.mean:,.1f})",
        file=out,
    )
    return hist


def measure_for_report(args: argparse.Namespace, out_dir: str | Path) -> Path:
    """For ``report SRC --tokenizer PATH``: measure SRC into ``OUT_DIR/lengths.npy``.

    Returns the lengths file, the SRC to pass on to :func:`analysis.report.run_report` (with
    ``column=None, field=None``: it holds one array).
    """
    path = Path(out_dir)
    path.mkdir(parents=True, exist_ok=True)
    _measure(args, path / "lengths.npy")
    return path / "lengths.npy"
