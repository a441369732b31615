"""What a report knows while it runs: its settings (defaults resolved), the lengths and where
they went, the folders it reads and writes, and what it offers the notebooks and records in
``recommendation.json``."""

from __future__ import annotations

import hashlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis._version import __version__
from analysis.answers.recommendation import DEFAULT_TIME_EPOCHS, DEFAULT_TIME_MAX_BUCKETS
from analysis.batching import BatchRule
from analysis.exports import export_all
from analysis.lengths import LengthHistogram
from analysis.loaders import LengthSource
from analysis.measure._tokenizer import TOKENIZER_FILES
from analysis.optimize import BucketPlan
from analysis.paths import BUNDLED_DATA
from analysis.report._notebooks import STEP_TIMES_PARAMETER, Page
from analysis.report._record import clean, default_command, summary_dict

_FIGURE_FORMATS = ["png", "svg"]


def tokenizer_digest(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a tokenizer: of the file, or of a folder's tokenizer files (``tokenizer*``,
    vocabularies, merges, chat templates, SentencePiece models; names and contents, sorted)."""
    root = Path(os.path.expanduser(os.fspath(path)))
    files = (
        [root]
        if root.is_file()
        else sorted(
            p
            for p in root.iterdir()
            if p.is_file() and (p.name.startswith(TOKENIZER_FILES) or p.suffix == ".model")
        )
    )
    digest = hashlib.sha256()
    for file in files:
        digest.update(file.name.encode() + b"\0")
        with file.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True, kw_only=True)
class Measured:
    """Where a report's lengths were measured from (``report SRC --tokenizer PATH``): the raw
    source as given, the tokenizer's path and SHA-256 (:func:`tokenizer_digest`), the text
    field or the chat field."""

    source: str
    tokenizer: str
    tokenizer_sha256: str
    field: str | None = None
    chat_field: str | None = None

    def to_dict(self, lengths_file: str) -> dict[str, Any]:
        """``recommendation.json``'s ``measured``."""
        return {
            "source": self.source,
            "tokenizer": self.tokenizer,
            "tokenizer_sha256": self.tokenizer_sha256,
            "field": self.field,
            "chat_field": self.chat_field,
            "lengths_file": lengths_file,
        }


@dataclass(frozen=True)
class Settings:
    """The report's settings, defaults resolved (as ``recommendation.json`` records them)."""

    n_buckets: int  # the K used (the suggested one for "auto")
    n_buckets_asked: int | str | None  # as given: a K, "auto", or None (not given)
    max_buckets: int
    min_gain: float
    rule: BatchRule
    max_len: int | None
    method: str
    column: str | None
    field: str | None
    seed: int
    world_size: int
    tokens_per_s: float | None
    reference_strategy: str | None
    drop_zero: bool

    def to_dict(self, step_times: Path | None) -> dict[str, Any]:
        """The ``settings`` of ``recommendation.json``."""
        return {
            "n_buckets": self.n_buckets,
            "n_buckets_asked": self.n_buckets_asked,
            "max_buckets": self.max_buckets,
            "min_gain": self.min_gain,
            **{k: getattr(self.rule, k) for k in ("batch_size", "max_tokens", "pad_to_multiple_of")},
            "max_len": self.max_len,
            "method": self.method,
            "seed": self.seed,
            "world_size": self.world_size,
            "column": self.column,
            "field": self.field,
            "tokens_per_s": self.tokens_per_s,
            "reference_strategy": self.reference_strategy,
            "drop_zero": self.drop_zero,
            "step_times": None if step_times is None else str(step_times),
        }


@dataclass(frozen=True)
class ReportData:
    """The lengths a report is about: where they came from, their histogram (zero lengths
    dropped when asked), and where the report put them and its figures."""

    src: LengthSource
    raw: LengthHistogram
    zero_dropped: int
    figures: Path
    csv: Path


