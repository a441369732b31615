"""The layers hold: every import points down, the engine imports no face and no UI library,
the ground reads no file, no function grows past one screen, and ``_x`` stays in its file.

Checked twice: statically (every ``import`` statement of every module, including those inside
functions: a lazy import is an import) and dynamically (``import analysis`` in a fresh
interpreter loads none of the forbidden packages).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import io
import json
import re
import subprocess
import sys
import tokenize
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
#: Imported by the engine on first use only, never by ``import analysis``.
ON_FIRST_USE = {"scipy.special", "scipy.optimize"}
#: The ground, the padding model and the step-time model: pure functions of values, no file access.
NO_FILES = {"lengths", "counting", "batching", "padding", "timing"}


#: The floors, bottom first: a module imports only from modules on lower floors, never from its
#: own floor or above (a subpackage is one unit: its modules import each other freely, without
#: cycles).  Every module of the package stands on a floor here, so a new module says where.
FLOOR_PLAN: tuple[tuple[str, ...], ...] = (
    ("_validate", "_version", "tables", "paths", "progress"),  # import nothing of ours
    ("lengths",),  # the histogram
    ("batching", "counting", "case"),  # the vocabulary; a running count; the case and its data
    ("padding",),  # exact expected padding, steps, budget fill and mixing
    ("timing",),  # a step's shape, the fitted step-time model, an exact epoch's seconds
    ("simulation", "optimize"),  # simulated epochs (the sampler's core); edge placement
    ("answers", "loaders", "sampler"),  # what a review reads; files in; the training sampler
    ("measure", "plots", "exports"),  # raw data -> lengths; figures; trainer configs
    ("narrative",),  # every sentence
    ("explorer", "report"),  # the live panel; the report
    ("cli",),
    ("__main__",),
)
FLOORS = {unit: floor for floor, units in enumerate(FLOOR_PLAN) for unit in units}
#: The longest function, in code lines (no docstring, comment or blank line): a module holds one
#: question and may be long; a function past this holds more than one step.
MAX_FUNCTION_LINES = 60
#: The functions allowed past it, each with why (``module:function``).
LONG_FUNCTIONS = {
    # declarative: one add_argument call per option, read top to bottom
    "cli:build_parser": "the parser: one declaration per option and subcommand",
    # compiled (numba) kernels: a split would cost a call per cell in the hot loop
    "optimize._costs:row_sums": "compiled kernel",
    "optimize._labels:_layer": "compiled kernel",
    # figures: one matplotlib call per element, in drawing order
    "plots._common:place_labels": "label placement: one loop over candidates and collisions",
    "plots.frontier:plot_frontier": "a figure, element by element",
    "plots.buckets:plot_efficiency_vs_buckets": "a figure, element by element",
    # to split by the helpers of the re-layering
    "report._run:run_report": "the report's named steps, in order",
    "answers.throughput:predict_strategy_throughput": "one row per strategy, exact or simulated",
    "answers.frontier:frontier": "every strategy's rows, gathered in order",
    "measure._sources:plan_paths": "every input format's branch",
    "measure:measure_lengths": "argument checks, then the run",
    "simulation.metrics:_measure_epoch": "every metric of one epoch from one pass over its batches",
    "explorer._panel:__init__": "the widgets, declared in display order",
    "optimize._problem:build_problem": "the prefix arrays of every objective",
    "simulation.bucketed:bucket_layout": "the layout of the bucketed shuffle",
}


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


def _private_imports(graph: dict[str, dict[str, set[str]]]) -> list[str]:
    """``from a import _x`` anywhere: ``_x`` is local to its file (the scikit-learn convention;
    names that siblings share are plain, and a private *module* may be imported)."""
    return [
        f"{importer} imports {', '.join(sorted(private))} from {target}"
        for importer, imported in graph.items()
        for target, names in imported.items()
        if (private := {n for n in names if n.startswith("_") and not n.startswith("__")})
    ]


def test_private_import_checker_finds_one():
    graph = {"analysis.a": {"analysis.b": {"_x", "y"}}, "analysis.c": {"analysis.b": {"y"}}}
    assert _private_imports(graph) == ["analysis.a imports _x from analysis.b"]


def test_no_private_name_leaves_its_file():
    """``_x`` is local to its file; what a sibling module uses has a plain name."""
    crossing = _private_imports(_graph())
    assert not crossing, "\n".join(crossing)


def _lines_with_code(source: str) -> set[int]:
    """The lines of ``source`` that a token other than a comment or a line break touches (a
    string spanning lines touches each of them), tokenized once for every function."""
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT}
    lines: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type not in skip and tok.type != tokenize.ENDMARKER:
            lines.update(range(tok.start[0], tok.end[0] + 1))
    return lines


def _code_lines(code: set[int], node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines of ``node`` holding code (``code``: the file's, from :func:`_lines_with_code`): no
    docstring, comment or blank line."""
    first = node.body[0]
    doc = (
        range(first.lineno, (first.end_lineno or first.lineno) + 1)
        if isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
        else range(0)
    )
    return sum(
        1
        for line in range(node.lineno, (node.end_lineno or node.lineno) + 1)
        if line in code and line not in doc
    )


def _long_functions(source: str, module: str) -> dict[str, int]:
    """``module:function`` -> code lines, for every function of ``source`` past the limit."""
    code = _lines_with_code(source)
    return {
        f"{module}:{node.name}": lines
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and (lines := _code_lines(code, node)) > MAX_FUNCTION_LINES
    }


