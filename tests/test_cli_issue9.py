"""The command line on a user's own data (issue 9): zero-length samples, world size, the
default edges of ``compare``, what ``summary --max-len`` clips, global flags anywhere, and
tables that fit 120 columns with integers and percentages."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from analysis import LengthHistogram, cli, compare_strategies, optimize_edges
from analysis.batching import DEFAULT_N_BUCKETS, DEFAULT_SEED

LENGTHS = np.random.default_rng(9).integers(5, 600, size=2_000)


@pytest.fixture()
def data(tmp_path):
    path = tmp_path / "lengths.npy"
    np.save(path, LENGTHS.astype(np.int32))
    return LengthHistogram.from_lengths(LENGTHS), path


@pytest.fixture()
def with_zeros(tmp_path):
    lengths = np.insert(LENGTHS.astype(np.int32), [4, 17, 400], 0)  # the data plus 3 zeros
    path = tmp_path / "zeros.npy"
    np.save(path, lengths)
    return path


def run(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_drop_zero_engine_counts_what_it_drops():
    hist = LengthHistogram.from_lengths([0, 0, 3, 5, 5], allow_zero=True)
    kept, dropped = hist.drop_zero()
    assert dropped == 2 and kept == LengthHistogram.from_lengths([3, 5, 5])
    assert LengthHistogram.from_lengths([3]).drop_zero() == (LengthHistogram.from_lengths([3]), 0)


@pytest.mark.parametrize("command", [["summary"], ["optimize"], ["compare", "--epochs", "1"]])
def test_zero_lengths_error_names_the_flag(capsys, with_zeros, command):
    code, out, err = run(capsys, command[0], with_zeros, *command[1:], "--quiet")
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert line.startswith("padding-workbench: error: ") and "--drop-zero" in line
    assert "allow_zero" not in line and "row 4" in line


def test_report_zero_lengths_error_names_the_flag(capsys, with_zeros, tmp_path):
    code, _, err = run(capsys, "report", with_zeros, "--out", tmp_path / "r", "--quiet")
    assert code == 2 and "--drop-zero" in err and "allow_zero" not in err
    assert not (tmp_path / "r").exists()  # refused before anything is written


@pytest.mark.parametrize(
    "command", [["summary"], ["optimize", "--json"], ["compare", "--epochs", "1", "--json"]]
)
def test_drop_zero_drops_and_says_how_many(capsys, data, with_zeros, command):
    hist, clean = data
    code, out, err = run(capsys, command[0], with_zeros, *command[1:], "--drop-zero", "--quiet")
    assert code == 0
    assert "dropped 3 zero-length samples" in err
    code, expected, _ = run(capsys, command[0], clean, *command[1:], "--quiet")
    # the same result as on the data without them (the source path aside)
    assert out.replace(str(with_zeros), "SRC") == expected.replace(str(clean), "SRC")


def test_compare_defaults_to_the_optimal_plan(capsys, data):
    hist, path = data
    code, out, _ = run(capsys, "compare", path, "--epochs", "1", "--json", "--quiet")
    assert code == 0
    got = json.loads(out)
    assert got["edges"] == optimize_edges(hist, DEFAULT_N_BUCKETS, batch_size=8).edges
    code, out, _ = run(capsys, "compare", path, "--epochs", "1", "--json", "--buckets", "3", "--quiet")
    assert json.loads(out)["edges"] == optimize_edges(hist, 3, batch_size=8).edges
    code, _, err = run(capsys, "compare", path, "--edges", "0,100,599", "--buckets", "3")
    assert code == 2 and "--buckets" in err


@pytest.mark.parametrize("world_size", [1, 4])
def test_compare_world_size_reaches_the_engine(capsys, data, world_size):
    hist, path = data
    code, out, _ = run(
        capsys, "compare", path, "--epochs", "1", "--json", "--quiet", "--world-size", world_size
    )
    assert code == 0
    got = json.loads(out)
    assert got["world_size"] == world_size
    table = compare_strategies(
        hist,
        rng=np.random.default_rng(DEFAULT_SEED),
        batch_size=8,
        epochs=1,
        edges=got["edges"],
        world_size=world_size,
    )
    assert got["strategies"]["random"]["steps"] == table.loc["random", "steps"]
    assert ("straggler_factor" in got["strategies"]["random"]) == (world_size > 1)


def test_report_records_world_size_and_drop_zero(tmp_path, with_zeros, monkeypatch):
    """``run_report`` takes both; the notebooks are replaced by an empty folder check."""
    import inspect

    from analysis.report import run_report

    params = inspect.signature(run_report).parameters
    assert params["world_size"].default == 1 and params["drop_zero"].default is False
    seen = {}

    def fake_run_report(src, out_dir, **kw):
        seen.update(kw)
        raise ValueError("stop here")

    monkeypatch.setattr("analysis.report.run_report", fake_run_report)
    code = cli.main(
        [
            "report",
            str(with_zeros),
            "--out",
            str(tmp_path / "r"),
            "--quiet",
            "--world-size",
            "8",
            "--drop-zero",
        ]
    )
    assert code == 2 and seen["world_size"] == 8 and seen["drop_zero"] is True


def test_compare_table_fits_120_columns(capsys, data):
    _, path = data
    code, out, _ = run(
        capsys,
        "compare",
        path,
        "--epochs",
        "2",
        "--world-size",
        "8",
        "--tokens-per-s",
        "30000",
        "--reference-strategy",
        "sorted",
        "--buckets",
        "16",
        "--quiet",
    )
    assert code == 0
    assert max(len(line) for line in out.splitlines()) <= 120, out
    assert "--wide" in out
    code, wide, _ = run(capsys, "compare", path, "--epochs", "2", "--world-size", "8", "--wide", "--quiet")
    assert code == 0 and "within_batch_cv" in wide and "within_batch_cv" not in out


def test_numbers_are_integers_and_percentages(capsys, data):
    _, path = data
    code, out, _ = run(capsys, "compare", path, "--epochs", "3", "--wide", "--quiet")
    assert code == 0
    assert not re.search(r"-0\.0+\b", out)
    assert not re.search(r"\d\.\d{4}", out)  # no 4-decimal ratios or float counts
    rows = [line.split() for line in out.splitlines() if line.startswith(("sorted", "random"))]
    header = out.splitlines()[2].split()
    for row in rows:
        cells = dict(zip(header, row[-len(header) :]))
        assert re.fullmatch(r"\d+(\.\d)?%", cells["efficiency"])
        assert re.fullmatch(r"\d{1,3}(,\d{3})*", cells["batches"])
        assert re.fullmatch(r"\d{1,3}(,\d{3})*", cells["waste_tokens"])
    code, out, _ = run(capsys, "optimize", path, "--quiet")
    assert re.search(r"efficiency\s+\d+\.\d%", out)
    assert not re.search(r"\d\.\d{4}", out)


def test_cells_never_show_negative_zero():
    assert cli._cell("lag1_autocorr", -1e-9) == "0.000"
    assert cli._cell("efficiency", -0.0) == "0.0%"
    assert cli._cell("batches", 586.6667) == "587"
    assert cli._cell("steps", 14096.0) == "14,096"
    assert cli._cell("tokens", np.int64(330_880_000)) == "330,880,000"
    assert cli._cell("efficiency", float("nan")) == "n/a"


def test_summary_max_len_clips_the_main_table(capsys, data):
    hist, path = data
    code, out, _ = run(capsys, "summary", path, "--max-len", "300", "--quiet")
    assert code == 0
    main, clipping = out.split("\n\n")
    assert "clipped at max_len = 300" in main.splitlines()[0]
    assert re.search(r"^\s+max\s+300$", main, re.M)
    assert f"{hist.clip(300).total_tokens:,}" in main
    summary = hist.clip_summary(300)
    assert f"{summary['tokens_removed']:,}" in clipping
    code, plain, _ = run(capsys, "summary", path, "--quiet")
    assert re.search(rf"^\s+max\s+{hist.max}$", plain, re.M)


@pytest.mark.parametrize("where", ["before", "after"])
def test_quiet_before_or_after_the_subcommand(capsys, data, where):
    _, path = data
    argv = ["summary", str(path)]
    argv = ["--quiet", *argv] if where == "before" else [*argv, "--quiet"]
    args = cli.build_parser().parse_args(argv)
    assert args.quiet is True
    assert cli.build_parser().parse_args(["summary", str(path)]).quiet is False
    code, out, err = run(capsys, *argv)
    assert code == 0 and err == ""
