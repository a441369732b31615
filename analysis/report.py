"""A design-review report: every notebook run on *your* lengths, plus a recommendation.

:func:`run_report` (the CLI's ``report`` subcommand, and ``make report``) does, in order:

1. load the lengths (any source :func:`analysis.load_lengths` reads) and write their
   histogram to ``DIR/data/lengths.csv``, the one file every notebook then reads;
2. compute the recommendation with the engine: the plan for ``n_buckets`` buckets
   (:func:`analysis.optimize_edges`) and the exact expected efficiency of the random,
   sorted and bucketed strategies, plus predicted throughput when a calibration is given;
3. execute each ``notebooks/NN_*.ipynb`` (sorted) with papermill into ``DIR`` (never in
   place), injecting only the parameters its ``parameters`` cell defines, with absolute
   paths, kernel ``python3`` of this environment and the notebooks folder as working
   directory; figures are saved by the notebooks into ``DIR/figures`` as PNG and SVG
   (``PADDING_FIGURE_FORMATS=png,svg``).  Offered parameters: ``data_path``,
   ``figures_dir``, ``max_len``, ``batch_size`` or ``max_tokens``, ``n_buckets``, ``seed``,
   ``method``, ``edges`` (the recommended plan's) and, with a calibration,
   ``reference_strategy`` and ``reference_tokens_per_s``;
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
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analysis.paths import NOTEBOOKS_DIR

__all__ = ["ReportResult", "run_report", "recommend", "notebook_parameters", "report_notebooks",
           "REPORT_FILES"]

#: What a report folder always holds besides the executed notebooks and their HTML.
REPORT_FILES = ("recommendation.json", "data/lengths.csv")
_KERNEL = "python3"


@dataclass(frozen=True)
class ReportResult:
    """What :func:`run_report` wrote: the folder, every file (sorted), the recommendation."""

    out_dir: Path
    files: tuple[Path, ...]
    recommendation: dict[str, Any] = field(repr=False)
    seconds: float = 0.0


# ------------------------------------------------------------------------ recommendation
def recommend(hist: Any, *, n_buckets: int = 6, batch_size: int | None = 8,
              max_tokens: int | None = None, method: str = "optimal",
              tokens_per_s: float | None = None,
              reference_strategy: str | None = None) -> dict[str, Any]:
    """The numbers a report recommends, JSON-ready (no notebook, no file).

    ``hist`` is the (already clipped) histogram.  Beside the plan for ``n_buckets``, the
    optimal efficiency for every K from 1 to 16 (one DP pass) and the K after which one more
    bucket gains less than 1 point (:func:`analysis.recommend_n_buckets`, notebook 03's rule)
    help choose K.  Strategies' expectations are exact:
    ``random`` is one bucket over all lengths, ``sorted`` the deterministic sorted batching
    (:func:`analysis.strategies.sorted_padding`), ``bucketed`` the plan's own expectation.

    Examples
    --------
    >>> from analysis import LengthHistogram
    >>> rec = recommend(LengthHistogram.from_lengths([1, 2, 3, 4, 50, 60, 70, 80]),
    ...                 n_buckets=2, batch_size=2)
    >>> rec["plan"]["edges"], rec["plan"]["batch_sizes"]
    ([0, 4, 80], [2, 2])
    >>> [s["strategy"] for s in rec["strategies"]]
    ['random', 'sorted', 'bucketed']
    """
    from analysis import optimize_edges, recommend_n_buckets, sweep_bucket_counts
    from analysis.exports import plan_dict
    from analysis.strategies import sorted_padding
    from analysis.waste import batch_rule, expected_padding

    rule = batch_rule(batch_size, max_tokens)
    batch_size, max_tokens = rule.get("batch_size"), rule.get("max_tokens")
    plan = optimize_edges(hist, n_buckets, method=method, **rule)
    random = expected_padding(hist, [hist.min - 1, hist.max], **rule)
    fixed_size = batch_size if batch_size is not None else max(1, max_tokens // hist.max)
    useful, sorted_padded, sorted_batches = sorted_padding(hist, fixed_size)
    strategies = [
        {"strategy": "random", "edges": list(random.edges), "batch_sizes": list(random.batch_sizes),
         "efficiency": random.efficiency, "padded_tokens": random.padded_tokens,
         "useful_tokens": random.useful_tokens, "n_batches": random.n_batches},
        {"strategy": "sorted", "batch_size": fixed_size, "efficiency": useful / sorted_padded,
         "padded_tokens": sorted_padded, "useful_tokens": useful, "n_batches": sorted_batches},
        {"strategy": "bucketed", "method": plan.method, "edges": list(plan.edges),
         "batch_sizes": list(plan.batch_sizes), "efficiency": plan.efficiency,
         "padded_tokens": plan.padded_tokens, "useful_tokens": plan.useful_tokens},
    ]
    sweep = sweep_bucket_counts(hist, range(1, min(16, hist.n_distinct) + 1), ("optimal",),
                                **rule)
    out: dict[str, Any] = {
        "n_buckets": plan.n_buckets,
        "plan": plan_dict(plan),
        "strategies": strategies,
        "optimal_efficiency_by_n_buckets": {
            int(k): float(e) for k, e in zip(sweep["n_buckets"], sweep["efficiency"])},
        "n_buckets_gaining_under_1_point": recommend_n_buckets(sweep, min_gain=0.01),
        "throughput": None,
    }
    if tokens_per_s is not None or reference_strategy is not None:
        out["throughput"] = _throughput(strategies, tokens_per_s, reference_strategy)
    return _clean(out)


def _throughput(strategies: list[dict[str, Any]], tokens_per_s: float | None,
                reference_strategy: str | None) -> dict[str, Any]:
    """Predicted useful tokens/s of each strategy from one measured reference
    (:func:`analysis.predict_throughput`: step time proportional to padded tokens)."""
    from analysis import predict_throughput

    if tokens_per_s is None or reference_strategy is None:
        raise ValueError("a throughput calibration needs both tokens_per_s and reference_strategy")
    by_name = {s["strategy"]: s for s in strategies}
    if reference_strategy not in by_name:
        raise ValueError(f"reference strategy {reference_strategy!r} is not one of "
                         f"{', '.join(by_name)}")
    ref = by_name[reference_strategy]["efficiency"]
    return {
        "reference_strategy": reference_strategy,
        "reference_tokens_per_s": float(tokens_per_s),
        "model": "analysis.predict_throughput: time proportional to padded tokens, "
                 "rate = reference rate * efficiency / reference efficiency (an upper bound: "
                 "per-step overheads ignored)",
        "predicted_tokens_per_s": {
            name: float(predict_throughput(s["efficiency"], reference_tokens_per_s=tokens_per_s,
                                           reference_efficiency=ref))
            for name, s in by_name.items()},
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
    return _clean({str(k): v for k, v in series.items()})


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

    nb = nbformat.read(path, as_version=4)
    names: list[str] = []
    for cell in nb.cells:
        if cell.cell_type != "code" or "parameters" not in cell.get("metadata", {}).get("tags", []):
            continue
        for node in ast.parse(cell.source).body:
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, ast.AnnAssign) else []
            names += [t.id for t in targets if isinstance(t, ast.Name) and t.id not in names]
    return names


def report_notebooks(folder: str | os.PathLike[str] = NOTEBOOKS_DIR) -> list[Path]:
    """The notebooks a report runs: ``NN_name.ipynb`` in ``folder``, in number order
    (scratch notebooks without a number prefix are skipped).

    Examples
    --------
    >>> [p.name for p in report_notebooks()] == sorted(p.name for p in report_notebooks())
    True
    """
    return sorted(p for p in Path(folder).glob("*.ipynb") if re.match(r"\d+_", p.name))


def _notebooks(folder: Path) -> list[Path]:
    found = report_notebooks(folder)
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
    """Environment of the report's kernels: a fresh IPython profile (no user startup files),
    no progress bars, every figure saved as PNG and SVG."""
    profile = ipython_dir / "profile_default"
    profile.mkdir(parents=True, exist_ok=True)
    (profile / "ipython_kernel_config.py").write_text(_KERNEL_CONFIG, encoding="utf-8")
    return {"IPYTHONDIR": str(ipython_dir), "PADDING_QUIET": "1",
            "PADDING_FIGURE_FORMATS": "png,svg",
            "MPLBACKEND": "module://matplotlib_inline.backend_inline"}


def _run_notebook(src: Path, dst: Path, parameters: dict[str, Any], *, cwd: Path,
                  show_progress: bool) -> None:
    import papermill
    from papermill.exceptions import PapermillExecutionError

    bar: bool | dict[str, Any] = {"desc": src.stem, "leave": False} if show_progress else False
    try:
        papermill.execute_notebook(str(src), str(dst), parameters=parameters,
                                   kernel_name=_KERNEL, cwd=str(cwd), progress_bar=bar,
                                   log_output=False)
    except PapermillExecutionError as exc:
        where = f"cell {exc.exec_count}" if exc.exec_count is not None else "a cell"
        raise RuntimeError(f"notebook {src.name} failed in {where} with {exc.ename}: "
                           f"{exc.evalue} (see {dst})") from exc


def _to_html(notebook: Path) -> Path:
    import nbformat
    from nbconvert import HTMLExporter

    body, _ = HTMLExporter().from_notebook_node(nbformat.read(notebook, as_version=4))
    html = notebook.with_suffix(".html")
    html.write_text(body, encoding="utf-8")
    return html


# ------------------------------------------------------------------------ the report
def run_report(src: Any, out_dir: str | os.PathLike[str], *, n_buckets: int = 6,
               batch_size: int | None = 8, max_tokens: int | None = None,
               max_len: int | None = None, method: str = "optimal", column: str | None = None,
               field: str | None = None, seed: int = 1701, tokens_per_s: float | None = None,
               reference_strategy: str | None = None, quiet: bool = False,
               notebooks_dir: str | os.PathLike[str] | None = None,
               command: str | None = None) -> ReportResult:
    """Run every notebook on ``src`` into ``out_dir`` and write ``recommendation.json``.

    Parameters
    ----------
    src : path, glob or array
        The lengths (anything :func:`analysis.load_lengths` reads).
    out_dir : path
        Output folder, created when missing.  Existing files of the same names are replaced.
    n_buckets : int, default 6
        Buckets of the recommended plan.
    batch_size, max_tokens : int
        The batch rule; ``max_tokens`` wins when given (``batch_size`` is then ignored).
    max_len : int, optional
        Clip lengths at this value first; ``None`` (default) clips nothing, and the notebooks
        get ``max_len`` = the longest length (a no-op clip).
    method : str, default "optimal"
        Edge placement of the recommended plan.
    column, field : str, optional
        Passed to ``load_lengths``.
    seed : int, default 1701
        Passed to notebooks that take a ``seed``.
    tokens_per_s, reference_strategy : optional
        A throughput calibration: the measured useful tokens/s of one strategy
        (``random``, ``sorted`` or ``bucketed``); every strategy's rate is then predicted.
    quiet : bool
        No progress bars.
    notebooks_dir : path, optional
        Where the notebooks are (default ``analysis.paths.NOTEBOOKS_DIR``).
    command : str, optional
        The command line to record (the CLI passes its own).

    Returns
    -------
    ReportResult
    """
    import analysis
    from analysis import load_lengths, save_histogram
    from analysis.progress import progress, progress_enabled

    start = time.perf_counter()
    started = time.time() - 1.0  # figures older than this run are not listed (stale files)
    if max_tokens is not None:
        batch_size = None
    out = Path(out_dir).resolve()
    nb_dir = Path(notebooks_dir if notebooks_dir is not None else NOTEBOOKS_DIR).resolve()
    notebooks = _notebooks(nb_dir)
    if out == nb_dir:
        raise ValueError(f"{out}: the output folder is the notebooks folder; the executed "
                         "copies would overwrite the reference notebooks (choose another --out)")

    raw = load_lengths(src, column=column, field=field)
    hist = raw.clip(max_len) if max_len is not None else raw
    rec = recommend(hist, n_buckets=n_buckets, batch_size=batch_size, max_tokens=max_tokens,
                    method=method, tokens_per_s=tokens_per_s,
                    reference_strategy=reference_strategy)

    out.mkdir(parents=True, exist_ok=True)
    figures = out / "figures"
    figures.mkdir(exist_ok=True)
    data_csv = save_histogram(raw, _mkparent(out / "data" / "lengths.csv"))
    offered = {
        "data_path": str(data_csv),
        "figures_dir": str(figures),
        "max_len": max_len if max_len is not None else raw.max,
        "batch_size": batch_size,
        "max_tokens": max_tokens,
        "n_buckets": n_buckets,
        "seed": seed,
        "method": method,
        "edges": rec["plan"]["edges"],
        "reference_strategy": reference_strategy,
        "reference_tokens_per_s": tokens_per_s,
    }

    show = not quiet and progress_enabled()
    runs, written = [], [data_csv]
    with tempfile.TemporaryDirectory(prefix="padding-report-") as ipython_dir, \
            _environ(_kernel_environ(Path(ipython_dir))):
        for nb in progress(notebooks, "report notebooks", enabled=show, unit="notebook"):
            defined = notebook_parameters(nb)
            params = {k: v for k, v in offered.items() if k in defined and v is not None}
            if max_tokens is not None and {"max_tokens", "batch_size"} <= set(defined):
                params["batch_size"] = None  # the notebook's own default would win otherwise
            dst = out / nb.name
            _run_notebook(nb, dst, params, cwd=nb_dir, show_progress=show)
            html = _to_html(dst)
            written += [dst, html]
            runs.append({"notebook": nb.name, "html": html.name, "parameters": params,
                         "not_set": sorted(set(offered) - set(params))})

    figure_files = sorted(p for p in figures.iterdir()
                          if p.is_file() and p.stat().st_mtime >= started)
    pngs = {p.stem for p in figure_files if p.suffix == ".png"}
    svgs = {p.stem for p in figure_files if p.suffix == ".svg"}
    recommendation = _clean({
        "created_by": "padding-workbench report",
        "version": analysis.__version__,
        "command": command if command is not None else _default_command(),
        "python": sys.version.split()[0],
        "source": str(src) if isinstance(src, str | os.PathLike) else type(src).__name__,
        "settings": {
            "n_buckets": n_buckets, "batch_size": batch_size, "max_tokens": max_tokens,
            "max_len": max_len, "method": method, "seed": seed, "column": column,
            "field": field, "tokens_per_s": tokens_per_s,
            "reference_strategy": reference_strategy,
            "defaults": {"n_buckets": 6, "batch_size": 8, "max_tokens": None, "max_len": None,
                         "method": "optimal", "seed": 1701},
        },
        "data": {
            "summary": _summary_dict(raw.summary()),
            "clipping": _summary_dict(raw.clip_summary(max_len)) if max_len is not None else None,
            "histogram_csv": str(data_csv.relative_to(out)),
        },
        **rec,
        "notebooks": runs,
        "figures": [str(p.relative_to(out)) for p in figure_files],
        "figures_missing_svg": sorted(pngs - svgs),
        "figures_missing_png": sorted(svgs - pngs),
    })
    rec_path = out / "recommendation.json"
    rec_path.write_text(json.dumps(recommendation, indent=2, allow_nan=False) + "\n",
                        encoding="utf-8")
    written += [rec_path, *figure_files]
    return ReportResult(out_dir=out, files=tuple(sorted(set(written))),
                        recommendation=recommendation, seconds=time.perf_counter() - start)


def _mkparent(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _default_command() -> str:
    import shlex

    return shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]]) if sys.argv else ""

