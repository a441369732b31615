"""The layers hold: the engine imports no face and no UI library; the ground reads no file.

Checked twice: statically (every ``import`` statement of every engine module, including those
inside functions) and dynamically (``import analysis`` in a fresh interpreter loads none of
the forbidden packages).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import analysis

PACKAGE = Path(analysis.__file__).parent
#: The faces: they may import anything; nothing in the engine may import them.
FACES = {"cli", "_cli_lengths", "report", "explorer", "exports", "progress", "plots", "__main__"}
#: Never imported by the engine (UI, notebooks, report tooling, deep-learning frameworks).
FORBIDDEN = {
    "matplotlib",
    "IPython",
    "ipywidgets",
    "papermill",
    "nbformat",
    "nbconvert",
    "tqdm",
    "torch",
    "ipykernel",
}
#: The ground, the padding model and the step-time model: pure functions of values, no file access.
NO_FILES = {"lengths", "counting", "batching", "waste", "_order_stats", "step_time"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(p for p in parts if p != "__init__") or "__init__"


def _engine_files() -> list[Path]:
    files = []
    for path in sorted(PACKAGE.rglob("*.py")):
        top = path.relative_to(PACKAGE).parts[0].removesuffix(".py")
        if top not in FACES:
            files.append(path)
    return files


def _imports(path: Path) -> set[str]:
    """Absolute names of every module ``path`` imports (relative imports resolved)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                raise AssertionError(f"{path}: relative import; the package uses absolute ones")
            out.add(node.module or "")
            out.update(f"{node.module}.{alias.name}" for alias in node.names)
    return out


def test_there_is_an_engine_and_there_are_faces():
    names = {_module_name(p) for p in _engine_files()}
    assert {"lengths", "batching", "waste", "optimize", "simulation", "recommendation"} <= names
    assert not names & FACES


@pytest.mark.parametrize("path", _engine_files(), ids=_module_name)
def test_engine_module_imports_no_face_and_no_ui(path):
    for name in _imports(path):
        top = name.split(".")[0]
        assert top not in FORBIDDEN, f"{_module_name(path)} imports {name}"
        if top == "analysis" and path.name != "__init__.py":  # the package's lazy `explore` aside
            parts = name.split(".")
            assert len(parts) < 2 or parts[1] not in FACES, f"{_module_name(path)} imports {name}"


@pytest.mark.parametrize("name", sorted(NO_FILES))
def test_ground_modules_read_no_file(name):
    path = PACKAGE / f"{name}.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    called = {
        node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
    }
    reads = {
        "open",
        "load",
        "read_csv",
        "read_parquet",
        "read_text",
        "read_bytes",
        "loadtxt",
        "fromfile",
        "read_table",
        "read_json",
    }
    assert not called & reads, f"{name} calls {sorted(called & reads)}"
    assert not _imports(path) & {"os", "pathlib", "glob", "io", "gzip", "json"}, name


def test_import_analysis_loads_no_ui_library():
    code = "import json, sys, analysis; print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    loaded = set(
        json.loads(
            subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        )
    )
    assert not loaded & FORBIDDEN, sorted(loaded & FORBIDDEN)


def test_no_name_is_both_a_module_and_a_public_function():
    modules = {p.stem for p in PACKAGE.glob("*.py")} | {p.name for p in PACKAGE.iterdir() if p.is_dir()}
    clashes = {name for name in analysis.__all__ if name in modules}
    assert not clashes


def test_public_api_is_small_and_each_name_is_used_by_a_face():
    """Every public name appears in a notebook, the README or a face module."""
    root = PACKAGE.parent
    texts = [p.read_text(encoding="utf-8") for p in (root / "notebooks").glob("*.ipynb")]
    texts += [(root / "README.md").read_text(encoding="utf-8")]
    texts += [(PACKAGE / f"{face}.py").read_text(encoding="utf-8") for face in ("cli", "report", "explorer")]
    public = [n for n in analysis.__all__ if n != "__version__"]
    assert len(public) <= 34  # 30, plus the step-time model's four (issue 13)
    unused = [n for n in public if not any(n in t for t in texts)]
    assert not unused, unused
