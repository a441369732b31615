"""The layers hold: every import points down, the engine imports no face and no UI library,
the ground reads no file, and no module grows past one idea.

Checked twice: statically (every ``import`` statement of every module, including those inside
functions: a lazy import is an import) and dynamically (``import analysis`` in a fresh
interpreter loads none of the forbidden packages).
"""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

import analysis

PACKAGE = Path(analysis.__file__).parent
#: The faces: they may import anything; nothing in the engine may import them (``tables``, the one
#: number formatter, is ground: ``narrative`` words its numbers with it).
FACES = {
    "cli",
    "report",
    "explorer",
    "exports",
    "progress",
    "plots",
    "narrative",
    "frontier_narrative",
    "narrative_strategies",
    "__main__",
}
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


#: The floors, bottom first: a module imports only from modules on lower floors, never from its
#: own floor or above (a subpackage is one unit: its modules import each other freely, without
#: cycles).  Every module of the package stands on a floor here, so a new module says where.
FLOOR_PLAN: tuple[tuple[str, ...], ...] = (
    (
        "_validate",
        "_version",
        "tables",
        "throughput",
        "case",
        "paths",
        "batch_stats",
    ),  # import nothing of ours
    ("lengths",),  # the histogram
    ("batching", "counting"),  # the vocabulary; a running count of lengths
    ("bucketed", "_order_stats", "synthetic", "step_shapes"),  # pure cores; a step's features
    ("waste", "step_time", "sampler", "mixing"),  # exact padding and mixing; step times; the sampler
    ("strategies",),  # epoch builders, one table (exact ones priced by waste)
    ("epoch_metrics", "optimize", "loaders"),  # measuring epochs; edge placement; length files
    ("simulation", "measure"),  # simulated epochs; raw data -> lengths
    ("epoch_time", "plots"),  # every step-time prediction; figures
    ("recommendation", "progress", "exports", "steps_text", "tradeoff", "pack_or_pad"),
    ("explorer", "narrative", "frontier_narrative", "narrative_strategies", "narrative_packing"),
    ("report",),
    ("cli",),
    ("__main__",),
)
FLOORS = {unit: floor for floor, units in enumerate(FLOOR_PLAN) for unit in units}
#: The largest module, in lines: past this a module holds more than one idea.
MAX_MODULE_LINES = 450


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


def _unit(module: str) -> str:
    """The floor unit of ``analysis.x.y``: ``x`` (a top-level module or subpackage)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


@cache
def _graph() -> dict[str, dict[str, set[str]]]:
    """Every module of the package -> {imported module of the package: names imported from it}.

    ``from analysis.a import b`` counts as an import of ``analysis.a.b`` when that is a module.
    """
    modules = {
        "analysis" + ("." + _module_name(p) if _module_name(p) != "__init__" else ""): p
        for p in PACKAGE.rglob("*.py")
    }
    graph: dict[str, dict[str, set[str]]] = {}
    for name, path in modules.items():
        out: dict[str, set[str]] = {}
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [(alias.name, None) for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "analysis":
                targets = []
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    targets.append((full, None) if full in modules else (node.module, alias.name))
            else:
                continue
            for target, imported in targets:
                if target.split(".")[0] != "analysis":
                    continue
                while target not in modules:  # `import analysis.a.b` of a package attribute
                    target = target.rsplit(".", 1)[0]
                if target != name:
                    out.setdefault(target, set()).update({imported} if imported else set())
        graph[name] = out
    return graph


def _cycles(graph: dict[str, dict[str, set[str]]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_cycle_finder_finds_a_cycle():
    graph = {"a": {"b": set()}, "b": {"c": set()}, "c": {"a": set()}, "d": {"a": set()}}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert _cycles({"a": {"b": set()}, "b": {}}) == []


def test_no_import_cycles():
    """No two modules import each other, directly or around a loop, lazy imports included."""
    cycles = _cycles(_graph())
    assert not cycles, "\n".join(" <-> ".join(c) for c in cycles)


def test_every_module_has_a_floor():
    units = {_unit(m) for m in _graph()} - {"__init__"}
    assert not units - FLOORS.keys(), f"give these modules a floor in FLOORS: {sorted(units - FLOORS.keys())}"
    assert not FLOORS.keys() - units, (
        f"FLOORS names modules that do not exist: {sorted(FLOORS.keys() - units)}"
    )


def test_every_import_points_down():
    """A module imports only from lower floors; nothing inside the package imports ``analysis``
    itself (the package's ``__init__`` imports everything)."""
    upward = []
    for importer, imported in _graph().items():
        for target in imported:
            a, b = _unit(importer), _unit(target)
            if a == "__init__" or a == b:
                continue
            if b == "__init__" or FLOORS.get(b, -1) >= FLOORS.get(a, -1):
                upward.append(f"{importer} -> {target}")
    assert not upward, "\n".join(upward)


def test_no_private_name_crosses_a_module_boundary():
    """``from analysis.a import _x`` only between modules of one subpackage."""
    crossing = []
    for importer, imported in _graph().items():
        for target, names in imported.items():
            private = sorted(n for n in names if n.startswith("_") and not n.startswith("__"))
            unit = _unit(importer)
            same_package = unit == _unit(target) and (PACKAGE / unit).is_dir()
            if private and not same_package:
                crossing.append(f"{importer} imports {', '.join(private)} from {target}")
    assert not crossing, "\n".join(crossing)


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=_module_name)
def test_module_holds_one_idea(path):
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_MODULE_LINES, f"{_module_name(path)}: {lines} lines; split it by idea"


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
    """Every public name appears in a notebook, the README or a face module; the lazy
    ``explore`` is offered by ``dir`` without being loaded; the vocabulary helpers and the
    case's constants live in their modules, not at the top level."""
    root = PACKAGE.parent
    texts = [p.read_text(encoding="utf-8") for p in (root / "notebooks").glob("*.ipynb")]
    texts += [(root / "README.md").read_text(encoding="utf-8")]
    for face in ("cli", "report", "explorer"):  # a module, or a package of modules
        texts += [
            p.read_text(encoding="utf-8")
            for p in [PACKAGE / f"{face}.py", *PACKAGE.glob(f"{face}/*.py")]
            if p.exists()
        ]
    public = [n for n in analysis.__all__ if n != "__version__"]
    assert len(public) <= 30  # one name per question (the 30th: frontier, the trade-off)
    unused = [n for n in public if not any(n in t for t in texts)]
    assert not unused, unused
    assert "explore" in dir(analysis) and "explore" not in analysis.__all__
    homes = {  # kept out of the top level, still importable from their modules
        "batching": ("check_edges", "cover_edges", "parse_edges"),
        "case": ("CASE_EDGES", "CASE_GEOMETRIC_EDGES"),
        "waste": ("expected_padding", "random_padding", "sorted_padding"),
        "optimize": ("recommend_n_buckets",),
        "recommendation": ("compare_edge_sets",),
    }
    for module, names in homes.items():
        home = importlib.import_module(f"analysis.{module}")
        for name in names:
            assert name not in public and not hasattr(analysis, name) and hasattr(home, name), name


def test_every_subpackage_is_installed():
    """A subpackage missing from pyproject's setuptools ``packages`` works in an editable install
    and is silently left out of a wheel."""
    import tomllib

    listed = set(
        tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text("utf-8"))["tool"]["setuptools"][
            "packages"
        ]
    )
    found = {
        ".".join(p.parent.relative_to(PACKAGE.parent).parts)
        for p in PACKAGE.rglob("__init__.py")
        if "templates" not in p.parts
    }
    assert listed == found, (sorted(found - listed), sorted(listed - found))
