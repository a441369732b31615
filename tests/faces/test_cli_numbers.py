"""Every numeric option of every subcommand, swept over huge, zero, negative and
non-integer values: exit 0 or 2, and a refusal is one line on stderr, a sentence (never an
exception's name or a traceback), the same line for an option shared by ``optimize``,
``compare``, ``frontier`` and ``report``."""

from __future__ import annotations

import argparse
import re
import time
from pathlib import Path

import numpy as np
import pytest

from analysis import LengthHistogram, save_histogram
from analysis.batching import MAX_RULE_VALUE
from analysis.cli import build_parser, main

#: A value that only an option taking zero accepts, values no numeric option accepts, and
#: values at and beyond the limit of integers typed on the command line.
VALUES = [
    "0",
    "-3",
    "2.5",
    "nan",
    "inf",
    "1e400",
    "abc",
    str(MAX_RULE_VALUE),
    str(MAX_RULE_VALUE + 1),
    "9" * 40,
]
NEVER = {"-3", "nan", "inf", "1e400", "abc", "9" * 40}
#: Integer options that take 0 (a seed, no frontier passes); float options (2.5 may be fine).
ZERO_OK = {"--seed", "--lambdas", "--min-gain"}
FLOATS = {"--tokens-per-s", "--min-gain", "--min-efficiency", "--min-mixing"}
#: What an option needs beside it to be read at all.
NEEDS = {
    "--tokens-per-s": ["--reference-strategy", "sorted"],
    "--max-buckets": ["--buckets", "auto"],
    "--min-gain": ["--buckets", "auto"],
}
#: The one line of an exception's name, as an unhandled error would print it.
_EXCEPTION = re.compile(r"\b[A-Z]\w*(Error|Exception)\b|Traceback")


class _Stop(Exception):
    """Raised where ``report`` would start writing: every check has passed (exit 0 here)."""


def numeric_options() -> list[tuple[str, str]]:
    """``(subcommand, option)`` for every option that parses its value as a number."""
    found = []
    for name, sub in build_parser().commands.items():
        for action in sub._actions:
            if action.option_strings and action.type is not None and action.nargs is None:
                if not isinstance(action, argparse._HelpAction):
                    found.append((name, action.option_strings[0]))
    return found


@pytest.fixture(scope="module")
def src(tmp_path_factory: pytest.TempPathFactory) -> str:
    # 30 distinct lengths (10 to 300): every value is accepted or refused as on 300 of them (each
    # exit code the same), and frontier and report's summary page, which search floors over the
    # distinct lengths, take a tenth of the time
    lengths = np.random.default_rng(4).integers(1, 31, 400) * 10
    return str(save_histogram(LengthHistogram.from_lengths(lengths), tmp_path_factory.mktemp("d") / "l.csv"))


def _run(capsys, argv: list[str]) -> tuple[int, list[str]]:
    capsys.readouterr()
    code = main(argv)
    return code, capsys.readouterr().err.strip().splitlines()


def test_the_sweep_covers_every_subcommand():
    assert {name for name, _ in numeric_options()} == {
        "summary",
        "optimize",
        "compare",
        "frontier",
        "report",
        "lengths",
    }


def test_every_numeric_option_refuses_bad_values_in_one_line(src, tmp_path, capsys, monkeypatch):
    def stop(*args, **kwargs):
        raise _Stop("every check passed")

    monkeypatch.setattr("analysis.report._run.staging", stop)
    refused: dict[tuple[str, str], dict[str, str]] = {}
    known = {
        name: {o for a in sub._actions for o in a.option_strings}
        for name, sub in build_parser().commands.items()
    }
    for name, option in numeric_options():
        needs = [w for w in NEEDS.get(option, []) if not w.startswith("--") or w in known[name]]
        needs = needs if len(needs) == len(NEEDS.get(option, [])) else []
        for value in VALUES:
            argv = ["--quiet", name, src, f"{option}={value}", *needs]
            if name == "report":
                argv += ["--out", str(tmp_path / "report")]
            if name == "lengths":
                argv += ["--out", str(tmp_path / "l.npy"), "--tokenizer", str(tmp_path / "no-tokenizer")]
            started = time.monotonic()
            code, err = _run(capsys, argv)
            assert time.monotonic() - started < 60, argv
            stopped = name == "report" and err == ["padding-workbench: error: every check passed"]
            if code == 0 or stopped:
                big_float = option in FLOATS and value == "9" * 40  # e.g. a measured tokens/s
                must = (value in NEVER and not big_float) or (
                    option not in FLOATS and value != str(MAX_RULE_VALUE)
                )
                must = must and not (value == "0" and option in ZERO_OK)
                assert not must, (argv, "accepted")
                continue
            assert code == 2 and len(err) == 1, (argv, code, err)
            assert err[0].startswith("padding-workbench: error: ") and not _EXCEPTION.search(err[0]), argv
            refused.setdefault((option, value), {})[name] = err[0]
    for (option, value), lines in refused.items():
        shared = {k: v for k, v in lines.items() if k in {"optimize", "compare", "frontier", "report"}}
        assert len(set(shared.values())) <= 1, (option, value, shared)


def test_a_batch_rule_too_large_to_count_is_the_same_line_everywhere(src, tmp_path, capsys):
    """``--batch-size 2**62`` once printed an OverflowError in ``frontier`` (the length-grouped
    megabatch) and a sentence in ``compare``; now the four commands refuse it with one line."""
    lines = {}
    for name in ("optimize", "compare", "frontier", "report"):
        argv = ["--quiet", name, src, "--batch-size", str(MAX_RULE_VALUE)]
        code, err = _run(capsys, [*argv, *(["--out", str(tmp_path / "r")] if name == "report" else [])])
        assert code == 2 and len(err) == 1, (name, err)
        lines[name] = err[0]
    assert len(set(lines.values())) == 1, lines
    assert "more than an int64 counts" in lines["frontier"] and "--max-len" in lines["frontier"]
    assert not Path(tmp_path / "r").exists()
