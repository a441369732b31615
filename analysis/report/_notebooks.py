"""How the report runs its notebooks: which notebooks (:func:`report_notebooks`), the
parameters a notebook defines (:func:`notebook_parameters`), executing one with papermill in
a kernel of its own configuration, and converting it to its offline HTML page (the
``report`` nbconvert template in ``templates/``).  Papermill, nbconvert and
nbformat are imported here only, inside the functions (they are dev/report dependencies)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis.paths import NOTEBOOKS_DIR

__all__ = [
    "notebook_parameters",
    "notebook_title",
    "relink",
    "report_notebooks",
    "Page",
    "STEP_TIMES_PARAMETER",
    "NOISE_PARAMETER",
    "TEMPLATES_DIR",
    "REPORT_CSS",
    "INDEX_HTML",
    "kernel_config",
    "kernel_folder",
    "run_notebook",
]

_KERNEL = "python3"


class NotebookFailed(RuntimeError):
    """A notebook of the report raised: which one, in which cell, and where to see it."""


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
#: The parameter that offers a notebook the gradient-noise model (``--noise``; None without
#: one): unlike step times, a notebook defining it runs either way.
NOISE_PARAMETER = "noise_path"


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


def notebooks_in(folder: Path, step_times: bool) -> list[Path]:
    found = report_notebooks(folder, step_times=step_times)
    if not found:
        raise ValueError(f"{folder}: no notebooks to run (expected NN_name.ipynb files)")
    return found


@contextlib.contextmanager
def environ(values: Mapping[str, str]) -> Iterator[None]:
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


def kernel_environ(ipython_dir: Path) -> dict[str, str]:
    """Environment of the report's kernels: a fresh IPython profile (no user startup files)
    and the inline figure backend."""
    profile = ipython_dir / "profile_default"
    profile.mkdir(parents=True, exist_ok=True)
    (profile / "ipython_kernel_config.py").write_text(_KERNEL_CONFIG, encoding="utf-8")
    return {"IPYTHONDIR": str(ipython_dir), "MPLBACKEND": "module://matplotlib_inline.backend_inline"}


def _literal(path: Path) -> str:
    """``path`` as papermill reads it literally (it fills ``{name}`` in paths from the
    parameters: braces are doubled, so a folder named ``rep_{batch_size}`` stays that)."""
    return str(path).replace("{", "{{").replace("}", "}}")


#: Kernel starts a notebook gets: a kernel that never answers ran no cell, so it is started
#: again.  Over TCP (where :func:`kernel_config` gives no Unix sockets) that happens when two
#: processes take the same free port, as Jupyter picks ports by binding and releasing them.
KERNEL_STARTS = 3
#: How nbclient says a kernel never answered: it died, or it hung, before ``kernel_info``.
_NEVER_ANSWERED = ("before replying to kernel_info", "didn't respond in")
#: The longest path a kernel's Unix socket may have (``sun_path`` holds 108 bytes on Linux,
#: 104 on macOS), a socket's ``-N`` suffix included.
_SOCKET_PATH_MAX = 100


@contextlib.contextmanager
def kernel_folder() -> Iterator[str]:
    """A new private temporary folder for kernels' files (:func:`kernel_config`), removed on
    exit with whatever a kernel stopped by a signal left there.

    Examples
    --------
    >>> with kernel_folder() as folder:
    ...     os.path.isdir(folder), os.path.basename(folder).startswith("workbench-kernel-")
    (True, True)
    >>> os.path.exists(folder)
    False
    """
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(prefix="workbench-kernel-")
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def kernel_config(folder: str, name: str = "kernel") -> Any:
    """A traitlets ``Config`` for a kernel manager that keeps the kernel's files in ``folder``
    under ``name``: its connection file (it holds the key that signs the kernel's messages;
    Jupyter would leave it in the temporary folder when the run is stopped) and, on POSIX
    where the path is short enough for one, its Unix sockets.

    A TCP port that Jupyter picked (by binding and releasing it) can be taken by any process
    before the kernel binds it, and the kernel then never answers.  A socket in a folder no
    other process knows cannot be taken.

    Examples
    --------
    >>> settings = kernel_config("/tmp/workbench-kernel-x").KernelManager
    >>> settings.transport, settings.ip, settings.connection_file
    ('ipc', '/tmp/workbench-kernel-x/kernel', '/tmp/workbench-kernel-x/kernel.json')
    >>> "transport" in kernel_config("/" + "x" * 100).KernelManager  # too long for a socket
    False
    """
    from traitlets.config import Config

    path = os.path.join(folder, name)
    settings: dict[str, str] = {"connection_file": path + ".json"}
    if os.name == "posix" and len(os.fsencode(path)) + len("-99") <= _SOCKET_PATH_MAX:
        settings |= {"transport": "ipc", "ip": path}
    return Config({"KernelManager": settings})


def run_notebook(src: Path, dst: Path, parameters: dict[str, Any], *, cwd: Path, show_progress: bool) -> None:
    """Execute ``src`` into ``dst`` with papermill (:func:`_run_once`), its kernel's files in a
    folder of its own (:func:`kernel_config`), starting the kernel again (up to
    :data:`KERNEL_STARTS` times) when it never answered."""
    for start in range(1, KERNEL_STARTS + 1):
        try:
            with kernel_folder() as folder:
                config = kernel_config(folder)
                _run_once(src, dst, parameters, cwd=cwd, show_progress=show_progress, config=config)
            return
        except RuntimeError as exc:
            if not any(said in str(exc) for said in _NEVER_ANSWERED) or start == KERNEL_STARTS:
                raise


def _run_once(
    src: Path, dst: Path, parameters: dict[str, Any], *, cwd: Path, show_progress: bool, config: Any
) -> None:
    """Execute ``src`` into ``dst`` with papermill (its kernel manager configured by
    ``config``, a traitlets ``Config``), in a worker thread: the main thread only
    waits, so a signal (Ctrl-C, SIGTERM) reaches the caller's handlers at once (nbclient
    replaces a main thread's SIGINT and SIGTERM handlers while it runs, and swallows them).  An
    interrupted kernel exits with this process (ipykernel watches its parent)."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    bar: bool | dict[str, Any] = {"desc": src.stem, "leave": False} if show_progress else False
    failure: list[BaseException] = []

    def execute() -> None:
        try:
            papermill.execute_notebook(
                _literal(src),
                _literal(dst),
                parameters=parameters,
                kernel_name=_KERNEL,
                cwd=str(cwd),
                progress_bar=bar,
                log_output=False,
                config=config,
            )
        except BaseException as exc:  # handed to the waiting thread
            failure.append(exc)
        finally:  # the event loop nbclient made for this thread, and its sockets
            with contextlib.suppress(RuntimeError):
                loop = asyncio.get_event_loop_policy().get_event_loop()
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.close()

    worker = threading.Thread(target=execute, name=f"report: {src.name}", daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(0.1)
    if not failure:
        return
    exc = failure[0]
    if isinstance(exc, PapermillExecutionError):
        where = f"cell {exc.exec_count}" if exc.exec_count is not None else "a cell"
        raise NotebookFailed(
            f"notebook {src.name} failed in {where} with {exc.ename}: {exc.evalue} (see {dst})"
        ) from exc
    raise exc


#: The report's nbconvert templates (package data): ``report`` is JupyterLab's ``lab`` page
#: made offline, with the report's bar and code hidden by default (``report/index.html.j2``).
TEMPLATES_DIR = Path(__file__).parent / "templates"
#: The report's style sheet, inlined into the notebook pages and the summary page.
REPORT_CSS = TEMPLATES_DIR / "report" / "static" / "report.css"
#: The summary page every notebook page links back to.
INDEX_HTML = "index.html"


@dataclass(frozen=True)
class Page:
    """One notebook's page in a report: the notebook's file name and its title."""

    notebook: str
    title: str

    @property
    def html(self) -> str:
        """The page's file name (``03_bucket_count.html``)."""
        return str(Path(self.notebook).with_suffix(".html"))


def notebook_title(path: str | os.PathLike[str]) -> str:
    """A notebook's title: the text of its first Markdown heading (``# 03 · Title``), else
    its file name without the extension.

    Examples
    --------
    >>> import nbformat, tempfile, pathlib
    >>> nb = nbformat.v4.new_notebook()
    >>> nb.cells.append(nbformat.v4.new_markdown_cell("# 03 · How many buckets?\\n\\nText."))
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "03_k.ipynb"
    >>> nbformat.write(nb, p)
    >>> notebook_title(p)
    '03 · How many buckets?'
    >>> nb.cells = []
    >>> nbformat.write(nb, p)
    >>> notebook_title(p)
    '03_k'
    """
    import nbformat

    nb = nbformat.read(path, as_version=4)  # type: ignore[no-untyped-call]
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("# "):
                    return str(line[2:].strip())
    return Path(path).stem


_NOTEBOOK_LINK = re.compile(r"\[([^\]]*)\]\((\d+_[\w.-]+?)\.ipynb(#[^)\s]*)?\)")


def relink(markdown: str, pages: Sequence[Page]) -> str:
    """A Markdown cell's links to the report's notebooks (``[03](03_bucket_count.ipynb)``)
    pointed at their HTML pages; a link to a notebook the report did not run is left as its
    text (there is no page to open).

    Examples
    --------
    >>> pages = [Page("01_a.ipynb", "01"), Page("02_b.ipynb", "02")]
    >>> relink("[02 · B](02_b.ipynb) and [04](04_c.ipynb#top)", pages)
    '[02 · B](02_b.html) and 04'
    """
    run = {Path(p.notebook).stem for p in pages}

    def _one(match: re.Match[str]) -> str:
        text, stem, anchor = match.group(1), match.group(2), match.group(3) or ""
        return f"[{text}]({stem}.html{anchor})" if stem in run else text

    return _NOTEBOOK_LINK.sub(_one, markdown)


_WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def _static_notebook(nb: Any, pages: Sequence[Page], title: str) -> None:
    """Prepare an executed notebook (in memory) for its offline page: the widget state and
    every widget view dropped (a widget output shows its ``text/plain``, the explorer's
    one-line status), links to the notebooks pointed at their pages, the page's title set."""
    nb.metadata.pop("widgets", None)
    nb.metadata["title"] = title
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = relink(cell.source, pages)
        for output in cell.get("outputs", []):
            output.get("data", {}).pop(_WIDGET_VIEW, None)


def to_html(notebook: Path, pages: Sequence[Page], *, source: str, rule: str) -> Path:
    """Write ``notebook``'s page (beside it, ``.html``): offline, titled with the notebook's
    title and ``source``, the bar naming ``source`` and ``rule``, linking to the summary and
    to the next page of ``pages`` (the last page links to the summary)."""
    import nbformat
    from nbconvert import HTMLExporter

    names = [p.notebook for p in pages]
    at = names.index(notebook.name)
    page = pages[at]
    following = pages[at + 1] if at + 1 < len(pages) else None
    notebook_node = nbformat.read(notebook, as_version=4)  # type: ignore[no-untyped-call]
    _static_notebook(notebook_node, pages, f"{page.title} — {source}")
    resources = {
        "report": {
            "source": source,
            "rule": rule,
            "index_href": INDEX_HTML,
            "next_href": INDEX_HTML if following is None else following.html,
            "next_title": "Back to the summary" if following is None else f"Next: {following.title}",
        }
    }
    exporter = HTMLExporter(  # type: ignore[no-untyped-call]
        template_name="report", extra_template_basedirs=[str(TEMPLATES_DIR)]
    )
    body, _ = exporter.from_notebook_node(notebook_node, resources=resources)
    html = notebook.with_suffix(".html")
    html.write_text(body, encoding="utf-8")
    return html
