"""The command line, end to end on temporary data."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from analysis import LengthHistogram, cli, save_histogram
from analysis.paths import PROJECT_ROOT

LENGTHS = np.random.default_rng(7).integers(5, 600, size=3_000)


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
    assert ", ".join(map(str, plan.edges)) in out and f"{100 * plan.efficiency:.1f}%" in out
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
    assert "default: 6" in out and "default: 1701" in out


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