def test_function_length_checker_finds_one():
    """The ``def`` line counts; the docstring, comments and blank lines do not."""
    body = "".join(f"    x{i} = {i}  # a comment\n\n" for i in range(MAX_FUNCTION_LINES - 1))
    source = f'def f():\n    """Doc\n\n    lines."""\n{body}    return 0\n\n\ndef g():\n{body}'
    assert _long_functions(source, "m") == {"m:f": MAX_FUNCTION_LINES + 1}


def test_every_function_fits_a_screen():
    """About 60 code lines a function; the exceptions are named, each with its reason."""
    found: dict[str, int] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        found.update(_long_functions(path.read_text(encoding="utf-8"), _module_name(path)))
    too_long = {name: lines for name, lines in found.items() if name not in LONG_FUNCTIONS}
    assert not too_long, f"split these functions (or name them in LONG_FUNCTIONS, with why): {too_long}"
    stale = sorted(LONG_FUNCTIONS.keys() - found.keys())
    assert not stale, f"LONG_FUNCTIONS names functions that now fit: {stale}"


def test_there_is_an_engine_and_there_are_faces():
    names = {_module_name(p) for p in _engine_files()}
    assert {
        "lengths",
        "batching",
        "padding.waste",
        "optimize",
        "simulation.epochs",
        "answers.recommendation",
    } <= names
    assert not names & FACES


@pytest.mark.parametrize("path", _engine_files(), ids=_module_name)
def test_engine_module_imports_no_face_and_no_ui(path):
    for name in _imports(path):
        top = name.split(".")[0]
        assert top not in FORBIDDEN, f"{_module_name(path)} imports {name}"
        if top == "analysis" and path.name != "__init__.py":  # the package's lazy `explore` aside
            parts = name.split(".")
            assert len(parts) < 2 or parts[1] not in FACES, f"{_module_name(path)} imports {name}"


def _no_file_paths() -> list[Path]:
    return sorted(
        path
        for name in NO_FILES
        for path in (
            [PACKAGE / f"{name}.py"] if (PACKAGE / f"{name}.py").exists() else (PACKAGE / name).rglob("*.py")
        )
    )


@pytest.mark.parametrize("path", _no_file_paths(), ids=_module_name)
def test_ground_modules_read_no_file(path):
    name = _module_name(path)
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
    """No UI library (:data:`FORBIDDEN`), nor what the engine imports on first use only:
    ``scipy.special`` (the order statistics' rare rows; ``python -c "import analysis"`` took
    0.81-1.01 s of CPU without it, 1.08-1.24 s with it, taking turns) and ``scipy.optimize`` (a
    step-time model's fit)."""
    code = "import json, sys, analysis; print(json.dumps(sorted(sys.modules)))"
    modules = set(
        json.loads(
            subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        )
    )
    loaded = {m.split(".")[0] for m in modules}
    assert not loaded & FORBIDDEN, sorted(loaded & FORBIDDEN)
    assert not modules & ON_FIRST_USE, sorted(modules & ON_FIRST_USE)


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
        "padding.waste": ("expected_padding", "random_padding", "sorted_padding"),
        "optimize": ("recommend_n_buckets",),
        "answers.recommendation": ("compare_edge_sets",),
    }
    for module, names in homes.items():
        home = importlib.import_module(f"analysis.{module}")
        for name in names:
            assert name not in public and not hasattr(analysis, name) and hasattr(home, name), name


def test_the_readme_api_table_is_the_public_api():
    """The README's table of public names (``| group | names |``) names every name of
    ``analysis.__all__``, and every top-level name it shows is in ``__all__``."""
    text = (PACKAGE.parent / "README.md").read_text(encoding="utf-8")
    table = text.split("| group | names |", 1)[1].split("\n\n", 1)[0]
    shown = {
        name
        for row in table.splitlines()[2:]
        for name in re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", row.split("|")[2])
        if hasattr(analysis, name) and not inspect.ismodule(getattr(analysis, name))
    }
    assert shown == set(analysis.__all__) - {"__version__"}


def test_every_folder_is_installed():
    """pyproject's setuptools ``packages.find`` reaches every folder of the package (a folder it
    missed works in an editable install and is silently left out of a wheel), the templates'
    folders included (else setuptools prints a warning block per folder on every install), and
    no ``__pycache__``."""
    import tomllib

    from setuptools import find_namespace_packages

    find = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text("utf-8"))["tool"]["setuptools"][
        "packages"
    ]["find"]
    installed = set(find_namespace_packages(str(PACKAGE.parent), **find))
    folders = {
        ".".join(p.relative_to(PACKAGE.parent).parts)
        for p in [PACKAGE, *PACKAGE.rglob("*")]
        if p.is_dir() and "__pycache__" not in p.parts
    }
    assert installed == folders, (sorted(folders - installed), sorted(installed - folders))


def _readme_floors() -> list[tuple[str, ...]]:
    """The units of the README's Layout table, floor by floor (``case/`` read as ``case``)."""
    text = (PACKAGE.parent / "README.md").read_text(encoding="utf-8")
    table = text.split("## Layout", 1)[1].split("\n\n", 2)[2].split("\n\n", 1)[0]
    rows = [line.split("|")[2] for line in table.splitlines()[2:]]
    return [tuple(u.strip("` /") for u in row.split(",")) for row in rows]


def test_readme_layout_is_the_floor_plan():
    assert _readme_floors() == [tuple(units) for units in FLOOR_PLAN]
