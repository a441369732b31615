"""A design-review report: every notebook run on *your* lengths, plus a recommendation.

:func:`run_report` (the CLI's ``report`` subcommand, and ``make report``) does, in order:

1. load the lengths (any source :func:`analysis.load_lengths` reads) and write their
   histogram to ``DIR/data/lengths.csv``, the one file every notebook then reads;
2. compute the recommendation with the engine (:func:`analysis.recommend`: the plan for
   ``n_buckets`` buckets, the exact padding of random, sorted and bucketed batching, the
   optimal efficiency for every K), plus predicted throughput when a calibration is given;
3. execute each ``notebooks/NN_*.ipynb`` (sorted) with papermill into ``DIR`` (never in
   place), injecting only the parameters its ``parameters`` cell defines, with absolute
   paths, kernel ``python3`` of this environment and the notebooks folder as working
   directory; figures are saved by the notebooks into ``DIR/figures`` as PNG and SVG
   (parameters ``figures_dir`` and ``figure_formats``).  Offered parameters: ``data_path``,
   ``figures_dir``, ``figure_formats``, ``max_len``, ``batch_size``, ``max_tokens``,
   ``pad_to_multiple_of``, ``n_buckets``, ``seed``, ``method``, ``edges`` (the recommended
   plan's), with a calibration ``reference_strategy`` and ``reference_tokens_per_s``, and
   with measured step times ``step_times_path`` (a notebook whose parameters cell defines
   ``step_times_path``, ``04_throughput.ipynb``, runs only when step times are given);
4. convert each executed notebook to HTML (nbconvert's ``HTMLExporter``);
5. write ``DIR/recommendation.json``: data summary, settings (defaults included), edges,
   batch sizes, expected efficiencies, predicted throughput, exports for trainers, the
   notebooks and figures produced, the exact command line and the package version.

Papermill, nbconvert and nbformat are imported here only (they are dev/report
dependencies), never by the engine.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analysis.batching import DEFAULT_METHOD, DEFAULT_N_BUCKETS, DEFAULT_SEED, BatchRule
from analysis.exports import export_all
from analysis.paths import NOTEBOOKS_DIR
from analysis.throughput import THROUGHPUT_RULE

__all__ = ["ReportResult", "run_report", "notebook_parameters", "report_notebooks", "STEP_TIMES_PARAMETER"]

_KERNEL = "python3"
_FIGURE_FORMATS = ["png", "svg"]


@dataclass(frozen=True)
class ReportResult:
    """What :func:`run_report` wrote: the folder, every file (sorted), the recommendation."""

    out_dir: Path
    files: tuple[Path, ...]
    recommendation: dict[str, Any] = field(repr=False)


# ------------------------------------------------------------------------ recommendation
def _throughput(rec: Any, tokens_per_s: float, reference_strategy: str) -> dict[str, Any]:
    """Predicted useful tokens/s of each strategy from one measured reference."""
    return {
        "reference_strategy": reference_strategy,
        "reference_tokens_per_s": float(tokens_per_s),
        "model": THROUGHPUT_RULE,
        "predicted_tokens_per_s": rec.predicted_tokens_per_s(tokens_per_s, reference_strategy),
    }


def _clean(value: Any) -> Any:
    """JSON-ready: numpy scalars to Python, tuples to lists."""
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, str | bytes):
        return value.item()
    return value


def _summary_dict(series: Any) -> dict[str, Any]:
    cleaned: dict[str, Any] = _clean({str(k): v for k, v in series.items()})
    return cleaned


# ------------------------------------------------------------------------ notebooks
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


# ------------------------------------------------------------------------ the report
def run_report(
    src: Any,
    out_dir: str | os.PathLike[str],
    *,
    n_buckets: int = DEFAULT_N_BUCKETS,
    rule: BatchRule | None = None,
    max_len: int | None = None,
    method: str = DEFAULT_METHOD,
    column: str | None = None,
    field: str | None = None,
    seed: int = DEFAULT_SEED,
    world_size: int = 1,
    tokens_per_s: float | None = None,
    reference_strategy: str | None = None,
    quiet: bool = False,
    drop_zero: bool = False,
    step_times: str | os.PathLike[str] | None = None,
    notebooks_dir: str | os.PathLike[str] | None = None,
    command: str | None = None,
) -> ReportResult:
    """Run every notebook on ``src`` into ``out_dir`` and write ``recommendation.json``.

    Parameters
    ----------
    src : path, glob or array
        The lengths (anything :func:`analysis.load_lengths` reads).
    out_dir : path
        Output folder, created when missing.  Existing files of the same names are replaced.
    n_buckets : int
        Buckets of the recommended plan.
    rule : BatchRule, optional
        The batch rule (default :meth:`analysis.BatchRule.resolve`).
    max_len : int, optional
        Clip lengths at this value first; ``None`` (default) clips nothing, and the notebooks
        get ``max_len`` = the longest length (a no-op clip).
    method : str
        Edge placement of the recommended plan.
    column, field : str, optional
        Passed to ``load_lengths``.
    seed : int
        Passed to notebooks that take a ``seed``.
    world_size : int
        Data-parallel ranks (steps per epoch and the straggler factor depend on it).
    tokens_per_s, reference_strategy : optional
        A throughput calibration: the measured useful tokens/s of one strategy
        (``random``, ``sorted`` or ``bucketed``); every strategy's rate is then predicted.
    quiet : bool
        No progress bars.
    drop_zero : bool
        Drop zero-length samples (their count is recorded) instead of refusing them.
    step_times : path, optional
        A CSV of step times measured on your model (:func:`analysis.measure_step_times`;
        read by :func:`analysis.loaders.load_step_times`, checked before any notebook runs),
        offered to the notebooks as ``step_times_path``.  The notebooks that need it
        (``04_throughput.ipynb``) run only when it is given.
    notebooks_dir : path, optional
        Where the notebooks are (default ``analysis.paths.NOTEBOOKS_DIR``).
    command : str, optional
        The command line to record (the CLI passes its own).

    Returns
    -------
    ReportResult
    """
    import analysis
    from analysis import load_lengths, recommend, save_histogram
    from analysis.batching import positive_int
    from analysis.loaders import load_step_times
    from analysis.paths import BUNDLED_DATA
    from analysis.progress import bar

    rule = BatchRule.resolve() if rule is None else rule
    world_size = positive_int(world_size, "world_size")
    if (tokens_per_s is None) != (reference_strategy is None):
        raise ValueError("a throughput calibration needs both tokens_per_s and reference_strategy")
    started = time.time() - 1.0  # figures older than this run are not listed (stale files)
    out = Path(out_dir).resolve()
    nb_dir = Path(notebooks_dir if notebooks_dir is not None else NOTEBOOKS_DIR).resolve()
    times_path = None
    if step_times is not None:
        times_path = Path(step_times).resolve()
        load_step_times(times_path)  # a bad file fails here, in one line, not in a notebook
    notebooks = _notebooks(nb_dir, times_path is not None)
    skipped = [p.name for p in report_notebooks(nb_dir, step_times=True) if p not in notebooks]
    if out == nb_dir:
        raise ValueError(
            f"{out}: the output folder is the notebooks folder; the executed "
            "copies would overwrite the reference notebooks (choose another --out)"
        )

    progress = bar(enabled=False if quiet else None)
    raw = load_lengths(src, column=column, field=field, allow_zero=drop_zero, progress=progress)
    raw, zero_dropped = raw.drop_zero() if drop_zero else (raw, 0)
    hist = raw.clip(max_len) if max_len is not None else raw
    rec = recommend(hist, n_buckets, rule, method=method)
    rec_dict = rec.to_dict()
    rec_dict["throughput"] = (
        None if tokens_per_s is None else _throughput(rec, tokens_per_s, str(reference_strategy))
    )

    out.mkdir(parents=True, exist_ok=True)
    figures = out / "figures"
    figures.mkdir(exist_ok=True)
    data_csv = save_histogram(raw, _mkparent(out / "data" / "lengths.csv"))
    offered = {
        "data_path": str(data_csv),
        "figures_dir": str(figures),
        "figure_formats": _FIGURE_FORMATS,
        "max_len": max_len if max_len is not None else raw.max,
        "batch_size": rule.batch_size,
        "max_tokens": rule.max_tokens,
        "pad_to_multiple_of": rule.pad_to_multiple_of,
        "n_buckets": n_buckets,
        "seed": seed,
        "world_size": world_size,
        "zero_length_dropped": zero_dropped,
        "method": method,
        # the case's published edges and calibration are shown only beside the case-like data
        "case_reference": isinstance(src, str | os.PathLike)
        and Path(src).resolve() == BUNDLED_DATA.resolve(),
        "edges": rec.plan.edges,
        "reference_strategy": reference_strategy,
        "reference_tokens_per_s": tokens_per_s,
        STEP_TIMES_PARAMETER: None if times_path is None else str(times_path),
    }

    runs, written = [], [data_csv]
    with (
        tempfile.TemporaryDirectory(prefix="padding-report-") as ipython_dir,
        _environ(_kernel_environ(Path(ipython_dir))),
    ):
        for nb in progress(notebooks, "report notebooks") if progress else notebooks:
            defined = notebook_parameters(nb)
            # every offered name the notebook defines, None included (the rule's other half)
            params = {k: v for k, v in offered.items() if k in defined}
            dst = out / nb.name
            _run_notebook(nb, dst, params, cwd=nb_dir, show_progress=progress is not None)
            html = _to_html(dst)
            written += [dst, html]
            runs.append(
                {
                    "notebook": nb.name,
                    "html": html.name,
                    "parameters": params,
                    "not_set": sorted(set(offered) - set(params)),
                }
            )

    figure_files = sorted(p for p in figures.iterdir() if p.is_file() and p.stat().st_mtime >= started)
    pngs = {p.stem for p in figure_files if p.suffix == ".png"}
    svgs = {p.stem for p in figure_files if p.suffix == ".svg"}
    recommendation = _clean(
        {
            "created_by": "padding-workbench report",
            "version": analysis.__version__,
            "command": command if command is not None else _default_command(),
            "python": sys.version.split()[0],
            "source": str(src) if isinstance(src, str | os.PathLike) else type(src).__name__,
            "settings": {
                "n_buckets": n_buckets,
                **{k: getattr(rule, k) for k in ("batch_size", "max_tokens", "pad_to_multiple_of")},
                "max_len": max_len,
                "method": method,
                "seed": seed,
                "world_size": world_size,
                "column": column,
                "field": field,
                "tokens_per_s": tokens_per_s,
                "reference_strategy": reference_strategy,
                "drop_zero": drop_zero,
                "step_times": None if times_path is None else str(times_path),
            },
            "data": {
                "summary": _summary_dict(raw.summary()),
                "clipping": _summary_dict(raw.clip_summary(max_len)) if max_len is not None else None,
                "histogram_csv": str(data_csv.relative_to(out)),
                "zero_length_dropped": zero_dropped,
            },
            **rec_dict,
            "exports": export_all(rec.plan),
            "notebooks": runs,
            "notebooks_skipped": [
                {"notebook": name, "reason": "needs measured step times (--step-times)"} for name in skipped
            ],
            "figures": [str(p.relative_to(out)) for p in figure_files],
            "figures_missing_svg": sorted(pngs - svgs),
            "figures_missing_png": sorted(svgs - pngs),
        }
    )
    rec_path = out / "recommendation.json"
    rec_path.write_text(json.dumps(recommendation, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    written += [rec_path, *figure_files]
    return ReportResult(out_dir=out, files=tuple(sorted(set(written))), recommendation=recommendation)


def _mkparent(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _default_command() -> str:
    import shlex

    return shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]]) if sys.argv else ""
