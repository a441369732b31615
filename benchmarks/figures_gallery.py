"""Render every figure of :mod:`analysis.plots` for one length file into a folder, to look at.

Not a test: a gallery for reviewing the figures on real distributions::

    python benchmarks/figures_gallery.py data/case_lengths.csv /tmp/gallery/case
    python benchmarks/figures_gallery.py ../shared/data/arena_hard_answers.npy /tmp/gallery/arena
    python benchmarks/figures_gallery.py heavy-tail /tmp/gallery/heavy   # synthetic, unclipped

``heavy-tail`` is a seeded synthetic corpus: a log-normal body plus a Pareto tail whose
longest sample is 423,350 tokens (the shape of a source-code corpus, never clipped).
Options: ``--buckets K`` (default 6), ``--batch-size B`` (default 8), ``--max-len N`` (clip
first), ``--seed S``.  Prints one line per figure written.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's `analysis`

import analysis  # noqa: E402
from analysis import plots  # noqa: E402
from analysis.answers.recommendation import compare_edge_sets  # noqa: E402
from analysis.optimize import recommend_n_buckets  # noqa: E402
from analysis.padding.waste import sorted_padding  # noqa: E402

HEAVY_TAIL_MAX = 423_350


def heavy_tail_lengths(seed: int = 0, n: int = 60_000) -> np.ndarray:
    """Log-normal body (median ~500 tokens) plus a 3 % Pareto tail, longest 423,350 tokens."""
    rng = np.random.default_rng(seed)
    body = rng.lognormal(np.log(500), 1.0, size=n - n * 3 // 100)
    tail = 4_000 * (1 + rng.pareto(1.1, size=n * 3 // 100))
    lengths = np.clip(np.concatenate([body, tail]).round(), 1, HEAVY_TAIL_MAX).astype(np.int64)
    lengths[np.argmax(lengths)] = HEAVY_TAIL_MAX
    return lengths


def render(
    src: str,
    out: Path,
    *,
    n_buckets: int = 6,
    batch_size: int = 8,
    max_len: int | None = None,
    seed: int = 0,
    only: str = "",
) -> list[Path]:
    """Every figure for ``src`` (a path or ``heavy-tail``), saved as PNG into ``out``
    (only those whose name starts with ``only``, when given)."""
    hist = analysis.load_lengths(heavy_tail_lengths(seed) if src == "heavy-tail" else src)
    if max_len is not None:
        hist = hist.clip(max_len)
    rule = {"batch_size": batch_size}
    plan = analysis.optimize_edges(hist, n_buckets, **rule)
    sweep = analysis.sweep_bucket_counts(hist, range(1, min(16, hist.n_distinct) + 1), **rule)
    random_eff = analysis.evaluate_edges(hist, [0, hist.max], **rule).efficiency
    sorted_eff = sorted_padding(hist, analysis.BatchRule(**rule)).efficiency
    table = analysis.compare_strategies(
        hist, rng=np.random.default_rng(seed), edges=plan.edges, epochs=1, **rule
    )
    results = {
        name: analysis.simulate(hist, name, rng=np.random.default_rng(seed), edges=plan.edges, **rule)
        for name in ("sorted", "random", "bucketed")
    }
    k = n_buckets
    sets = {
        f"optimal, K={k}": plan,
        f"equal tokens, K={k}": analysis.optimize_edges(hist, k, method="equal_tokens", **rule),
        f"equal count, K={k}": analysis.optimize_edges(hist, k, method="equal_count", **rule),
        f"geometric, K={k}": analysis.optimize_edges(hist, k, method="geometric", **rule),
    }
    plans = compare_edge_sets(hist, sets, **rule)
    clip_at = max_len or int(hist.quantile(0.99))
    figures = {
        "01_length_histogram": plots.plot_length_histogram(hist),
        "01_token_histogram": plots.plot_length_histogram(hist, weight="tokens"),
        "01_length_cdf": plots.plot_length_cdf(hist),
        "01_token_share": plots.plot_token_share(hist),
        "01_clipping": plots.plot_clipping(hist, clip_at),
        "02_strategy_bars": plots.plot_strategy_bars(table),
        "02_randomness": plots.plot_randomness(table),
        "02_padded_per_step": plots.plot_padded_per_step(results),
        "03_efficiency_vs_buckets": plots.plot_efficiency_vs_buckets(
            sweep,
            random_efficiency=random_eff,
            sorted_efficiency=sorted_eff,
            chosen=k,
            recommended=recommend_n_buckets(sweep),
        ),
        "03_optimal_edges": plots.plot_edges_on_histogram(hist, plan),
        "03_edge_sets": plots.plot_edge_sets(plans, title=f"{k} buckets, batch size {batch_size}"),
    }
    written = []
    for name, fig in figures.items():
        if name.startswith(only):
            written += plots.save_figure(fig, name, out)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src", help="a lengths file, or 'heavy-tail' for the synthetic corpus")
    parser.add_argument("out", type=Path, help="folder for the PNGs (created)")
    parser.add_argument("--buckets", type=int, default=6)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--max-len", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", default="", help="render only figures whose name starts so")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    for path in render(
        args.src,
        args.out,
        n_buckets=args.buckets,
        batch_size=args.batch_size,
        max_len=args.max_len,
        seed=args.seed,
        only=args.only,
    ):
        print(path)
    print(f"{time.perf_counter() - start:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
