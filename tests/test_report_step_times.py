"""The report and measured step times: a notebook that needs them (its parameters cell defines
``step_times_path``) runs only with ``--step-times``, which is checked before any notebook."""

from __future__ import annotations

import json

import nbformat
import numpy as np
import pandas as pd
import pytest

from analysis import LengthHistogram, cli, save_histogram
from analysis.report import report_notebooks
from tests.test_report import _tiny_notebook

LENGTHS = np.random.default_rng(11).integers(20, 900, size=500)


@pytest.fixture
def setup(tmp_path):
    nbs = tmp_path / "nbs"
    nbs.mkdir()
    _tiny_notebook(nbs / "01_plain.ipynb", params="seed = 0", body="print(seed)")
    _tiny_notebook(
        nbs / "04_times.ipynb",
        params="step_times_path = None",
        body="from analysis.loaders import load_step_times\nprint(len(load_step_times(step_times_path)))",
    )
    src = save_histogram(LengthHistogram.from_lengths(LENGTHS), tmp_path / "in.csv")
    times = tmp_path / "times.csv"
    pd.DataFrame({"batch_size": [4, 4, 8], "length": [64, 64, 64], "seconds": [0.1, 0.11, 0.2]}).to_csv(
        times, index=False
    )
    return nbs, src, times


def test_the_step_times_notebook_runs_only_when_given(setup, shared_report):
    nbs, _, _ = setup
    assert [p.name for p in report_notebooks(nbs)] == ["01_plain.ipynb"]
    assert [p.name for p in report_notebooks(nbs, step_times=True)] == ["01_plain.ipynb", "04_times.ipynb"]
    # without step times (the shared report on the real notebooks): 04_throughput is skipped
    out = shared_report.out
    without = json.loads((out / "recommendation.json").read_text())
    needs_times = [p.name for p in report_notebooks(step_times=True) if p not in report_notebooks()]
    assert needs_times == ["04_throughput.ipynb"]
    every = [p.name for p in report_notebooks(step_times=True)]
    assert [r["notebook"] for r in without["notebooks"]] == [n for n in every if n not in needs_times]
    assert [s["notebook"] for s in without["notebooks_skipped"]] == needs_times
    assert "--step-times" in without["notebooks_skipped"][0]["reason"]
    assert without["settings"]["step_times"] is None
    assert not (out / "04_throughput.ipynb").exists()


def test_cli_step_times_and_a_bad_file_fails_before_any_notebook(setup, tmp_path, capsys, monkeypatch):
    nbs, src, times = setup
    monkeypatch.setattr("analysis.report._run.NOTEBOOKS_DIR", nbs)  # the default run_report reads
    bad = tmp_path / "bad.csv"
    bad.write_text("batch_size,length,seconds\n4,64,-1\n")
    out = tmp_path / "out"
    code = cli.main(["--quiet", "report", str(src), "--out", str(out), "--step-times", str(bad)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "bad.csv: row 0: seconds = -1" in err and not out.exists()
    code = cli.main(["--quiet", "report", str(src), "--out", str(out), "--step-times", str(times)])
    assert code == 0, capsys.readouterr().err
    rec = json.loads((out / "recommendation.json").read_text())
    assert [r["notebook"] for r in rec["notebooks"]] == ["01_plain.ipynb", "04_times.ipynb"]
    assert "--step-times" in rec["command"]
    # with step times, the notebook that needs them runs with their absolute path
    runs = {r["notebook"]: r for r in rec["notebooks"]}
    assert rec["notebooks_skipped"] == []
    assert runs["04_times.ipynb"]["parameters"] == {"step_times_path": str(times.resolve())}
    assert "step_times_path" not in runs["01_plain.ipynb"]["parameters"]
    assert rec["settings"]["step_times"] == str(times.resolve())
    executed = nbformat.read(out / "04_times.ipynb", as_version=4)
    assert executed.cells[-1].outputs[0]["text"] == "3\n"
