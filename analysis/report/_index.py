"""The report's summary page, ``index.html``: the answer for *this* file first, then the pages.

:func:`summary_facts` asks the engine for what the page states (the recommendation, the
simulated mixing, the expected speed-up); :func:`index_html` writes it as one self-contained
page (the report's inline style sheet, no script, nothing loaded from anywhere), every string
escaped and every number formatted by :mod:`analysis.tables`.  :func:`describe_source` names
the input: its files with their sizes and SHA-256 digests, or an in-memory object.
"""

from __future__ import annotations

import hashlib
import html
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.answers.baselines import budget_baselines
from analysis.answers.gradient_noise import PlanQuality, plan_quality
from analysis.answers.recommendation import DEFAULT_TIME_EPOCHS, Recommendation
from analysis.answers.throughput import predict_strategy_throughput
from analysis.answers.tradeoff import TradeOff, tradeoff
from analysis.lengths import LengthHistogram
from analysis.loaders import LengthSource, expand_paths
from analysis.narrative.frontier import floor_sentence, frontier_sentence
from analysis.narrative.noise import describe_noise_model, describe_plan_noise
from analysis.narrative.plan import plan_warnings
from analysis.narrative.recommendation import (
    describe_answer,
    describe_case,
    describe_ranks,
    describe_recommendation,
)
from analysis.optimize import sweep_measure
from analysis.padding.mixing import random_mixing, sorted_mixing
from analysis.report._notebooks import REPORT_CSS, Page
from analysis.tables import format_count, format_percent, format_value, tidy
from analysis.timing.noise import GradientNoise, NoiseFigure
from analysis.timing.step_time import StepTimeModel

__all__ = [
    "SourceFile",
    "Source",
    "Speed",
    "SummaryFacts",
    "describe_source",
    "summary_facts",
    "summary_tradeoff",
    "index_html",
]

#: The strategies the summary compares.
_SHOWN = ("random", "sorted", "bucketed")


@dataclass(frozen=True)
class SourceFile:
    """One input file: its path as given, its size in bytes and its SHA-256 digest (hex)."""

    path: str
    size: int
    sha256: str


@dataclass(frozen=True)
class Source:
    """What a report read: ``name`` (a file's name, a glob or folder as given, or the type of
    an in-memory object) and its ``files`` (none for an in-memory source)."""

    name: str
    files: tuple[SourceFile, ...]

    @property
    def in_memory(self) -> bool:
        """True when the lengths came from an object, not from files."""
        return not self.files


def describe_source(src: LengthSource) -> Source:
    """The files of ``src`` (a path, folder or glob: :func:`analysis.loaders.expand_paths`)
    with their sizes and SHA-256 digests, or, for any other source, its type.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "lengths.txt"
    >>> _ = p.write_text("3\\n5\\n")
    >>> s = describe_source(p)
    >>> s.name, s.files[0].size, s.files[0].sha256[:12]
    ('lengths.txt', 4, '56c47cb32092')
    >>> describe_source(np.array([3, 5]))
    Source(name='in-memory ndarray', files=())
    """
    if not isinstance(src, str | os.PathLike):
        return Source(f"in-memory {type(src).__name__}", ())
    text, paths = expand_paths(src)
    files = tuple(SourceFile(str(p), p.stat().st_size, _sha256(p)) for p in paths)
    one_file = len(paths) == 1 and Path(text) == paths[0]
    return Source(paths[0].name if one_file else text, files)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class Speed:
    """The expected speed-up of the plan over ``against`` (a full shuffle; dynamic batching under
    a token budget), and how it was obtained: ``unit`` ``"tokens/s"`` (``tokens_per_s`` by
    strategy), ``"padded-token ratio"`` or ``"step ratio"``; ``basis`` says in words what the
    numbers assume."""

    ratio: float
    unit: str
    basis: str
    tokens_per_s: dict[str, float]
    against: str = "a full shuffle"


@dataclass(frozen=True, kw_only=True)
class SummaryFacts:
    """Everything the summary page states, from the engine."""

    source: Source
    rec: Recommendation
    mixing: pd.Series  # exact mixing by strategy (analysis.padding.mixing)
    tradeoff: TradeOff  # the frontier read at the floor or the Trainer's efficiency
    seed: int
    speed: Speed
    baselines: pd.DataFrame | None = None  # token_budget and packing, under a token budget
    noise: GradientNoise | None = None  # the --noise model
    quality: PlanQuality | None = None  # the plan in gradient noise (with the --noise model)
    noise_figures: Mapping[str, NoiseFigure] | None = None  # the model's figures on the data
    world_size: int = 1  # data-parallel ranks (--world-size)

    @property
    def frontier_text(self) -> str:
        """The trade-off sentence (:func:`analysis.narrative.frontier.frontier_sentence`, on the
        trade-off's mixing axis): the one notebook 02 writes, from the same computation."""
        return frontier_sentence(self.tradeoff, self.tradeoff.mixing_axis)


