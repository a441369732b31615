"""How the report runs its notebooks: which notebooks (:func:`report_notebooks`), the
parameters a notebook defines (:func:`notebook_parameters`), executing one with papermill in
a kernel of its own configuration, and converting it to HTML.  Papermill, nbconvert and
nbformat are imported here only, inside the functions (they are dev/report dependencies)."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from analysis.paths import NOTEBOOKS_DIR

__all__ = ["notebook_parameters", "report_notebooks", "STEP_TIMES_PARAMETER"]

_KERNEL = "python3"


def notebook_parameters(path: str | os.PathLike[str]) -> list[str]:
    """Names defined in the notebook's cell tagged ``parameters`` (empty list when none).

    Examples
    --------
    >>> import nbformat, tempfile, pathlib
    >>> nb = nbformat.v4.new_notebook()
    >>> cell = nbformat.v4.new_code_cell("data_path = 'x.csv'\\nbatch_size = 8  # samples")
    >>> cell.metadata["tags"] = ["parameters"]
    >>> nb.cells.append(cell)
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "nb.ipynb"
    >>> nbformat.write(nb, p)
    >>> notebook_parameters(p)
    ['data_path', 'batch_size']
    """
    import ast

    import nbformat

    nb = nbformat.read(path, as_version=4)  # type: ignore[no-untyped-call]  # nbformat ships no types
    names: list[str] = []
    for cell in nb.cells:
        if cell.cell_type != "code" or "parameters" not in cell.get("metadata", {}).get("tags", []):
            continue
        for node in ast.parse(cell.source).body:
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, ast.AnnAssign)
                else []
            )
            names += [t.id for t in targets if isinstance(t, ast.Name) and t.id not in names]
    return names


#: The parameter that marks a notebook as needing measured step times (``--step-times``).
STEP_TIMES_PARAMETER = "step_times_path"


def report_notebooks(
    folder: str | os.PathLike[str] = NOTEBOOKS_DIR, *, step_times: bool = False
) -> list[Path]:
    """The notebooks a report runs: ``NN_name.ipynb`` in ``folder``, in number order
    (scratch notebooks without a number prefix are skipped); a notebook that needs measured
    step times (its parameters cell defines ``step_times_path``) only when ``step_times``.

    Examples
    --------
    >>> [p.name for p in report_notebooks()] == sorted(p.name for p in report_notebooks())
    True
    >>> len(report_notebooks(step_times=True)) >= len(report_notebooks())
    True
    """
    found = sorted(p for p in Path(folder).glob("*.ipynb") if re.match(r"\d+_", p.name))
    if step_times:
        return found
    return [p for p in found if STEP_TIMES_PARAMETER not in notebook_parameters(p)]


def _notebooks(folder: Path, step_times: bool) -> list[Path]:
    found = report_notebooks(folder, step_times=step_times)
    if not found:
        raise ValueError(f"{folder}: no notebooks to run (expected NN_name.ipynb files)")
    return found


@contextlib.contextmanager
def _environ(values: Mapping[str, str]) -> Iterator[None]:
    """Set environment variables for the kernels papermill starts, then restore them."""
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


#: IPython configuration of the report's kernels: figures display inline (so the HTML shows
#: them even when a notebook never imports pyplot) and the kernel's startup warnings (e.g.
#: "running over TCP without encryption") stay off the report's terminal.
_KERNEL_CONFIG = """\
c.IPKernelApp.matplotlib = "inline"
c.IPKernelApp.log_level = "CRITICAL"
"""


def _kernel_environ(ipython_dir: Path) -> dict[str, str]:
    """Environment of the report's kernels: a fresh IPython profile (no user startup files)
    and the inline figure backend."""
    profile = ipython_dir / "profile_default"
    profile.mkdir(parents=True, exist_ok=True)
    (profile / "ipython_kernel_config.py").write_text(_KERNEL_CONFIG, encoding="utf-8")
    return {"IPYTHONDIR": str(ipython_dir), "MPLBACKEND": "module://matplotlib_inline.backend_inline"}


def _run_notebook(
    src: Path, dst: Path, parameters: dict[str, Any], *, cwd: Path, show_progress: bool
) -> None:
    import papermill
    from papermill.exceptions import PapermillExecutionError

    bar: bool | dict[str, Any] = {"desc": src.stem, "leave": False} if show_progress else False
    try:
        papermill.execute_notebook(
            str(src),
            str(dst),
            parameters=parameters,
            kernel_name=_KERNEL,
            cwd=str(cwd),
            progress_bar=bar,
            log_output=False,
        )
    except PapermillExecutionError as exc:
        where = f"cell {exc.exec_count}" if exc.exec_count is not None else "a cell"
        raise RuntimeError(
            f"notebook {src.name} failed in {where} with {exc.ename}: {exc.evalue} (see {dst})"
        ) from exc


def _to_html(notebook: Path) -> Path:
    import nbformat
    from nbconvert import HTMLExporter

    notebook_node = nbformat.read(notebook, as_version=4)  # type: ignore[no-untyped-call]
    body, _ = HTMLExporter().from_notebook_node(notebook_node)  # type: ignore[no-untyped-call]
    html = notebook.with_suffix(".html")
    html.write_text(body, encoding="utf-8")
    return html
