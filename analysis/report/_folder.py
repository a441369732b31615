"""The report's folders: the inputs resolved and checked, the output folder checked, the
report written in a staging folder beside it and moved into place only when complete.

A report never writes over a file it did not create: its folder (``--out``, taken literally)
must be new, empty, or an earlier report's (marked by :data:`analysis.paths.REPORT_MARKER`,
which lists the files that report wrote: a folder holding any other file is refused, in one
line naming them), and none of its inputs (the lengths, raw data, tokenizer, step times) may
lie inside it.  Everything is written into a hidden staging folder
beside it (``.NAME.partial-PID-XXXXXXXX``, marked incomplete); only a complete report replaces
the folder, so an interrupted run (Ctrl-C, SIGTERM, even ``kill -9``) leaves an earlier report
as it was.  A staging folder left by a killed run is removed by the next run into the same
folder once its process is gone; a run stopped by a failing notebook keeps its staging folder
for that notebook (the message names it) until then.  Where the working directory lies in the
folder (``--out .``), the complete report is moved in file by file, so the folder stays."""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path

from analysis.lengths import LengthHistogram
from analysis.loaders import LengthSource, expand_paths, load_step_times, save_histogram
from analysis.paths import NOTEBOOKS_DIR, REPORT_FIGURES, REPORT_HISTOGRAM, REPORT_MARKER
from analysis.report._context import ReportRun
from analysis.report._notebooks import NotebookFailed, notebooks_in, report_notebooks


def resolve_inputs(
    out_dir: str | os.PathLike[str],
    notebooks_dir: str | os.PathLike[str] | None,
    step_times: str | os.PathLike[str] | None,
) -> ReportRun:
    """Absolute folders, the step-time file checked, the notebooks to run and those skipped."""
    out = Path(out_dir).resolve()
    nb_dir = Path(notebooks_dir if notebooks_dir is not None else NOTEBOOKS_DIR).resolve()
    times_path = None
    if step_times is not None:
        times_path = Path(step_times).resolve()
        load_step_times(times_path)  # a bad file fails here, in one line, not in a notebook
    notebooks = notebooks_in(nb_dir, times_path is not None)
    skipped = [p.name for p in report_notebooks(nb_dir, step_times=True) if p not in notebooks]
    return ReportRun(out, nb_dir, notebooks, skipped, times_path, out)


def check_output_folder(out: Path) -> None:
    """Refuse an output folder the report may not replace: a file, a folder holding files
    that no report wrote (one without :data:`~analysis.paths.REPORT_MARKER`), or an earlier
    report's folder holding files that report did not write (the user's notes, data...): the
    one line names them."""
    _not_a_file(out)
    if not out.is_dir():
        return
    if not _is_report(out):
        if any(out.iterdir()):
            raise ValueError(
                f"{out}: a folder a report did not write (no {REPORT_MARKER} in it); the report "
                "replaces its folder, so choose a new or empty --out, or an earlier report's"
            )
        return
    foreign = foreign_files(out)
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5:,} more" if len(foreign) > 5 else "")
        raise ValueError(
            f"{out}: holds {shown}, which the earlier report there did not write; a rerun "
            "replaces the report's folder, so move them out or choose another --out"
        )


