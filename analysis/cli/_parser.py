"""The CLI's argument parser: every usage error on one line, and a close match suggested for
a mistyped option or subcommand.

:class:`Parser` is an :class:`argparse.ArgumentParser` whose errors print
``padding-workbench: error: ...`` (one line, exit status 2) and that takes options spelled
out only (no abbreviations: ``--bucket`` is a mistake, not ``--buckets``, so a new option never
makes an old abbreviation ambiguous).  :func:`spelling_error` finds, before argparse parses,
an option or subcommand that the parser does not know, and words it with the closest known
spelling (:func:`difflib.get_close_matches`).
"""

from __future__ import annotations

import argparse
import difflib
import re
from collections.abc import Sequence
from typing import Any, NoReturn

from analysis.cli._options import PROG

__all__ = ["Parser", "spelling_error"]

#: A negative number is a value, not an option (argparse's own rule).
_NEGATIVE = re.compile(r"^-\d+$|^-\d*\.\d+$")
#: argparse's wording of a bad ``choices`` value.
_INVALID_CHOICE = re.compile(r"invalid choice: '(?P<value>[^']*)' \(choose from (?P<choices>.*)\)$")


class Parser(argparse.ArgumentParser):
    """One-line usage errors (exit 2), options spelled out, the subcommands by name.

    Examples
    --------
    >>> p = Parser(prog="demo")
    >>> _ = p.add_argument("--buckets", type=int)
    >>> p.parse_args(["--bucket", "3"])
    Traceback (most recent call last):
    SystemExit: 2
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        #: The subcommands by name (:func:`spelling_error` reads it); set by the CLI's builder.
        self.commands: dict[str, argparse.ArgumentParser] = {}

    def error(self, message: str) -> NoReturn:
        """Print ``padding-workbench: error: MESSAGE`` (a close match added to a bad choice)
        and exit with status 2."""
        self.exit(2, f"{PROG}: error: {_with_close_choice(message)}\n")


def _close(word: str, known: Sequence[str]) -> str | None:
    found = difflib.get_close_matches(word, list(known), n=1)
    return found[0] if found else None


def _with_close_choice(message: str) -> str:
    """argparse's "invalid choice: 'x' (choose from ...)" with the closest choice named."""
    match = _INVALID_CHOICE.search(message)
    if match is None:
        return message
    choices = re.findall(r"'([^']*)'", match["choices"])
    close = _close(match["value"], choices)
    return message if close is None else f"{message}; did you mean {close}?"


def _options(parser: argparse.ArgumentParser) -> list[str]:
    return [option for action in parser._actions for option in action.option_strings]


def _unknown_options(tokens: Sequence[str], known: Sequence[str]) -> list[str]:
    """The options among ``tokens`` (up to a ``--``) that ``known`` does not hold, each with
    its close match."""
    words = []
    for token in tokens:
        if token == "--":
            break
        if not token.startswith("-") or token == "-" or _NEGATIVE.match(token):
            continue
        name = token.split("=", 1)[0] if token.startswith("--") else token
        if name not in known:
            close = _close(name, known)
            words.append(name if close is None else f"{name} (did you mean {close}?)")
    return words


def _unrecognized(words: list[str]) -> str:
    return f"unrecognized argument{'s' if len(words) > 1 else ''} {', '.join(words)}"


def spelling_error(parser: Parser, argv: Sequence[str]) -> str | None:
    """The one-line message for an option or subcommand ``parser`` does not know in ``argv``,
    with the closest known spelling; None when every option and the subcommand are known
    (argparse then parses ``argv`` as usual).

    The options before the subcommand are the main parser's (they take no value); the
    subcommand is the first other word; what follows it is the subcommand's.

    Examples
    --------
    >>> from analysis.cli import build_parser
    >>> spelling_error(build_parser(), ["optimize", "x.csv", "--bucket", "6"])
    'unrecognized argument --bucket (did you mean --buckets?)'
    >>> spelling_error(build_parser(), ["optimise", "x.csv"])
    'unrecognized command optimise (did you mean optimize?)'
    >>> spelling_error(build_parser(), ["--quiet", "optimize", "x.csv", "--buckets", "6"]) is None
    True
    """
    tokens = list(argv)
    at = next((i for i, t in enumerate(tokens) if not t.startswith("-")), len(tokens))
    words = _unknown_options(tokens[:at], _options(parser))
    if words:
        return _unrecognized(words)
    if at == len(tokens) or not parser.commands:
        return None
    command = tokens[at]
    if command not in parser.commands:
        close = _close(command, list(parser.commands))
        hint = f"did you mean {close}?" if close else f"choose from {', '.join(parser.commands)}"
        return f"unrecognized command {command} ({hint})"
    words = _unknown_options(tokens[at + 1 :], _options(parser.commands[command]))
    return _unrecognized(words) if words else None
