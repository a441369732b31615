"""The stored notebooks: nbval-ready (outputs with execution counts), no volatile metadata,
the parameters cell first after the title, and every figure saved only when asked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).parents[2] / "notebooks").glob("[0-9]*.ipynb"))


def test_there_are_notebooks():
    assert [p.name[:2] for p in NOTEBOOKS] == [f"{i:02d}" for i in range(1, len(NOTEBOOKS) + 1)]
    assert len(NOTEBOOKS) >= 3


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_stored_for_nbval(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    for cell in nb["cells"]:  # stored as a list of lines
        cell["source"] = "".join(cell["source"])
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert all(isinstance(c["execution_count"], int) for c in code), "run `make notebooks`"
    assert [c["execution_count"] for c in code] == list(range(1, len(code) + 1))
    assert all("execution" not in c["metadata"] for c in nb["cells"]), "volatile timestamps"
    assert "version" not in nb["metadata"].get("language_info", {})
    assert nb["cells"][0]["cell_type"] == "markdown" and nb["cells"][0]["source"].startswith("# ")
    assert "parameters" in nb["cells"][1]["metadata"].get("tags", [])
    params = nb["cells"][1]["source"]
    assert "figures_dir = None" in params  # tests and nbval never write figures
    for cell in code:
        for out in cell["outputs"]:
            assert out["output_type"] != "error"
            assert out.get("name") != "stderr", "a warning in a stored output"


def test_reports_guard_sees_a_change(tmp_path):
    from tests.reports_guard import snapshot

    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "a.png").write_bytes(b"1")
    before = snapshot(tmp_path)
    assert snapshot(tmp_path) == before
    (tmp_path / "figures" / "a.png").write_bytes(b"2")
    assert snapshot(tmp_path) != before