def _speed(
    rec: Recommendation,
    hist: LengthHistogram,
    *,
    model: StepTimeModel | None,
    step_times_name: str | None,
    calibration: tuple[float, str] | None,
    world_size: int,
    seed: int,
    baselines: pd.DataFrame | None = None,
) -> Speed:
    """Tokens/s under the step-time ``model`` (fitted to the file ``step_times_name``) when
    given (the padded-token prediction from a measured ``calibration`` otherwise, else the
    padded-token ratio)."""
    if model is not None:
        table = predict_strategy_throughput(
            hist,
            model,
            rec.rule,
            edges=rec.plan.edges,
            rng=np.random.default_rng(seed),
            strategies=_SHOWN,
            world_size=world_size,
        )
        rates = {str(k): float(v) for k, v in table["tokens_per_s"].items()}
        basis = (
            f"useful tokens/s of the plan above, predicted by the step-time model fitted to "
            f"{step_times_name}; notebook 04 also shows edges optimised for time"
        )
        return Speed(rates["bucketed"] / rates["random"], "tokens/s", basis, rates)
    if calibration is not None:
        tokens_per_s, reference = calibration
        rates = rec.predicted_tokens_per_s(tokens_per_s, reference)
        basis = (
            f"useful tokens/s scaled by efficiency from your measured {reference} run at "
            f"{format_count(tokens_per_s)} tokens/s (step time taken as proportional to padded tokens)"
        )
        return Speed(rates["bucketed"] / rates["random"], "tokens/s", basis, rates)
    if rec.plan.objective_kind == "steps":  # a token budget: every step is sized for the budget
        basis = "step ratio: the speed-up if every step, sized for the whole token budget, takes as long"
        if baselines is not None and "token_budget" in baselines.index:  # what a team would run
            steps = float(baselines["batches"].astype(float)["token_budget"])  # (the plan's unit)
            return Speed(
                steps / rec.plan.n_batches, "step ratio", basis, {}, "dynamic batching (token_budget)"
            )
        return Speed(rec.strategies["random"].n_batches / rec.plan.n_batches, "step ratio", basis, {})
    relative = rec.predicted_tokens_per_s(1.0, "random")
    basis = "padded-token ratio: the speed-up if step time is proportional to padded tokens"
    return Speed(relative["bucketed"], "padded-token ratio", basis, {})


def summary_tradeoff(
    rec: Recommendation, hist: LengthHistogram, *, seed: int, noise: GradientNoise | None = None
) -> TradeOff:
    """The trade-off the summary page states (and ``recommendation.json`` records): the frontier
    of :func:`analysis.answers.tradeoff.tradeoff` from a generator seeded with ``seed``, read at
    the plan's ``min_efficiency`` (or ``min_budget_fill``) floor when it has one (else at the
    Trainer's efficiency), on the gradient axis with a noise model (``noise``): notebook 02,
    given the same ``seed``, ``min_efficiency`` and ``noise_path``, computes the same."""
    floor = rec.floor.value if rec.floor is not None and rec.floor.measure in _TARGETS else None
    return tradeoff(hist, rec.rule, rng=np.random.default_rng(seed), min_efficiency=floor, noise=noise)


#: The floors a trade-off is read at (a mixing floor is not an efficiency to read at).
_TARGETS = ("efficiency", "budget_fill")


