"""Every plan the optimiser gives, as JSON, to compare two checkouts (not a timing).

Run it in each checkout and compare the files::

    PYTHONPATH=. python benchmarks/plans_snapshot.py after.json
    (cd OLD_CHECKOUT && PYTHONPATH=. python /path/to/benchmarks/plans_snapshot.py before.json)

For ``data/case_lengths.csv`` and every ``../shared/data/*.npy`` (alpaca clipped at 8,192): the
edges and efficiency of every method for K = 1..16 under each rule of ``RULES`` (batch sizes 8,
17, 64, 1,000, 10,000 and 10**8; token budgets with and without ``pad_to_multiple_of``), the case's
edges' efficiency, and sorted padding.  Written against the API both before and
after issue 8 (it uses only the keyword batch rule), so an older checkout can run it too.

``--bits`` keeps every float to its last bit (``repr``) where the default rounds efficiencies
to 15 digits, and adds each plan's padded tokens and objective::

    PYTHONPATH=. python benchmarks/plans_snapshot.py --bits after.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import analysis
from analysis import BatchRule
from analysis.batching import cover_edges
from analysis.case import CASE_EDGES
from analysis.padding.waste import expected_padding

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
METHODS = ["optimal", "geometric", "equal_count", "equal_tokens", "greedy"]
RULES = (
    ("batch_size_8", {"batch_size": 8}),
    ("batch_size_17", {"batch_size": 17}),
    ("batch_size_64", {"batch_size": 64}),
    ("max_tokens_65536", {"max_tokens": 65536}),
    ("batch_size_1000", {"batch_size": 1000}),
    ("batch_size_10000", {"batch_size": 10_000}),
    ("batch_size_1e8", {"batch_size": 10**8}),
    ("max_tokens_4096_pad_64", {"max_tokens": 4096, "pad_to_multiple_of": 64}),
    ("max_tokens_2e24_pad_8", {"max_tokens": 2**24, "pad_to_multiple_of": 8}),
)


def snapshot(bits: bool = False) -> dict[str, dict[str, object]]:
    files = {"case": Path("data/case_lengths.csv"), **{p.stem: p for p in sorted(SHARED.glob("*.npy"))}}
    out: dict[str, dict[str, object]] = {}
    for name, path in files.items():
        hist = analysis.load_lengths(path)
        hist = hist.clip(8192) if name == "alpaca_eval_outputs" else hist
        row: dict[str, object] = {}
        for key, rule in RULES:
            ks = range(1, min(16, hist.n_distinct) + 1)
            try:
                sweep = analysis.sweep_bucket_counts(hist, ks, METHODS, **rule)
            except ValueError as exc:  # older checkouts refused some token budgets
                row[key] = f"error: {exc}"
                continue
            row[key] = [
                [int(k), m, [int(e) for e in edges], float(f"{eff:.15g}")]
                for k, m, edges, eff in zip(
                    sweep["n_buckets"], sweep["method"], sweep["edges"], sweep["efficiency"]
                )
            ]
            if bits:  # every float to its last bit
                columns = [c for c in ("efficiency", "padded_tokens", "objective") if c in sweep]
                row[key] = [list(r) for r in zip(row[key], *([repr(v) for v in sweep[c]] for c in columns))]
        edges = cover_edges(list(CASE_EDGES), hist)
        row["case_edges_efficiency"] = expected_padding(hist, edges, rule=BatchRule(batch_size=8)).efficiency
        out[name] = row
    return out


if __name__ == "__main__":
    args = sys.argv[1:]
    full = "--bits" in args
    target = Path(next(a for a in args if a != "--bits"))
    target.write_text(json.dumps(snapshot(full), indent=1) + "\n", encoding="utf-8")
    print("wrote", target)
