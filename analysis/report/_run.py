"""The report itself: :func:`run_report` and its steps (resolve the inputs, prepare the output
folder, run each notebook and convert it to HTML, list the figures, write
``recommendation.json``); see :mod:`analysis.report` for what it writes."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from analysis._validate import check_bucket_count, positive_int
from analysis.answers.gradient_noise import gradient_noise_record
from analysis.answers.recommendation import Recommendation, TimeRecommendation, recommend
from analysis.answers.tail import heavy_tail
from analysis.answers.tradeoff import TradeOff
from analysis.batching import (
    DEFAULT_MAX_BUCKETS,
    DEFAULT_METHOD,
    DEFAULT_MIN_GAIN,
    DEFAULT_N_BUCKETS,
    DEFAULT_SEED,
    BatchRule,
    check_budget,
)
from analysis.lengths import LengthHistogram
from analysis.loaders import LengthSource, load_gradient_noise, load_lengths
from analysis.narrative import describe_clipping, frontier_sentence
from analysis.narrative.frontier import floor_sentence
from analysis.narrative.provenance import describe_k_choice, describe_measurement
from analysis.narrative.tail import describe_heavy_tail
from analysis.optimize import Floor
from analysis.paths import BUNDLED_DATA, REPORT_MARKER
from analysis.progress import bar
from analysis.report._context import (
    Measured,
    PageContext,
    ReportData,
    ReportRun,
    Settings,
    offered_choices,
    recommendation_for,
)
from analysis.report._folder import (
    check_inputs,
    check_output_folder,
    new_figures,
    prepare_output,
    publish,
    relocate,
    relocate_file,
    resolve_inputs,
    staging,
)
from analysis.report._index import Source, describe_source, index_html, summary_facts, summary_tradeoff
from analysis.report._notebooks import (
    INDEX_HTML,
    NOISE_PARAMETER,
    Page,
    environ,
    kernel_environ,
    notebook_parameters,
    notebook_title,
    run_notebook,
    to_html,
)
from analysis.report._record import ReportResult, throughput_record, time_results, write_json
from analysis.simulation.epochs import check_batch_tokens
from analysis.timing.noise import GradientNoise

__all__ = ["ReportResult", "run_report"]


# ------------------------------------------------------------------------ the report
def run_report(
    src: LengthSource,
    out_dir: str | os.PathLike[str],
    *,
    n_buckets: int | Literal["auto"] | None = None,
    max_buckets: int = DEFAULT_MAX_BUCKETS,
    min_gain: float = DEFAULT_MIN_GAIN,
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
    floor: Floor | None = None,
    keep_source: bool = False,
    noise: str | os.PathLike[str] | None = None,
    inputs: Sequence[str | os.PathLike[str]] = (),
    measured: Measured | None = None,
) -> ReportResult:
    """Run every notebook on ``src`` into ``out_dir`` and write ``recommendation.json``.

    Parameters
    ----------
    src : path, glob or array
        The lengths (anything :func:`analysis.load_lengths` reads).
    out_dir : path
        Output folder, taken literally: new, empty, or an earlier report's (which is replaced
        whole, and only once the new report is complete: it is written in a hidden staging
        folder beside it, see :mod:`analysis.report._folder`).  A folder holding other files,
        or one holding an input, is refused.
    n_buckets : int, "auto" or None
        Buckets of the recommended plan; ``"auto"`` takes the K the gain rule suggests
        (:attr:`analysis.Recommendation.n_buckets_suggested`), recorded in
        ``recommendation.json`` as ``settings.n_buckets`` beside ``settings.n_buckets_asked``.
        ``None`` (not given): ``"auto"`` on your data, the case's K
        (:data:`~analysis.batching.DEFAULT_N_BUCKETS`) on the bundled case data, whose pages
        show the case's published edges beside the plan.  The summary page and
        ``settings.n_buckets_reason`` say which, in one sentence.  A K above the data's distinct
        lengths is refused in one line that suggests ``--buckets auto``.
    max_buckets, min_gain : int, float
        The gain rule (:func:`analysis.recommend`): K = 1..``max_buckets`` are swept (by
        notebook 03 too) and the K suggested is the smallest after which one more bucket gains
        less than ``min_gain`` efficiency.
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
    floor : analysis.optimize.Floor, optional
        A floor for the edges (:func:`analysis.recommend`).
    keep_source : bool
        ``src`` is a file written for this report (``report --tokenizer`` measures the raw
        data into one, outside ``out_dir``): it is moved into the report, under its name, and
        recorded there.
    inputs : paths, optional
        Other inputs the report was made from (``report --tokenizer``'s tokenizer), refused
        like ``src`` when they lie inside ``out_dir``.
    measured : Measured, optional
        For lengths measured from raw data (``report --tokenizer``): the raw source, the
        tokenizer (path and SHA-256) and the field, named by the title, ``index.html`` and
        ``recommendation.json`` (``source``, ``measured``) instead of the lengths file.

    noise : path, optional
        A gradient-noise model of your model (:func:`analysis.timing.noise.measure_gradient_noise`,
        saved by :func:`analysis.loaders.save_gradient_noise`; read before anything runs):
        ``recommendation.json`` then records its figures, the recommended plan's gradient noise
        (with ``step_times``, its time to the same loss) and every strategy's window noise
        (``gradient_noise``; :func:`analysis.answers.gradient_noise.gradient_noise_record`), and
        the summary page says what the plan keeps of the effective batch and how soon it
        reaches the same loss (:func:`analysis.narrative.noise.describe_plan_noise`).

    Returns
    -------
    ReportResult
    """
    noise_model = load_gradient_noise(noise) if noise is not None else None
    if isinstance(n_buckets, str) and n_buckets != "auto":
        raise ValueError(f"n_buckets must be a positive integer or 'auto', got {n_buckets!r}")
    asked, case = n_buckets, is_case_data(src)
    if n_buckets is None:  # not given: the gain rule's K on your data, the case's on the case's
        n_buckets = DEFAULT_N_BUCKETS if case else "auto"
    auto = isinstance(n_buckets, str)
    settings = Settings(
        n_buckets=DEFAULT_N_BUCKETS if isinstance(n_buckets, str) else n_buckets,  # auto: resolved below
        n_buckets_asked=asked,
        max_buckets=positive_int(max_buckets, "max_buckets"),
        min_gain=min_gain,
        rule=BatchRule.resolve() if rule is None else rule,
        max_len=max_len,
        method=method,
        column=column,
        field=field,
        seed=seed,
        world_size=positive_int(world_size, "world_size"),
        tokens_per_s=tokens_per_s,
        reference_strategy=reference_strategy,
        drop_zero=drop_zero,
    )
    if (tokens_per_s is None) != (reference_strategy is None):
        raise ValueError("a throughput calibration needs both tokens_per_s and reference_strategy")
    if keep_source and not isinstance(src, str | os.PathLike):
        raise ValueError("keep_source needs src to be a file, the one written for this report")
    kept = Path(src) if keep_source and isinstance(src, str | os.PathLike) else None
    run = resolve_inputs(out_dir, notebooks_dir, step_times)
    check_inputs(run.out, src, [run.step_times, noise, *inputs], run.notebooks_dir)
    check_output_folder(run.out)
    progress = bar(enabled=False if quiet else None)
    raw = load_lengths(src, column=column, field=field, allow_zero=drop_zero, progress=progress)
    raw, zero_dropped = raw.drop_zero() if drop_zero else (raw, 0)
    hist = raw.clip(max_len) if max_len is not None else raw
    check_budget(hist, settings.rule)
    check_batch_tokens(hist, settings.rule, settings.world_size)
    if isinstance(n_buckets, int):
        check_bucket_count(n_buckets, int(hist.lengths.size))
    rec = recommend(
        hist, n_buckets, settings.rule, method=method, max_buckets=max_buckets, min_gain=min_gain, floor=floor
    )
    if auto:  # the K the gain rule suggests, from the same sweep
        settings = replace(settings, n_buckets=rec.n_buckets_suggested)
    k_choice = describe_k_choice(settings.n_buckets, asked, rec.n_buckets_suggested, case=case)
    rec_dict = rec.to_dict()
    step_time = time_results(
        hist,
        run.step_times,
        settings.n_buckets,
        settings.rule,
        seed=settings.seed,
        world_size=settings.world_size,
    )
    rec_dict["throughput"] = throughput_record(
        rec, settings.tokens_per_s, settings.reference_strategy, step_time
    )
    rec_dict["step_time"] = None if step_time is None else step_time.to_dict()
    if noise_model is not None:
        rng = np.random.default_rng(settings.seed)
        clock = None if step_time is None else step_time.model
        rec_dict["gradient_noise"] = gradient_noise_record(
            noise_model, hist, rec.plan.edges, settings.rule, rng=rng, step_time=clock
        )
    source = describe_source(src)
    if measured is not None:  # named by the raw data, not the lengths file measured from them
        source = replace(source, name=_shown_name(measured.source))
    pages = PageContext(
        source.name, settings.rule.text, [Page(nb.name, notebook_title(nb)) for nb in run.notebooks]
    )
    with (
        ThreadPoolExecutor(max_workers=1) as pool,
        staging(run.final) as stage,  # written beside the folder, moved into place when complete
    ):
        # the summary page's and notebook 02's trade-off (on the gradient axis with a noise
        # model), computed beside the notebooks that do not read it (a second core)
        pending = pool.submit(summary_tradeoff, rec, hist, seed=settings.seed, noise=noise_model)
        run = replace(run, out=stage)
        if kept is not None:
            src, source = _adopt(kept, source, run)
        data = ReportData(src, raw, zero_dropped, *prepare_output(run.out, raw))
        offered = {
            **offered_choices(settings, run, data, rec.plan.edges),
            "min_efficiency": _Later(lambda: pending.result().floor),
            NOISE_PARAMETER: None if noise is None else str(Path(noise).resolve()),
        }
        runs, executed = _run_notebooks(run, offered, progress, pages)
        trade = pending.result()
        rec_dict["tradeoff"] = {**trade.to_dict(), "sentence": frontier_sentence(trade, trade.mixing_axis)}
        figure_files = new_figures(data.figures)
        recommendation = recommendation_for(
            settings, run, data, command, rec_dict, rec.plan, runs, figure_files, measured
        )
        recommendation["settings"]["n_buckets_reason"] = k_choice
        facts, recommendation["tail_hint"] = _page_facts(hist, settings.rule, k_choice, measured, data.src)
        rec_path = write_json(run.out / "recommendation.json", recommendation)
        command_line = str(recommendation["command"])
        index = _write_index(
            run, settings, source, rec, hist, raw, step_time, pages, command_line, trade, facts, noise_model
        )
        written = [data.csv, *executed, rec_path, index, *figure_files]
        if kept is not None:
            written.append(run.out / kept.name)
        publish(stage, run.final, [*written, run.out / REPORT_MARKER])
    files = tuple(sorted({run.final / p.relative_to(stage) for p in written}))
    return ReportResult(
        out_dir=run.final, files=files, recommendation=recommendation, floor_text=floor_sentence(rec.plan)
    )


class _Later:
    """An offered parameter known once a computation beside the first notebooks ends: read
    (called) only for a notebook that defines it."""

    def __init__(self, value: Callable[[], Any]) -> None:
        self._value = value

    def __call__(self) -> Any:
        return self._value()


def _run_notebooks(
    run: ReportRun,
    offered: dict[str, Any],
    progress: Callable[..., Iterable[Any]] | None,
    pages: PageContext,
) -> tuple[list[dict[str, Any]], list[Path]]:
    """Execute each notebook with the offered parameters it defines, then write its offline
    HTML page: what each run was given (for ``recommendation.json``), and the files written."""
    runs, written = [], []
    with (
        tempfile.TemporaryDirectory(prefix="padding-report-") as ipython_dir,
        environ(kernel_environ(Path(ipython_dir))),
    ):
        for nb in progress(run.notebooks, "report notebooks") if progress else run.notebooks:
            defined = notebook_parameters(nb)
            # every offered name the notebook defines, None included (the rule's other half)
            params = {k: v() if isinstance(v, _Later) else v for k, v in offered.items() if k in defined}
            dst = run.out / nb.name
            run_notebook(nb, dst, params, cwd=run.notebooks_dir, show_progress=progress is not None)
            relocate_file(dst, run.out, run.final)  # paths into the staging folder name the final one
            html = to_html(dst, pages.pages, source=pages.source, rule=pages.rule)
            written += [dst, html]
            runs.append(
                {
                    "notebook": nb.name,
                    "html": html.name,
                    "parameters": {
                        k: relocate(v, run.out, run.final) if isinstance(v, str) else v
                        for k, v in params.items()
                    },
                    "not_set": sorted(set(offered) - set(params)),
                }
            )
    return runs, written


def _write_index(
    run: ReportRun,
    settings: Settings,
    source: Source,
    rec: Recommendation,
    hist: LengthHistogram,
    raw: LengthHistogram,
    step_time: TimeRecommendation | None,
    pages: PageContext,
    command: str,
    trade: TradeOff,
    extra: Sequence[tuple[str, str]] = (),
    noise: GradientNoise | None = None,
) -> Path:
    """Write ``index.html`` from the engine's facts about ``hist`` (``raw``: before ``max_len``;
    the speed-up priced with ``step_time``'s model, the one notebook 04 fitted)."""
    facts = summary_facts(
        source,
        rec,
        hist,
        seed=settings.seed,
        world_size=settings.world_size,
        model=None if step_time is None else step_time.model,
        step_times_name=None if run.step_times is None else run.step_times.name,
        calibration=None
        if settings.tokens_per_s is None
        else (settings.tokens_per_s, str(settings.reference_strategy)),
        trade=trade,
        noise=noise,
    )
    path = run.out / INDEX_HTML
    clipping = "" if settings.max_len is None else describe_clipping(raw, settings.max_len)
    page = index_html(facts, pages.pages, skipped=run.skipped, command=command, lengths=clipping, extra=extra)
    path.write_text(page, encoding="utf-8")
    return path


def _adopt(src: Path, source: Source, run: ReportRun) -> tuple[Path, Source]:
    """Move ``src``, a file written for this report, into the staging folder: the path it will
    have in the report, and ``source`` naming it there."""
    shutil.move(src, run.out / src.name)
    final = run.final / src.name
    return final, replace(source, files=tuple(replace(f, path=str(final)) for f in source.files))


def is_case_data(src: LengthSource) -> bool:
    """Whether ``src`` is the bundled case data (:data:`analysis.paths.BUNDLED_DATA`)."""
    return isinstance(src, str | os.PathLike) and Path(src).resolve() == BUNDLED_DATA.resolve()


def _page_facts(
    hist: LengthHistogram, rule: BatchRule, k_choice: str, measured: Measured | None, src: LengthSource
) -> tuple[list[tuple[str, str]], str | None]:
    """The summary page's sentences beside the source (how the lengths were measured, the K
    used, the heavy tail's ``--max-len`` hint), and that hint as the CLI prints it (or None)."""
    facts = [("buckets used", k_choice)]
    if measured is not None:
        facts.insert(0, ("measured", _measured_sentence(measured, Path(str(src)).name)))
    tail = heavy_tail(hist, rule)
    if tail is None:
        return facts, None
    facts.append(("long tail", describe_heavy_tail(tail)))
    return facts, f"hint: {describe_heavy_tail(tail)}"


def _shown_name(source: str) -> str:
    """A raw source as a title names it: a file by its name, a folder or glob as given."""
    path = Path(source)
    return path.name if path.is_file() else source


def _measured_sentence(measured: Measured, lengths_file: str) -> str:
    return describe_measurement(
        measured.source,
        measured.tokenizer,
        measured.tokenizer_sha256,
        field=measured.field,
        chat_field=measured.chat_field,
        lengths_file=lengths_file,
    )