def summary_facts(
    source: Source,
    rec: Recommendation,
    hist: LengthHistogram,
    *,
    seed: int,
    world_size: int = 1,
    model: StepTimeModel | None = None,
    step_times_name: str | None = None,
    calibration: tuple[float, str] | None = None,
    trade: TradeOff | None = None,
    noise: GradientNoise | None = None,
) -> SummaryFacts:
    """What the summary page states about ``hist`` under ``rec`` (its plan and rule): the
    exact mixing (:mod:`analysis.padding.mixing`), the trade-off from the frontier of every
    strategy (:func:`analysis.answers.tradeoff.tradeoff`, simulated from ``seed``: what notebook
    02 computes), the expected speed-up (:class:`Speed`) and, under a token budget, what dynamic
    batching and packing take (:func:`analysis.answers.baselines.budget_baselines`).  With a
    gradient-noise model (``noise``), the plan in gradient noise
    (:func:`analysis.answers.gradient_noise.plan_quality`: time to the same loss under the
    step-time ``model`` when there is one, steps otherwise).

    Examples
    --------
    >>> from analysis.answers.recommendation import recommend
    >>> h = LengthHistogram.from_lengths(np.random.default_rng(0).integers(1, 500, 400))
    >>> facts = summary_facts(Source("x", ()), recommend(h, 3, batch_size=4), h, seed=0)
    >>> facts.speed.unit, round(facts.speed.ratio, 3)
    ('padded-token ratio', 1.322)
    >>> bool(facts.mixing["bucketed"] < facts.mixing["random"]), facts.frontier_text[:30]
    (True, 'At 97.2% efficiency or more, t')
    """
    mixing = pd.Series(
        {
            "sorted": sorted_mixing(hist, rec.rule),
            "random": random_mixing(hist, rec.rule),
            "bucketed": rec.plan.mixing,
        }
    )
    trade = summary_tradeoff(rec, hist, seed=seed, noise=noise) if trade is None else trade
    simulated = trade.frontier.simulated_samples
    if 0 < simulated < hist.n_samples:  # the Trainer's row: simulated on a subsample
        mixing.attrs = {"simulated_samples": simulated, "population_samples": hist.n_samples}
    baselines = budget_baselines(  # notebook 02's table's rows (the report passes it these settings)
        hist,
        rec.rule,
        rng=np.random.default_rng(seed),
        edges=rec.plan.edges,
        epochs=DEFAULT_TIME_EPOCHS,
        world_size=world_size,
    )
    speed = _speed(
        rec,
        hist,
        baselines=baselines,
        model=model,
        step_times_name=step_times_name,
        calibration=calibration,
        world_size=world_size,
        seed=seed,
    )
    quality = (
        None if noise is None else plan_quality(noise, hist, rec.rule, edges=rec.plan.edges, step_time=model)
    )
    figures = None if noise is None else noise.figures(hist)
    return SummaryFacts(
        source=source,
        rec=rec,
        mixing=mixing,
        tradeoff=trade,
        seed=seed,
        speed=speed,
        baselines=baselines,
        noise=noise,
        quality=quality,
        noise_figures=figures,
        world_size=world_size,
    )


def _e(value: object) -> str:
    """Escaped for HTML text and attribute values."""
    return html.escape(str(value), quote=True)


def _table(frame: pd.DataFrame) -> str:
    """A frame as an HTML table, every cell formatted (:func:`analysis.tables.tidy`) and escaped."""
    return str(tidy(frame).to_html(escape=True, border=0))


def _multiple(ratio: float) -> str:
    return f"{format_value(ratio)}×"


def _source_html(source: Source) -> str:
    if source.in_memory:
        return f"<dd>{_e(source.name)} (no file: no size or checksum)</dd>"
    rows = "".join(
        f"<tr><td class='mono'>{_e(f.path)}</td><td>{_e(format_count(f.size))}</td>"
        f"<td class='mono digest'>{_e(f.sha256)}</td></tr>"
        for f in source.files
    )
    total = sum(f.size for f in source.files)
    head = f"{len(source.files)} files, " if len(source.files) > 1 else ""
    return (
        f"<dd><b>{_e(source.name)}</b> ({head}{_e(format_count(total))} bytes)"
        f"<table><thead><tr><th>file</th><th>bytes</th><th>sha256</th></tr></thead>"
        f"<tbody>{rows}</tbody></table></dd>"
    )


def _markdown(text: str) -> str:
    """A sentence of :mod:`analysis.narrative` as HTML: escaped, its ``**bold**`` in ``<b>``."""
    return re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", _e(text))


def _answer(facts: SummaryFacts) -> str:
    speed = facts.speed
    text = describe_answer(facts.rec, speed.ratio, speed.unit, facts.baselines)
    if facts.quality is not None:
        text += f" In gradient noise, on your model: {describe_plan_noise(facts.quality, errors=False)}"
    return _markdown(text)


def _speed_html(speed: Speed) -> str:
    text = f"<b>{_e(_multiple(speed.ratio))}</b> over {_e(speed.against)} ({_e(speed.basis)})"
    if speed.tokens_per_s:
        text += "; " + ", ".join(
            f"{_e(name)} {_e(format_count(rate))} tokens/s" for name, rate in speed.tokens_per_s.items()
        )
    if speed.unit != "tokens/s":
        text += "; <code>--step-times FILE</code> predicts tokens/s on your model and hardware"
    return f"<dd>{text}</dd>"


