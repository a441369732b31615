"""The report and measured step times: a notebook that needs them (its parameters cell defines
``step_times_path``) runs only with ``--step-times``, which is checked before any notebook."""

from __future__ import annotations

import json
import shutil

import nbformat
import numpy as np
import pandas as pd
import pytest

from analysis import LengthHistogram, StepTimeModel, cli, save_histogram, tidy
from analysis.paths import NOTEBOOKS_DIR
from analysis.report import report_notebooks, run_report
from tests.integration.test_report import _tiny_notebook

LENGTHS = np.random.default_rng(11).integers(1, 31, size=500) * 30  # 30 distinct: see test_report.py


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
    times = tmp_path / "times.csv"  # 9 shapes timed twice: enough to fit the model
    shapes = [(b, n) for b in (2, 4, 8) for n in (64, 256, 1024)] * 2
    frame = pd.DataFrame(shapes, columns=["batch_size", "length"])
    frame["seconds"] = 0.01 + 1e-6 * frame["batch_size"] * frame["length"] * np.r_[[1.0] * 9, [1.01] * 9]
    frame.to_csv(times, index=False)
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
    monkeypatch.setattr("analysis.report._folder.NOTEBOOKS_DIR", nbs)  # the default run_report reads
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
    assert executed.cells[-1].outputs[0]["text"] == "18\n"


def _shown(frame: pd.DataFrame) -> str:
    """``frame`` as a notebook kernel prints it (80 columns, notebook 04's precision)."""
    with pd.option_context("display.max_columns", 20, "display.width", 80, "display.precision", 4):
        return repr(frame)


def _output_text(nb, marker: str) -> str:
    """The text/plain output of the one code cell whose source holds ``marker``."""
    (cell,) = [c for c in nb.cells if c.cell_type == "code" and marker in c.source]
    return "".join(o["data"]["text/plain"] for o in cell.outputs if "data" in o)


def test_recommendation_carries_notebook_04s_numbers(tmp_path):
    """With step times, recommendation.json holds the step-time model, the edges of both
    objectives at the report's K with their epoch time, and every strategy's tokens/s: the
    same numbers notebook 04 shows (its tables rebuilt from the JSON print the same)."""
    nbs = tmp_path / "notebooks"
    nbs.mkdir()
    real = NOTEBOOKS_DIR / "04_throughput.ipynb"
    shutil.copy(real, nbs / real.name)
    (tmp_path / "data").mkdir()  # the notebook's validation_path is ../data/...
    shutil.copy(NOTEBOOKS_DIR.parent / "data" / "step_time_validation.csv", tmp_path / "data")
    truth = StepTimeModel(per_step=0.02, per_token=2e-6, attention=1e-9)
    shapes = pd.DataFrame(
        [(b, n) for b in (2, 4, 8) for n in (64, 256, 1024)] * 2, columns=["batch_size", "length"]
    )
    noise = np.random.default_rng(3).normal(1, 0.02, len(shapes))
    shapes["seconds"] = truth.predict(shapes["batch_size"], shapes["length"]) * noise
    times = tmp_path / "times.csv"
    shapes.to_csv(times, index=False)
    src = save_histogram(LengthHistogram.from_lengths(LENGTHS), tmp_path / "in.csv")
    result = run_report(
        src, tmp_path / "out", n_buckets=3, step_times=times, notebooks_dir=nbs, quiet=True, seed=5
    )
    rec = json.loads((tmp_path / "out" / "recommendation.json").read_text())
    step = rec["step_time"]
    assert step == result.recommendation["step_time"] and step["n_buckets"] == 3
    executed = nbformat.read(tmp_path / "out" / real.name, as_version=4)
    # the coefficients
    model = StepTimeModel.fit(shapes)
    assert step["model"]["coefficients"] == dict(zip(model.to_frame().index, model.coefficients.tolist()))
    coefficients = model.to_frame().assign(
        coefficient=[f"{step['model']['coefficients'][t]:.3g} s" for t in model.to_frame().index]
    )
    assert _output_text(executed, "model.to_frame()") == _shown(coefficients)
    # every strategy's predicted tokens/s, as the notebook's table shows them
    strategies = pd.DataFrame(step["strategies"]).T.rename_axis("strategy")
    columns = ["batch_rule", "exact", "batches", "efficiency", "tokens_per_s", "padded_tokens_per_s"]
    shown = strategies[columns].astype({c: float for c in columns[2:]} | {"exact": bool})
    assert _output_text(executed, "study.strategies") == _shown(tidy(shown))
    assert rec["throughput"]["predicted_tokens_per_s"] == strategies["tokens_per_s"].to_dict()
    assert rec["throughput"]["model"].startswith("analysis.predict_strategy_throughput")
    # the edges of both objectives at K, their expected epoch time beside them
    by_objective = pd.DataFrame(step["edges_by_objective"]).T.rename_axis("objective")
    at_k = by_objective[["edges", "efficiency", "tokens_per_s"]].astype(
        {"efficiency": float, "tokens_per_s": float}
    )
    assert _output_text(executed, "study.at_k()") == _shown(tidy(at_k))
    assert step["time_plan"]["edges"] == step["edges_by_objective"]["time"]["edges"]
    assert step["edges_by_objective"]["padding"]["edges"] == rec["plan"]["edges"]  # the report's plan
    for row in step["edges_by_objective"].values():
        assert row["seconds"] > 0 and row["tokens_per_s"] == pytest.approx(LENGTHS.sum() / row["seconds"])
    runs = {r["notebook"]: r for r in rec["notebooks"]}
    assert (
        runs[real.name]["parameters"]["seed"] == 5
        and runs[real.name]["parameters"]["epochs"] == step["epochs"]
    )


def test_step_times_the_model_cannot_fit_fail_before_any_notebook(setup, tmp_path, capsys, monkeypatch):
    """recommendation.json fits the model notebook 04 fits: a file it cannot fit (a shape timed
    once) fails in one line before any notebook runs."""
    nbs, src, _ = setup
    monkeypatch.setattr("analysis.report._folder.NOTEBOOKS_DIR", nbs)
    once = tmp_path / "once.csv"
    pd.DataFrame({"batch_size": [4, 4, 8], "length": [64, 64, 64], "seconds": [0.1, 0.11, 0.2]}).to_csv(
        once, index=False
    )
    out = tmp_path / "out"
    code = cli.main(["--quiet", "report", str(src), "--out", str(out), "--step-times", str(once)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "measured once" in err and not (out / "01_plain.ipynb").exists()