def _not_a_file(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise ValueError(f"{out}: exists and is not a folder; choose another --out")


def _is_report(folder: Path) -> bool:
    """Whether ``folder`` is a report's: it holds the marker, or (a report written before the
    marker existed) a ``recommendation.json`` a report wrote."""
    if (folder / REPORT_MARKER).is_file():
        return True
    try:
        written = json.loads((folder / "recommendation.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(written, dict) and written.get("created_by") == "padding-workbench report"


#: The files a report writes (its layout), for an earlier report without a manifest.
_LAYOUT = re.compile(
    r"(index\.html|recommendation\.json|lengths\.npy|[0-9]{2}_[^/]*\.(ipynb|html)"
    rf"|{re.escape(REPORT_HISTOGRAM.as_posix())}|{re.escape(REPORT_FIGURES.as_posix())}/[^/]+"
    rf"|{re.escape(REPORT_MARKER)})"
)


def manifest(folder: Path) -> set[str] | None:
    """The files (relative, POSIX) the report in ``folder`` says it wrote: the ``files`` its
    marker lists, or ``None`` for a report written before the marker held them."""
    try:
        marker = json.loads((folder / REPORT_MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    files = marker.get("files") if isinstance(marker, dict) else None
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        return None
    return {*files, REPORT_MARKER}


def foreign_files(folder: Path) -> list[str]:
    """What the earlier report in ``folder`` did not write (its manifest, or for an older
    report its layout): a file as ``path``, a folder holding none of the report's files as
    ``path/``; sorted."""
    own = manifest(folder)
    ours = own if own is not None else set()
    parents = {Path(f).parent for f in ours} | {REPORT_FIGURES, REPORT_HISTOGRAM.parent}  # always made
    dirs = {d.as_posix() for f in parents for d in [f, *f.parents]}
    found: set[str] = set()
    for path in folder.rglob("*"):
        rel = path.relative_to(folder)
        text = rel.as_posix()
        if path.is_dir() and not path.is_symlink():
            continue
        if text in ours or (own is None and _LAYOUT.fullmatch(text)):
            continue
        top = next((p for p in reversed(rel.parents) if p.as_posix() not in dirs | {"."}), None)
        found.add(text if top is None else f"{top.as_posix()}/")
    for path in folder.rglob("*"):  # empty folders the report did not make
        if path.is_dir() and not any(path.iterdir()):
            text = path.relative_to(folder).as_posix()
            if text not in dirs:
                found.add(f"{text}/")
    return sorted(found)


def check_inputs(
    out: Path,
    src: LengthSource,
    extra: Sequence[str | os.PathLike[str] | None] = (),
    notebooks_dir: str | os.PathLike[str] | None = None,
) -> None:
    """Refuse inputs inside the output folder (the notebooks, ``src`` and its files, the
    tokenizer, the step-time file): the report replaces that folder, its inputs with it.
    Called before anything is measured or read."""
    nb_dir = Path(notebooks_dir if notebooks_dir is not None else NOTEBOOKS_DIR).resolve()
    if out == nb_dir or nb_dir.is_relative_to(out):
        raise ValueError(
            f"{out}: the output folder holds the notebooks folder; the report would replace "
            "the reference notebooks (choose another --out)"
        )
    _not_a_file(out)
    paths: list[Path] = []
    if isinstance(src, str | os.PathLike):
        given = Path(os.path.expanduser(os.fspath(src)))
        paths = [given] if given.exists() else []
        with contextlib.suppress(ValueError):  # a source that names no file fails when read
            paths += expand_paths(src)[1]
    for path in [*paths, *(Path(os.path.expanduser(os.fspath(p))) for p in extra if p is not None)]:
        if path.resolve().is_relative_to(out):
            raise ValueError(
                f"{path}: an input inside the output folder {out}, which the report replaces; "
                "choose another --out (or move the input out of it)"
            )


def _stale(stage: Path) -> bool:
    """Whether a staging folder's run is gone (its name holds the process id)."""
    try:
        pid = int(stage.name.rsplit(".partial-", 1)[1].split("-")[0])
        os.kill(pid, 0)
    except (IndexError, ValueError):
        return False  # not one of ours
    except ProcessLookupError:
        return True
    except PermissionError:  # another user's live process
        return False
    return False


@contextlib.contextmanager
def staging(out: Path) -> Iterator[Path]:
    """A new folder beside ``out`` to write the report in, marked incomplete; it is removed
    on the way out unless :func:`publish` moved it into place."""
    out.parent.mkdir(parents=True, exist_ok=True)
    for old in out.parent.glob(f".{out.name}.partial-*"):
        if _stale(old):
            shutil.rmtree(old, ignore_errors=True)
    stage = out.parent / f".{out.name}.partial-{os.getpid()}-{secrets.token_hex(4)}"
    stage.mkdir()
    marker = {"created_by": "padding-workbench report", "complete": False}
    (stage / REPORT_MARKER).write_text(json.dumps(marker) + "\n", encoding="utf-8")
    try:
        yield stage
    except NotebookFailed:  # kept for the failed notebook the message names (removed next run)
        raise
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    shutil.rmtree(stage, ignore_errors=True)


def publish(stage: Path, out: Path, files: Sequence[Path]) -> None:
    """Move the complete report in ``stage`` to ``out``, its marker listing ``files`` (the
    manifest a rerun reads); an earlier report there (checked again now) is replaced only at
    this point, and removed.  Where the working directory lies in ``out`` (``--out .``), the
    report is moved in file by file instead, so that the folder (and the shell in it) stays."""
    listed = sorted({p.relative_to(stage).as_posix() for p in files})
    marker = {"created_by": "padding-workbench report", "complete": True, "files": listed}
    (stage / REPORT_MARKER).write_text(json.dumps(marker, indent=1) + "\n", encoding="utf-8")
    check_output_folder(out)
    if out.is_dir() and Path.cwd().resolve().is_relative_to(out):
        _publish_in_place(stage, out)
        return
    old = None
    if out.exists():
        old = out.parent / f".{out.name}.old-{os.getpid()}-{secrets.token_hex(4)}"
        os.replace(out, old)
    os.replace(stage, out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _publish_in_place(stage: Path, out: Path) -> None:
    """Replace the earlier report's files in ``out`` (all of them its own: checked) by the
    entries of ``stage``, keeping the folder ``out`` itself."""
    for entry in sorted(out.iterdir()):
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    for entry in sorted(stage.iterdir(), key=lambda p: p.name == REPORT_MARKER):  # the marker last
        os.replace(entry, out / entry.name)
    stage.rmdir()


def relocate(value: str, stage: Path, out: Path) -> str:
    """``value`` with the staging folder's path replaced by the final folder's."""
    return value.replace(str(stage), str(out))


def relocate_file(path: Path, stage: Path, out: Path) -> None:
    """Rewrite a written text file (an executed notebook, JSON) so that the paths into the
    staging folder name the final folder instead."""
    text = path.read_text(encoding="utf-8")
    pairs = [(str(stage), str(out)), (str(stage).replace("\\", "\\\\"), str(out).replace("\\", "\\\\"))]
    for old, new in pairs:
        text = text.replace(old, new)
    path.write_text(text, encoding="utf-8")


def prepare_output(out: Path, raw: LengthHistogram) -> tuple[Path, Path]:
    """Create ``out`` and its figures folder, and write the histogram every notebook reads:
    the figures folder and the CSV."""
    out.mkdir(parents=True, exist_ok=True)
    figures = out / REPORT_FIGURES
    figures.mkdir(exist_ok=True)
    (out / REPORT_HISTOGRAM).parent.mkdir(parents=True, exist_ok=True)
    return figures, save_histogram(raw, out / REPORT_HISTOGRAM)


def new_figures(figures: Path) -> list[Path]:
    """The figures written (sorted; the staging folder starts empty, so all are this run's)."""
    return sorted(p for p in figures.iterdir() if p.is_file())