def _subsample(mixing: pd.Series) -> str:
    """How the simulated strategies ran when the data were too many to expand (else nothing)."""
    if "simulated_samples" not in mixing.attrs:
        return ""
    simulated, population = mixing.attrs["simulated_samples"], mixing.attrs["population_samples"]
    return f", on a uniform subsample of {format_count(simulated)} of the {format_count(population)} samples"


def _noise_html(facts: SummaryFacts) -> str:
    """The gradient-noise facts (with a ``--noise`` model; else nothing), the trade-off on the
    gradient axis after them."""
    if facts.noise is None or facts.quality is None or facts.noise_figures is None:
        return ""
    figures = facts.noise_figures
    gradient = facts.tradeoff.mixing_axis != "mixing"
    return (
        f"<dt>gradient noise</dt><dd>{_e(describe_plan_noise(facts.quality))}<br>"
        f"<span class='note'>{_e(describe_noise_model(facts.noise, figures))} A plan trains like a "
        "shuffle of B_eff samples per step; steps to the same loss are predicted to scale as "
        "1 + B_noise / B_eff (McCandlish et al. 2018, a law of steady-state training: early "
        "training, or a checkpoint far from the one probed, may not follow it); every figure ± "
        "its jackknife standard error. "
        "recommendation.json (gradient_noise) has every figure and each strategy's noise over "
        f"1, 4 and 16 steps.</span>{'<br>' + _tradeoff_html(facts) if gradient else ''}</dd>"
    )


def _tradeoff_html(facts: SummaryFacts) -> str:
    """The trade-off sentence, the floor's, and how the Trainer's row was obtained."""
    return (
        f"{_e(facts.frontier_text)} {_e(floor_sentence(facts.rec.plan) or '')} "
        f"<span class='note'>(The length grouping is simulated{_e(_subsample(facts.mixing))}. "
        "Notebook 02 draws every strategy and knob on this plane; "
        "<code>python -m analysis frontier FILE</code> prints it.)</span>"
    )


def _mixing_html(facts: SummaryFacts) -> str:
    """The length mixing, and the trade-off on it (with a noise model the trade-off is read on
    the gradient axis, under the gradient noise: the length mixing is then said to be a proxy
    here, else by the trade-off sentence)."""
    mix = facts.mixing
    if facts.tradeoff.mixing_axis == "mixing":
        after = _tradeoff_html(facts)
    else:
        after = "<span class='note'>(a proxy: the gradient noise below measures what it stands for)</span>"
    return (
        "<dd>the share of the data's length variance a batch keeps (expected within-batch sample "
        "variance over the data's, exact: 100% for a full shuffle in batches of two or more, 0 in "
        "batches of one sample): "
        f"bucketed <b>{_e(format_percent(mix['bucketed']))}</b>, "
        f"random {_e(format_percent(mix['random']))}, sorted {_e(format_percent(mix['sorted']))}. "
        f"{after}</dd>"
    )


def _k_html(rec: Recommendation) -> str:
    k, suggested = rec.plan.n_buckets, rec.n_buckets_suggested
    optimal = rec.sweep[rec.sweep["method"] == "optimal"].set_index("n_buckets")[sweep_measure(rec.sweep)]
    text = f"this report uses <b>K = {k}</b> ({_e(format_percent(float(optimal.loc[k])))})"
    if suggested == k:
        text += "; the gain rule suggests the same K"
    else:
        text += (
            f"; the gain rule suggests <b>K = {suggested}</b> "
            f"({_e(format_percent(float(optimal.loc[suggested])))}): "
            "rerun with <code>--buckets auto</code> to take it"
        )
    return (
        f"<dd>{text}.<br><span class='note'>{_e(describe_recommendation(rec))}</span>"
        f"<br><span class='note'>{_e(describe_case())}</span></dd>"
    )


def _budget_html(rec: Recommendation) -> str:
    """The budget fill and the plan's warnings (one line each), under a token budget."""
    plan = rec.plan
    text = ""
    if plan.budget_fill is not None:
        text += (
            f"<dt>budget fill</dt><dd>bucketed <b>{_e(format_percent(plan.budget_fill))}</b> in "
            f"{_e(format_count(plan.n_batches))} steps, a shuffle "
            f"{_e(format_count(rec.strategies['random'].n_batches))} steps (useful tokens / "
            f"steps × {_e(rec.rule.text)}: the objective under a token budget)</dd>"
        )
    if plan.warnings:
        lines = "<br>".join(f"warning: {_e(line)}" for line in plan_warnings(plan))
        text += f"<dt>warnings</dt><dd class='warnings'>{lines}</dd>"
    return text


