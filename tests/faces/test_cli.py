"""The command line, end to end on temporary data."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from analysis import LengthHistogram, cli, compare_strategies, optimize_edges, save_histogram
from analysis.batching import DEFAULT_N_BUCKETS, DEFAULT_SEED
from analysis.paths import PROJECT_ROOT
from analysis.tables import column_kind, format_value

LENGTHS = np.random.default_rng(7).integers(5, 600, size=3_000)
#: The lengths of the user-data tests (zero lengths, world size, default edges, table layout).
NPY_LENGTHS = np.random.default_rng(9).integers(5, 600, size=2_000)


@pytest.fixture(autouse=True)
def _terminal_width(monkeypatch):
    """Every test prints to a terminal of 120 columns unless it sets ``COLUMNS`` itself."""
    monkeypatch.setenv("COLUMNS", "120")


@pytest.fixture()
def data(tmp_path):
    hist = LengthHistogram.from_lengths(LENGTHS)
    return hist, save_histogram(hist, tmp_path / "lengths.csv")


def run(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_one_line_error(code, err, *needles):
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("padding-workbench: error: ")
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0]


# ------------------------------------------------------------------------ summary
def test_summary_prints_the_distribution(capsys, data):
    hist, path = data
    code, out, err = run(capsys, "summary", path)
    assert code == 0 and err == ""
    assert f"{hist.n_samples:,}" in out and f"{hist.total_tokens:,}" in out
    assert "p99" in out and "Clipping" not in out


def test_summary_with_max_len_adds_the_clipping_summary(capsys, data):
    hist, path = data
    code, out, _ = run(capsys, "summary", path, "--max-len", 500)
    clipped = int(hist.counts[hist.lengths > 500].sum())
    assert code == 0
    assert "What clipping at max_len = 500 cut" in out and f"{clipped:,}" in out


# ------------------------------------------------------------------------ optimize
def test_optimize_json_matches_the_api(capsys, data):
    from analysis import optimize_edges

    hist, path = data
    code, out, err = run(capsys, "optimize", path, "--buckets", 3, "--batch-size", 4, "--json")
    assert code == 0 and err == ""
    got = json.loads(out)
    plan = optimize_edges(hist, 3, batch_size=4)
    assert got["edges"] == list(plan.edges) and got["batch_sizes"] == list(plan.batch_sizes)
    assert got["method"] == "optimal" == plan.method
    assert got["useful_tokens"] == plan.useful_tokens == hist.total_tokens
    assert got["padded_tokens"] == pytest.approx(plan.padded_tokens, rel=1e-12)
    assert got["efficiency"] == pytest.approx(plan.efficiency, rel=1e-12)
    assert got["exports"]["nemo"]["bucket_batch_size"] == list(plan.batch_sizes)
    assert got["max_len"] is None


def test_optimize_defaults_are_six_buckets_batch_size_eight(capsys, data):
    from analysis import optimize_edges

    hist, path = data
    code, out, _ = run(capsys, "optimize", path, "--json")
    plan = optimize_edges(hist, 6, batch_size=8)
    assert code == 0 and json.loads(out)["edges"] == list(plan.edges)
    assert json.loads(out)["batch_sizes"] == [8] * 6


def test_optimize_token_budget_clipping_and_table(capsys, data):
    from analysis import optimize_edges

    hist, path = data
    code, out, _ = run(
        capsys,
        "optimize",
        path,
        "--buckets",
        2,
        "--max-tokens",
        4096,
        "--max-len",
        400,
        "--method",
        "equal_count",
    )
    plan = optimize_edges(hist.clip(400), 2, max_tokens=4096, method="equal_count")
    assert code == 0
    assert ", ".join(map(str, plan.edges)) in out and f"{100 * plan.efficiency:.2f}%" in out
    assert "(max_tokens 4,096, max_len = 400)" in out


def test_optimize_pad_to_multiple_of(capsys, data):
    from analysis import BatchRule, optimize_edges

    hist, path = data
    code, out, err = run(capsys, "optimize", path, "--buckets", 3, "--pad-to-multiple-of", 64, "--json")
    assert code == 0 and err == ""
    got = json.loads(out)
    plan = optimize_edges(hist, 3, BatchRule(batch_size=8, pad_to_multiple_of=64))
    assert got["pad_to_multiple_of"] == 64 and got["batch_size"] == 8
    assert got["edges"] == plan.edges
    assert got["padded_tokens"] == pytest.approx(plan.padded_tokens, rel=1e-12)
    # every batch pads to a multiple of 64: at least the useful tokens rounded per sample
    assert got["padded_tokens"] >= sum(
        c * -(-v // 64) * 64 for v, c in zip(hist.lengths.tolist(), hist.counts.tolist(), strict=False)
    )


# ------------------------------------------------------------------------ compare
def test_compare_prints_every_strategy(capsys, data):
    hist, path = data
    code, out, err = run(
        capsys, "compare", path, "--edges", "0,100,300,599", "--batch-size", 4, "--epochs", 1, "--seed", 3
    )
    assert code == 0 and err == ""
    for name in ("sorted", "random", "bucketed", "expected_efficiency"):
        assert name in out
    assert "edges 0,100,300,599" in out and "1 epoch, seed 3" in out


def test_compare_edges_take_commas_and_spaces(capsys, data):
    _, path = data
    code, out, err = run(
        capsys, "compare", path, "--edges", "0 100, 300,599", "--epochs", 1, "--pad-to-multiple-of", 8
    )
    assert code == 0 and err == ""
    assert "(batch_size 8, pad_to_multiple_of 8, 1 epoch," in out and "edges 0,100,300,599" in out


# ------------------------------------------------------------------------ errors
@pytest.mark.parametrize(
    "argv, needle",
    [
        (["summary", "{missing}"], "missing.csv"),
        (["optimize", "{path}", "--buckets", "100000"], "bucket"),
        (["compare", "{path}", "--edges", "0,100,200"], "edges"),
        (["compare", "{path}", "--edges", "10,100,700"], "edges"),
        (["summary", "{path}", "--column", "nope"], "nope"),
        (["report", "{path}", "--out", "{tmp}/r", "--tokens-per-s", "100"], "--reference-strategy"),
    ],
)
def test_user_mistakes_give_one_line_and_exit_2(capsys, data, tmp_path, argv, needle):
    _, path = data
    argv = [a.format(path=path, missing=tmp_path / "missing.csv", tmp=tmp_path) for a in argv]
    code, out, err = run(capsys, *argv)
    assert_one_line_error(code, err, needle)


@pytest.mark.parametrize(
    "argv",
    [
        ["optimize", "x.csv", "--buckets", "zero"],
        ["optimize", "x.csv", "--batch-size", "8", "--max-tokens", "100"],
        ["compare", "x.csv", "--edges", "0,a,9"],
        ["optimize", "x.csv", "--method", "magic"],
        ["frobnicate"],
    ],
)
def test_usage_errors_exit_2(capsys, argv):
    code, out, err = run(capsys, *argv)
    assert code == 2 and "Traceback" not in err and "error:" in err


def test_help_shows_every_default(capsys):
    code, out, _ = run(capsys, "optimize", "--help")
    assert code == 0
    for text in ("default: 6", "default: 8", "default: optimal", "default: none", "default: 1"):
        assert text in out
    code, out, _ = run(capsys, "report", "--help")
    text = " ".join(out.split())
    assert "default: the gain rule's K on your data, 6 (the case's) on the bundled case data" in text
    assert "default: 1701" in out


class _TTY(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize("quiet", [False, True])
def test_bars_on_a_terminal_unless_quiet(capsys, monkeypatch, data, quiet):
    _, path = data
    terminal = _TTY()
    monkeypatch.setattr(sys, "stderr", terminal)
    argv = ["--quiet"] * quiet + ["compare", path, "--edges", "0,300,599", "--epochs", 2]
    assert run(capsys, *argv)[0] == 0
    assert ("simulating sorted" in terminal.getvalue()) != quiet


# ------------------------------------------------------------------------ python -m analysis
def _python_m(*argv, cwd):
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "analysis", *map(str, argv)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_python_m_analysis_missing_file_is_one_line(tmp_path):
    proc = _python_m("summary", tmp_path / "nowhere.csv", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("padding-workbench: error: ") and "nowhere.csv" in proc.stderr


def test_python_m_analysis_optimize_json(data, tmp_path):
    hist, path = data
    proc = _python_m("--quiet", "optimize", path, "--buckets", 2, "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["batch_sizes"] == [8, 8] and got["edges"][-1] == hist.max
    assert set(got) >= {"edges", "batch_sizes", "efficiency", "padded_tokens", "useful_tokens", "method"}


def test_compare_with_a_throughput_calibration(capsys, data):
    _, path = data
    code, out, err = run(
        capsys,
        "compare",
        path,
        "--edges",
        "0,300,599",
        "--epochs",
        1,
        "--tokens-per-s",
        1000,
        "--reference-strategy",
        "sorted",
    )
    assert code == 0, err
    assert "predicted_tokens_per_s" in out


def test_report_refuses_to_write_into_the_notebooks_folder(capsys, data):
    from analysis.paths import NOTEBOOKS_DIR

    _, path = data
    code, out, err = run(capsys, "report", path, "--out", NOTEBOOKS_DIR)
    assert_one_line_error(code, err, "notebooks folder")


# ------------------------------------------------------------------------ a user's own data
# zero-length samples, world size, the default edges of ``compare``, what ``summary --max-len``
# clips, global flags anywhere, and tables that fit 120 columns with integers and percentages


@pytest.fixture()
def npy_data(tmp_path):
    path = tmp_path / "lengths.npy"
    np.save(path, NPY_LENGTHS.astype(np.int32))
    return LengthHistogram.from_lengths(NPY_LENGTHS), path


@pytest.fixture()
def with_zeros(tmp_path):
    lengths = np.insert(NPY_LENGTHS.astype(np.int32), [4, 17, 400], 0)  # the data plus 3 zeros
    path = tmp_path / "zeros.npy"
    np.save(path, lengths)
    return path


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
def test_drop_zero_drops_and_says_how_many(capsys, npy_data, with_zeros, command):
    hist, clean = npy_data
    code, out, err = run(capsys, command[0], with_zeros, *command[1:], "--drop-zero", "--quiet")
    assert code == 0
    assert "dropped 3 zero-length samples" in err
    code, expected, _ = run(capsys, command[0], clean, *command[1:], "--quiet")
    # the same result as on the data without them (the source path aside)
    assert out.replace(str(with_zeros), "SRC") == expected.replace(str(clean), "SRC")


def test_compare_defaults_to_the_optimal_plan(capsys, npy_data):
    hist, path = npy_data
    code, out, _ = run(capsys, "compare", path, "--epochs", "1", "--json", "--quiet")
    assert code == 0
    got = json.loads(out)
    assert got["edges"] == optimize_edges(hist, DEFAULT_N_BUCKETS, batch_size=8).edges
    code, out, _ = run(capsys, "compare", path, "--epochs", "1", "--json", "--buckets", "3", "--quiet")
    assert json.loads(out)["edges"] == optimize_edges(hist, 3, batch_size=8).edges
    code, _, err = run(capsys, "compare", path, "--edges", "0,100,599", "--buckets", "3")
    assert code == 2 and "--buckets" in err


@pytest.mark.parametrize("world_size", [1, 4])
def test_compare_world_size_reaches_the_engine(capsys, npy_data, world_size):
    hist, path = npy_data
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


@pytest.mark.parametrize("columns", [80, 100])
def test_compare_table_fits_the_terminal(capsys, npy_data, monkeypatch, columns):
    monkeypatch.setenv("COLUMNS", str(columns))
    _, path = npy_data
    argv = ["compare", path, "--epochs", "2", "--world-size", "8", "--quiet"]
    calibration = ["--tokens-per-s", "30000", "--reference-strategy", "sorted", "--buckets", "16"]
    code, out, _ = run(capsys, *argv, *calibration)
    assert code == 0
    assert max(len(line) for line in out.splitlines()) <= columns, out
    assert "--wide" in out
    for column in ("efficiency", "expected_efficiency", "straggler_factor", "predicted_tokens_per_s"):
        assert re.search(rf"^strategy .*\b{column}\b", out, re.M), column  # a block's header
    code, wide, _ = run(capsys, *argv, "--wide")
    # the within-batch length CV reads "spread" on every face ("mixing" is the variance share)
    assert code == 0 and re.search(r"\bspread\b", wide) and "within_batch_cv" not in wide + out
    assert max(len(line) for line in wide.splitlines()) <= columns, wide
    blocks = [b for b in wide.split("\n\n") if b.startswith("strategy ")]
    assert len(blocks) >= 2  # too wide for one block at 80 or 100 columns
    for block in blocks:  # every block repeats the index: one row per strategy
        names = [line.split()[0] for line in block.splitlines()[1:]]
        assert names == ["sorted", "random", "bucketed", "length_grouped", "token_budget", "packing"]


@pytest.mark.parametrize("columns", [80, 100])
def test_optimize_and_summary_fit_the_terminal(capsys, data, monkeypatch, columns):
    monkeypatch.setenv("COLUMNS", str(columns))
    hist, path = data
    monkeypatch.chdir(path.parent)  # a short path: a path longer than a line is kept whole
    path = Path(path.name)
    code, out, _ = run(capsys, "optimize", path, "--buckets", "16", "--max-tokens", "65536", "--quiet")
    assert code == 0
    assert max(len(line) for line in out.splitlines()) <= columns, out
    plan = optimize_edges(hist, 16, max_tokens=65536)
    edges = re.search(r"^  edges +(.*?)\n  batch sizes", out, re.S | re.M)[1]
    assert [int(e) for e in re.split(r"[,\s]+", edges.strip())] == plan.edges  # wrapped, all there
    for column in plan.to_frame().columns:
        assert re.search(rf"^bucket .*\b{column}\b", out, re.M), column
    code, out, _ = run(capsys, "summary", path, "--max-len", "400", "--quiet")
    assert code == 0 and max(len(line) for line in out.splitlines()) <= columns


def test_frame_text_splits_into_blocks_of_whole_columns():
    import pandas as pd

    from analysis.cli._layout import frame_text

    frame = pd.DataFrame(
        {f"column_{i}": [1000 * i, 7] for i in range(8)}, index=pd.Index(["a", "b"], name="row")
    )
    for width in (30, 60, 200):
        text = frame_text(frame, width)
        assert max(len(line) for line in text.splitlines()) <= width
        blocks = text.split("\n\n")
        headers = [block.splitlines()[0].split() for block in blocks]
        assert all(h[0] == "row" for h in headers)
        assert [c for h in headers for c in h[1:]] == list(frame.columns)  # each once, in order
        assert all(block.splitlines()[1].startswith("a ") for block in blocks)
    assert frame_text(frame, 200).count("\n\n") == 0
    assert frame_text(frame, 30).count("\n\n") == 2  # "row" and three 9-character columns a block


def test_numbers_are_integers_and_percentages(capsys, npy_data, monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")  # one block
    _, path = npy_data
    code, out, _ = run(capsys, "compare", path, "--epochs", "3", "--wide", "--quiet")
    assert code == 0
    assert not re.search(r"-0\.0+\b", out)
    assert not re.search(r"\d\.\d{4}", out)  # no 4-decimal ratios or float counts
    rows = [line.split() for line in out.splitlines() if line.startswith(("sorted", "random"))]
    header = out.splitlines()[2].split()[1:]  # the index name "strategy" heads the header line
    for row in rows:
        cells = dict(zip(header, row[-len(header) :]))
        assert re.fullmatch(r"\d+\.\d\d%", cells["efficiency"])
        assert re.fullmatch(r"\d{1,3}(,\d{3})*", cells["batches"])
        assert re.fullmatch(r"\d{1,3}(,\d{3})*", cells["waste_tokens"])
    code, out, _ = run(capsys, "optimize", path, "--quiet")
    assert re.search(r"efficiency\s+\d+\.\d\d%", out)
    assert not re.search(r"\d\.\d{4}", out)


def test_cells_are_formatted_by_the_one_formatter_never_negative_zero(capsys, npy_data):
    """The CLI shows every cell as ``analysis.tables.format_value(value, column_kind(name))``."""

    def cell(name, value):
        return format_value(value, column_kind(name))

    assert cell("lag1_autocorr", -1e-9) == "0.000"
    assert cell("efficiency", -0.0) == "0.00%"
    assert cell("batches", 586.6667) == "587"
    assert cell("steps", 14096.0) == "14,096"
    assert cell("tokens", np.int64(330_880_000)) == "330,880,000"
    assert cell("efficiency", float("nan")) == "–"
    hist, path = npy_data
    code, out, _ = run(capsys, "summary", path, "--quiet")
    shown = hist.summary()
    for name in ("samples", "p50", "token_share_longest_10pct"):
        assert re.search(rf"^  {name}\s+{re.escape(cell(name, shown[name]))}$", out, re.M), out


def test_summary_max_len_clips_the_main_table(capsys, npy_data):
    hist, path = npy_data
    code, out, _ = run(capsys, "summary", path, "--max-len", "300", "--quiet")
    assert code == 0
    main, clipping = out.split("\n\n")
    title = " ".join(main.split("\n  ")[0].split())  # wrapped to the terminal at a long path
    assert title.startswith("Distribution of ") and title.endswith("clipped at max_len = 300")
    assert re.search(r"^\s+max\s+300$", main, re.M)
    assert f"{hist.clip(300).total_tokens:,}" in main
    summary = hist.clip_summary(300)
    assert f"{summary['tokens_removed']:,}" in clipping
    code, plain, _ = run(capsys, "summary", path, "--quiet")
    assert re.search(rf"^\s+max\s+{hist.max}$", plain, re.M)


@pytest.mark.parametrize("where", ["before", "after"])
def test_quiet_before_or_after_the_subcommand(capsys, npy_data, where):
    _, path = npy_data
    argv = ["summary", str(path)]
    argv = ["--quiet", *argv] if where == "before" else [*argv, "--quiet"]
    args = cli.build_parser().parse_args(argv)
    assert args.quiet is True
    assert cli.build_parser().parse_args(["summary", str(path)]).quiet is False
    code, out, err = run(capsys, *argv)
    assert code == 0 and err == ""


# ------------------------------------------------------------------------ summary --json
def test_summary_json_is_the_summary(capsys, data):
    hist, path = data
    code, out, err = run(capsys, "summary", path, "--json")
    assert code == 0 and err == ""
    got = json.loads(out)
    assert got["source"] == str(path) and got["max_len"] is None and got["clipping"] is None
    expected = hist.summary()
    assert list(got["summary"]) == [str(k) for k in expected.index]
    assert got["summary"]["samples"] == hist.n_samples and got["summary"]["tokens"] == hist.total_tokens
    for key, value in expected.items():
        assert got["summary"][str(key)] == pytest.approx(float(value), rel=1e-12), key
    code, out, _ = run(capsys, "summary", path, "--json", "--max-len", "400")
    got = json.loads(out)
    assert got["max_len"] == 400 and got["summary"]["max"] == 400
    assert got["summary"]["tokens"] == hist.clip(400).total_tokens
    cut = hist.clip_summary(400)
    assert got["clipping"]["tokens_removed"] == cut["tokens_removed"]
    assert set(got["clipping"]) == {str(k) for k in cut.index}


# ------------------------------------------------------------------------ --buckets auto
def _suggested(hist, max_buckets=16, min_gain=0.01, **rule):
    from analysis import recommend

    return recommend(hist, 1, max_buckets=max_buckets, min_gain=min_gain, **rule).n_buckets_suggested


def test_optimize_buckets_auto_takes_the_suggested_k_and_says_so(capsys, data):
    hist, path = data
    k = _suggested(hist, batch_size=8)
    code, out, err = run(capsys, "optimize", path, "--buckets", "auto", "--json")
    assert code == 0 and err == ""
    got = json.loads(out)
    assert got["edges"] == optimize_edges(hist, k, batch_size=8).edges and got["n_buckets"] == k
    assert got["n_buckets_asked"] == "auto"
    assert got["gain_rule"] == {"n_buckets_suggested": k, "max_buckets": 16, "min_gain": 0.01}
    code, out, _ = run(capsys, "optimize", path, "--buckets", "AUTO")
    assert code == 0 and f"--buckets auto took K = {k}: one more bucket gains" in out
    assert f"optimal edges for {k} buckets" in out
    code, out, _ = run(capsys, "optimize", path, "--buckets", "6", "--json")
    assert json.loads(out)["n_buckets_asked"] == 6 and json.loads(out)["gain_rule"] is None


def test_buckets_auto_follows_max_buckets_and_min_gain(capsys, data):
    hist, path = data
    code, out, _ = run(capsys, "optimize", path, "--buckets", "auto", "--max-buckets", "3")
    assert code == 0 and "--buckets auto took K = 3: the largest K swept (--max-buckets 3)" in out
    strict = _suggested(hist, min_gain=0.0001, batch_size=8)
    assert strict > _suggested(hist, batch_size=8)  # a smaller gain asked: more buckets
    code, out, _ = run(capsys, "optimize", path, "--buckets", "auto", "--min-gain", "0.0001", "--json")
    assert json.loads(out)["n_buckets"] == strict


def test_compare_buckets_auto(capsys, data):
    hist, path = data
    k = _suggested(hist, batch_size=4)
    argv = ["compare", path, "--buckets", "auto", "--batch-size", "4", "--epochs", "1", "--quiet"]
    code, out, _ = run(capsys, *argv, "--json")
    got = json.loads(out)
    assert code == 0 and got["edges"] == optimize_edges(hist, k, batch_size=4).edges
    assert got["n_buckets_asked"] == "auto" and got["gain_rule"]["n_buckets_suggested"] == k
    code, out, _ = run(capsys, *argv)
    assert f"the optimal edges for {k} buckets" in out and f"--buckets auto took K = {k}" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["optimize", "{path}", "--max-buckets", "5"], "--max-buckets applies only with --buckets auto"),
        (
            ["compare", "{path}", "--min-gain", "0.1", "--max-buckets", "4"],
            "--max-buckets and --min-gain apply",
        ),
        (["compare", "{path}", "--edges", "0,300,599", "--min-gain", "0.1"], "--min-gain applies only"),
    ],
)
def test_gain_rule_without_auto_is_a_mistake(capsys, data, argv, message):
    _, path = data
    code, out, err = run(capsys, *[a.format(path=path) for a in argv])
    assert_one_line_error(code, err, message)
    assert out == ""


@pytest.mark.parametrize(
    "argv, line",
    [
        (
            ["optimize", "x.csv", "--buckets", "zero"],
            "argument --buckets: expected a positive integer or auto, got 'zero'",
        ),
        (
            ["optimize", "x.csv", "--min-gain", "-1"],
            "argument --min-gain: expected a number in [0, 1] (0.01 = one percentage point), got '-1'",
        ),
        (
            ["report", "x.csv", "--out", "r", "--max-buckets", "0"],
            "argument --max-buckets: expected a positive integer, got '0'",
        ),
    ],
)
def test_bad_bucket_options_are_one_line(capsys, argv, line):
    code, out, err = run(capsys, *argv)
    assert (code, out, err) == (2, "", f"padding-workbench: error: {line}\n")


def test_report_passes_buckets_auto_and_the_gain_rule(tmp_path, data, monkeypatch):
    _, path = data
    seen = {}

    def fake_run_report(src, out_dir, **kw):
        seen.update(kw)
        raise ValueError("stop here")

    monkeypatch.setattr("analysis.report.run_report", fake_run_report)
    argv = ["report", str(path), "--out", str(tmp_path / "r"), "--quiet", "--buckets", "auto"]
    assert cli.main([*argv, "--max-buckets", "9", "--min-gain", "0.002"]) == 2
    assert (seen["n_buckets"], seen["max_buckets"], seen["min_gain"]) == ("auto", 9, 0.002)
    assert cli.main([*argv[:-2]]) == 2  # the defaults
    assert (seen["n_buckets"], seen["max_buckets"], seen["min_gain"]) == (None, 16, 0.01)  # run_report


_TINY_NOTEBOOK_CELLS = [
    "data_path = 'lengths.csv'\nn_buckets = 6  # K\nmax_buckets = 16  # sweep K from 1 to max_buckets\n"
    "min_gain = 0.01\nfigures_dir = None",
    "print(n_buckets, max_buckets, min_gain)",
]


def test_report_buckets_auto_end_to_end_without_papermill_warnings(tmp_path, caplog):
    """A real papermill run of a one-cell notebook: the K taken, recorded and passed on."""
    import logging

    import nbformat

    from analysis.report import run_report

    # LENGTHS rounded up to 30 distinct multiples of 20: the summary page's floor search over
    # ~600 distinct lengths was most of this test's time
    hist = LengthHistogram.from_lengths(LENGTHS // 20 * 20 + 20)
    path = save_histogram(hist, tmp_path / "lengths.csv")
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in _TINY_NOTEBOOK_CELLS]
    nb.cells[0].metadata["tags"] = ["parameters"]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, notebooks / "01_tiny.ipynb")
    k = _suggested(hist, max_buckets=5, min_gain=0.001, batch_size=8)
    with caplog.at_level(logging.WARNING, logger="papermill"):
        result = run_report(
            path,
            tmp_path / "out",
            n_buckets="auto",
            max_buckets=5,
            min_gain=0.001,
            notebooks_dir=notebooks,
            quiet=True,
        )
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    rec = result.recommendation
    settings = rec["settings"]
    assert (settings["n_buckets"], settings["n_buckets_asked"]) == (k, "auto")
    assert (settings["max_buckets"], settings["min_gain"]) == (5, 0.001)
    assert rec["n_buckets"] == k == rec["n_buckets_suggested"]
    assert rec["plan"]["edges"] == optimize_edges(hist, k, batch_size=8).edges
    (ran,) = rec["notebooks"]
    assert {n: ran["parameters"][n] for n in ("n_buckets", "max_buckets", "min_gain")} == {
        "n_buckets": k,
        "max_buckets": 5,
        "min_gain": 0.001,
    }
    executed = nbformat.read(tmp_path / "out" / "01_tiny.ipynb", as_version=4)
    assert executed.cells[-1].outputs[0]["text"] == f"{k} 5 0.001\n"
    with pytest.raises(ValueError, match="positive integer or 'auto'"):
        run_report(path, tmp_path / "out", n_buckets="many", notebooks_dir=notebooks)  # type: ignore[arg-type]


# ------------------------------------------------------------------------ notebooks' parameters
def test_papermill_parses_every_parameters_cell(caplog):
    """Papermill reads each notebook's parameters cell as :func:`notebook_parameters` does,
    warning about no line (a second ``=`` in a comment makes it skip the line)."""
    import logging

    import nbformat
    from papermill.translators import PythonTranslator

    from analysis.report import notebook_parameters, report_notebooks

    notebooks = report_notebooks(step_times=True)
    assert len(notebooks) == 4
    for path in notebooks:
        nb = nbformat.read(path, as_version=4)
        (cell,) = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
        with caplog.at_level(logging.WARNING, logger="papermill"):
            names = [p.name for p in PythonTranslator.inspect(cell)]
        assert not caplog.records, f"{path.name}: {caplog.text}"
        assert names == notebook_parameters(path), path.name


# ------------------------------------------------------------------------ close matches
@pytest.mark.parametrize(
    "argv, line",
    [
        (["optimize", "x.csv", "--bucket", "6"], "unrecognized argument --bucket (did you mean --buckets?)"),
        (["optimize", "x.csv", "--bucket=6"], "unrecognized argument --bucket (did you mean --buckets?)"),
        (
            ["compare", "x.csv", "--epoch", "2", "--wid"],
            "unrecognized arguments --epoch (did you mean --epochs?), --wid (did you mean --wide?)",
        ),
        (["report", "x.csv", "--ot", "r"], "unrecognized argument --ot (did you mean --out?)"),
        (["summary", "x.csv", "--frobnicate"], "unrecognized argument --frobnicate"),
        (["--quite", "summary", "x.csv"], "unrecognized argument --quite (did you mean --quiet?)"),
        (["optimise", "x.csv"], "unrecognized command optimise (did you mean optimize?)"),
        (["sumary", "x.csv"], "unrecognized command sumary (did you mean summary?)"),
        (
            ["xyzzy"],
            "unrecognized command xyzzy (choose from summary, optimize, compare, report, lengths, frontier)",
        ),
        (
            ["optimize", "x.csv", "--method", "optimall"],
            "argument --method: invalid choice: 'optimall' (choose from 'optimal', 'geometric', "
            "'equal_count', 'equal_tokens', 'greedy'); did you mean optimal?",
        ),
        (["optimize"], "the following arguments are required: SRC"),
    ],
)
def test_a_mistyped_option_or_command_names_the_close_match(capsys, argv, line):
    code, out, err = run(capsys, *argv)
    assert (code, out, err) == (2, "", f"padding-workbench: error: {line}\n")


def test_options_are_never_abbreviated(capsys):
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["optimize", "x.csv", "--max-tok", "100"])
    # values that look like options are left alone: a negative number, anything after --
    from analysis.cli._parser import spelling_error

    assert spelling_error(cli.build_parser(), ["compare", "x.csv", "--seed", "-1"]) is None
    assert spelling_error(cli.build_parser(), ["summary", "--", "--odd-name.csv"]) is None


def test_python_m_analysis_mistyped_option(data, tmp_path):
    _, path = data
    proc = _python_m("optimize", path, "--bucket", 6, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert (
        proc.stderr == "padding-workbench: error: unrecognized argument --bucket (did you mean --buckets?)\n"
    )


# ------------------------------------------------------------------------ import analysis
def test_import_analysis_reaches_exports_and_plots_lazily():
    code = """
import sys, analysis
assert "analysis.exports" not in sys.modules and "analysis.plots" not in sys.modules
assert "matplotlib" not in sys.modules
assert {"exports", "plots", "explore"} <= set(dir(analysis))
plan = analysis.optimize_edges(analysis.LengthHistogram.from_lengths([3, 5, 8, 20]), 2, batch_size=2)
print(analysis.exports.to_lhotse(plan)["duration_bins"], "matplotlib" in sys.modules)
print(analysis.plots.__name__, "matplotlib" in sys.modules)
try:
    analysis.nope
except AttributeError as exc:
    print(exc)
"""
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT), "MPLBACKEND": "Agg"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "[8.5] False",
        "analysis.plots True",
        "module 'analysis' has no attribute 'nope'",
    ]
