"""The ``lengths`` subcommand glue (analysis.cli._lengths), on a parser of its own."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tokenizers")

from test_measure import make_texts, train_tokenizer  # noqa: E402

from analysis import load_lengths  # noqa: E402
from analysis.cli._lengths import (  # noqa: E402
    add_lengths_subcommand,
    add_raw_data_options,
    measure_for_report,
    progress_wrapper,
    run_lengths_command,
)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="padding-workbench")
    add_lengths_subcommand(p.add_subparsers(dest="command", required=True))
    return p


@pytest.fixture(scope="module")
def tokenizer_json(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    train_tokenizer(vocab_size=300).save(str(path))
    return path


def test_lengths_writes_the_per_sample_file(tokenizer_json: Path, tmp_path: Path) -> None:
    texts = make_texts(50, seed=5)
    src = tmp_path / "docs.jsonl"
    src.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(texts)))
    out = tmp_path / "lengths.npy"
    args = parser().parse_args(
        [
            "lengths",
            str(src),
            "--tokenizer",
            str(tokenizer_json),
            "--field",
            "text",
            "--out",
            str(out),
            "--processes",
            "1",
            "--no-cache",
        ]
    )
    printed = io.StringIO()
    hist = run_lengths_command(args, printed)
    tok = train_tokenizer(vocab_size=300)
    want = [len(tok.encode(t)) for t in texts]
    np.testing.assert_array_equal(np.load(out), want)
    assert load_lengths(out) == hist
    assert printed.getvalue() == (
        f"{out}: 50 samples, {sum(want):,} tokens (lengths "
        f"{min(want)} to {max(want)}, mean {np.mean(want):,.1f})\n"
    )
    args = parser().parse_args(
        [
            "lengths",
            str(src),
            "--tokenizer",
            str(tokenizer_json),
            "--field",
            "text",
            "--out",
            str(out),
            "--no-special-tokens",
            "--no-cache",
        ]
    )
    assert run_lengths_command(args, io.StringIO()).total_tokens == sum(want) - 2 * 50


def test_report_gets_a_lengths_file(tokenizer_json: Path, tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    for i, t in enumerate(make_texts(20, seed=6)):
        (tmp_path / "src" / f"{i}.txt").write_text(t)
    report = argparse.ArgumentParser()
    report.add_argument("src")
    report.add_argument("--field", default=None)
    add_raw_data_options(report, tokenizer_required=False)
    args = report.parse_args([str(tmp_path / "src"), "--tokenizer", str(tokenizer_json), "--no-cache"])
    path = measure_for_report(args, tmp_path / "report")
    assert path == tmp_path / "report" / "lengths.npy"
    assert load_lengths(path).n_samples == 20


def test_usage_errors() -> None:
    with pytest.raises(SystemExit):
        parser().parse_args(["lengths", "x.jsonl", "--out", "l.npy"])  # no --tokenizer
    with pytest.raises(SystemExit):
        parser().parse_args(
            [
                "lengths",
                "x.jsonl",
                "--tokenizer",
                "t.json",
                "--field",
                "a",
                "--chat-field",
                "b",
                "--out",
                "l.npy",
            ]
        )
    with pytest.raises(SystemExit):
        parser().parse_args(["lengths", "x", "--tokenizer", "t", "--out", "l.npy", "--processes", "0"])


def test_progress_wrapper_passes_pieces_through() -> None:
    from analysis.measure import MeasuredPiece

    pieces = [MeasuredPiece("a", 2, 10, None, (np.array([5]), np.array([2])))]
    assert progress_wrapper(enabled=False) is None
    assert list(progress_wrapper(enabled=True)(pieces)) == pieces