def _ranks_html(facts: SummaryFacts) -> str:
    """The ranks, with more than one (:func:`~analysis.narrative.recommendation.describe_ranks`)."""
    if facts.world_size == 1:
        return ""
    plan = facts.rec.plan
    steps = plan.n_batches if plan.budget_fill is not None else None  # (a budget's: counted as steps)
    return f"<dt>ranks</dt><dd>{_e(describe_ranks(facts.world_size, steps))}</dd>"


def _pages_html(pages: Sequence[Page], skipped: Sequence[str]) -> str:
    items = "".join(f"<li><a href='{_e(p.html)}'>{_e(p.title)}</a></li>" for p in pages)
    items += "".join(
        f"<li>{_e(name)}: not run (it needs measured step times: <code>--step-times</code>)</li>"
        for name in skipped
    )
    items += (
        "<li><a href='recommendation.json'>recommendation.json</a>: every number here, the "
        "settings, the exports for trainers</li>"
    )
    return f"<ul class='pages'>{items}</ul>"


def index_html(
    facts: SummaryFacts,
    pages: Sequence[Page],
    *,
    skipped: Sequence[str] = (),
    command: str = "",
    lengths: str = "",
    extra: Sequence[tuple[str, str]] = (),
) -> str:
    """The summary page: the answer for this file, the facts behind it, the links to every
    notebook page (``pages``; ``skipped`` names notebooks not run) and to ``recommendation.json``;
    ``lengths`` says what clipping did to the file's lengths, when it was asked for; ``extra``:
    more facts, ``(name, sentence)``, shown after the source (how the lengths were measured,
    which K the report uses and why).

    Examples
    --------
    >>> from analysis.answers.recommendation import recommend
    >>> h = LengthHistogram.from_lengths(np.random.default_rng(0).integers(1, 500, 400))
    >>> facts = summary_facts(Source("<a&b>.csv", ()), recommend(h, 3, batch_size=4), h, seed=0)
    >>> page = index_html(facts, [Page("01_x.ipynb", "01 · X")])
    >>> "&lt;a&amp;b&gt;.csv" in page, "<a&b>" in page, "href='01_x.html'" in page
    (True, False, True)
    """
    rec, source = facts.rec, facts.source
    plan = rec.plan
    strategies = rec.strategy_table().loc[
        list(_SHOWN), ["efficiency", "padded_tokens", "n_batches", "batch_sizes"]
    ]
    body = f"""
<p class="note">padding-workbench report</p>
<h1>Bucketed batching for {_e(source.name)}</h1>
<p class="answer">{_answer(facts)}</p>
<h2>The answer, fact by fact</h2>
<dl class="facts">
<dt>source</dt>{_source_html(source)}
{"".join(f"<dt>{_e(name)}</dt><dd>{_e(text)}</dd>" for name, text in extra)}
{f"<dt>lengths</dt><dd>{_e(lengths)}</dd>" if lengths else ""}
<dt>batch rule</dt><dd>{_e(rec.rule.text)}</dd>
{_ranks_html(facts)}
<dt>plan</dt><dd>K = {plan.n_buckets} ({_e(plan.method)}), edges
<span class="mono">{_e(format_value(plan.edges))}</span>, batch sizes per bucket
<span class="mono">{_e(format_value(plan.batch_sizes))}</span></dd>
<dt>efficiency</dt><dd>bucketed {_e(format_percent(plan.efficiency))}, random
{_e(format_percent(rec.strategies["random"].efficiency))}, sorted
{_e(format_percent(rec.strategies["sorted"].efficiency))} (useful / padded tokens, exact expectations)</dd>
{_budget_html(rec)}
<dt>speed-up</dt>{_speed_html(facts.speed)}
<dt>length mixing kept</dt>{_mixing_html(facts)}
{_noise_html(facts)}
<dt>number of buckets</dt>{_k_html(rec)}
</dl>
<h2>The strategies</h2>
{_table(strategies)}
<h2>The plan, bucket by bucket</h2>
{_table(plan.to_frame())}
<h2>The pages</h2>
{_pages_html(pages, skipped)}
<p class="note">Command: <code class="command">{_e(command)}</code></p>
"""
    css = REPORT_CSS.read_text(encoding="utf-8")
    return (
        "<!DOCTYPE html>\n<html lang='en'>\n<head>\n<meta charset='utf-8'>\n"
        "<meta name='viewport' content='width=device-width, initial-scale=1.0'>\n"
        f"<title>Summary — {_e(source.name)}</title>\n<style>\n{css}</style>\n</head>\n"
        f"<body>\n<div class='report-page'>{body}</div>\n</body>\n</html>\n"
    )