@dataclass(frozen=True)
class ReportRun:
    """Where a report reads and writes, and what it runs (:func:`_resolve_inputs`): ``out``
    is the folder written now (the staging folder while the report runs), ``final`` the folder
    the report is moved to when complete."""

    out: Path
    notebooks_dir: Path
    notebooks: list[Path]
    skipped: list[str]  # the notebooks that need measured step times, when none are given
    step_times: Path | None
    final: Path


@dataclass(frozen=True)
class PageContext:
    """What every notebook page names: the source, the batch rule, the pages in order."""

    source: str
    rule: str
    pages: list[Page]


def offered_choices(settings: Settings, run: ReportRun, data: ReportData, edges: list[int]) -> dict[str, Any]:
    """The parameters offered to every notebook (each gets those its parameters cell defines)."""
    rule, src = settings.rule, data.src
    return {
        "data_path": str(data.csv),
        "figures_dir": str(data.figures),
        "figure_formats": _FIGURE_FORMATS,
        "max_len": settings.max_len if settings.max_len is not None else data.raw.max,
        "batch_size": rule.batch_size,
        "max_tokens": rule.max_tokens,
        "pad_to_multiple_of": rule.pad_to_multiple_of,
        "n_buckets": settings.n_buckets,
        "max_buckets": settings.max_buckets,
        "min_gain": settings.min_gain,
        "seed": settings.seed,
        "world_size": settings.world_size,
        "zero_length_dropped": data.zero_dropped,
        "method": settings.method,
        # the case's published edges and calibration are shown only beside the case-like data
        "case_reference": isinstance(src, str | os.PathLike)
        and Path(src).resolve() == BUNDLED_DATA.resolve(),
        "edges": edges,
        "reference_strategy": settings.reference_strategy,
        "reference_tokens_per_s": settings.tokens_per_s,
        # simulated epochs and the time sweep's K: what recommendation.json's step_time used
        "epochs": DEFAULT_TIME_EPOCHS,
        "max_k": DEFAULT_TIME_MAX_BUCKETS,
        STEP_TIMES_PARAMETER: None if run.step_times is None else str(run.step_times),
    }


def recommendation_for(
    settings: Settings,
    run: ReportRun,
    data: ReportData,
    command: str | None,
    rec_dict: dict[str, Any],
    plan: BucketPlan,
    runs: list[dict[str, Any]],
    figure_files: list[Path],
    measured: Measured | None = None,
) -> dict[str, Any]:
    """The content of ``recommendation.json`` (JSON-ready): ``source`` is the raw data for a
    report measured from them (``measured`` then says how, with the lengths file)."""
    pngs = {p.stem for p in figure_files if p.suffix == ".png"}
    svgs = {p.stem for p in figure_files if p.suffix == ".svg"}
    max_len, src, raw = settings.max_len, data.src, data.raw
    recommendation: dict[str, Any] = clean(
        {
            "created_by": "padding-workbench report",
            "version": __version__,
            "command": command if command is not None else default_command(),
            "python": sys.version.split()[0],
            "source": measured.source
            if measured is not None
            else (str(src) if isinstance(src, str | os.PathLike) else type(src).__name__),
            "measured": None if measured is None else measured.to_dict(str(src)),
            "settings": settings.to_dict(run.step_times),
            "data": {
                "summary": summary_dict(raw.summary()),
                "clipping": summary_dict(raw.clip_summary(max_len)) if max_len is not None else None,
                "histogram_csv": str(data.csv.relative_to(run.out)),
                "zero_length_dropped": data.zero_dropped,
            },
            **rec_dict,
            "exports": export_all(plan),
            "notebooks": runs,
            "notebooks_skipped": [
                {"notebook": name, "reason": "needs measured step times (--step-times)"}
                for name in run.skipped
            ],
            "figures": [str(p.relative_to(run.out)) for p in figure_files],
            "figures_missing_svg": sorted(pngs - svgs),
            "figures_missing_png": sorted(svgs - pngs),
        }
    )
    return recommendation
