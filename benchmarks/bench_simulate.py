"""Benchmark: one simulated epoch of every batching strategy on case-sized data, beside the
previous implementation.

Run from the repository root::

    .venv/bin/python benchmarks/bench_simulate.py [--against REV_OR_DIR] [--runs N]

On the bundled data (``data/case_lengths.csv``, 902,087 samples of 65..8,192 tokens, in a
seeded random sample order, as a dataset on disk would be), batch size 8, the optimal 6-bucket
edges for it (``optimize_edges(hist, 6, batch_size=8)``), token strategies at
``max_tokens = 8 * 8192``.  For each strategy, the median of ``--runs`` (default 7) runs of:
the one-off preparation (``epoch_builder``: sorting, bucket ids, the packing plan), one epoch
(``EpochBuilder.epoch``), and one ``simulate`` call of one epoch (preparation + epoch + the
per-batch table + every epoch metric, batch hashes included); for ``bucketed`` also one epoch of
a three-epoch ``simulate`` (whose later epochs look their batches up among the earlier ones').

Each figure is printed beside the same call of the previous implementation, ``--against``
(default ``08835f2``, the last commit before issue 14's simulation work; a directory holding an
``analysis/`` folder also works), imported in the same process (``_common.previous_analysis``).
The two are run alternately, so a load that comes and goes slows both alike; ``ratio`` is the
median of the per-run ratios (current / previous).  The targets of issue 14 are printed as
targets, not checked: the shared development machine's timings move with its load, and
timings are never tests.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import numpy as np
from _common import case_histogram, paired_seconds, previous_analysis

import analysis
from analysis.case import CASE_BATCH_SIZE, CASE_MAX_LENGTH
from analysis.paths import BUNDLED_DATA
from analysis.simulation.strategies import STRATEGIES

#: The last commit before issue 14's simulation work.
PREVIOUS = "08835f2"
#: Issue 14's targets for one ``simulate`` call of one epoch, in seconds.
TARGETS = {"bucketed": 0.060, "token_budget": 0.100, "packing": 0.100}


def calls(package: Any, lengths: np.ndarray, strategy: str, options: dict[str, Any]) -> dict[str, Any]:
    """The timed calls of one strategy, made with ``package`` (current or previous)."""
    builder = package.strategies.epoch_builder(lengths, strategy, **options)
    rng = np.random.default_rng(0)

    def simulate(epochs: int) -> Callable[[], Any]:
        return lambda: package.simulation.simulate(
            lengths, strategy, rng=np.random.default_rng(0), epochs=epochs, **options
        )

    out = {
        "prepare": lambda: package.strategies.epoch_builder(lengths, strategy, **options),
        "epoch": lambda: builder.epoch(rng),
        "simulate, 1 epoch": simulate(1),
    }
    if strategy == "bucketed":
        out["simulate, 3 epochs"] = simulate(3)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", default=PREVIOUS, help="git revision (or directory) to compare with")
    parser.add_argument("--runs", type=int, default=7, help="timed runs of each call (median)")
    args = parser.parse_args()
    hist = case_histogram().clip(CASE_MAX_LENGTH)
    # expand() is sorted by length; a dataset on disk is not: shuffle it (seeded)
    lengths = np.random.default_rng(1701).permutation(hist.expand())
    edges = [int(e) for e in analysis.optimize_edges(hist, 6, batch_size=CASE_BATCH_SIZE).edges]
    previous = previous_analysis(args.against)
    print(
        f"data: {BUNDLED_DATA.name} (shuffled), {hist.n_samples:,} samples, "
        f"{hist.n_distinct:,} distinct lengths"
    )
    print(
        f"median of {args.runs} runs; batch_size={CASE_BATCH_SIZE}, optimal edges={edges}, "
        f"max_tokens={CASE_BATCH_SIZE * CASE_MAX_LENGTH}"
    )
    if previous is None:
        print(f"previous implementation {args.against!r} not readable: current figures only")
    else:
        print(f"previous: {args.against} (run alternately with the current code in this process)")
    print(f"{'strategy':<16}{'call':<20}{'previous s':>11}{'current s':>11}{'ratio':>7}  target")
    for strategy in STRATEGIES:
        if strategy in ("token_budget", "packing"):
            rule = {"max_tokens": CASE_BATCH_SIZE * CASE_MAX_LENGTH}
        else:
            rule = {"batch_size": CASE_BATCH_SIZE}
        options: dict[str, Any] = {"edges": edges, **rule}
        current = calls(analysis, lengths, strategy, options)
        before = calls(previous, lengths, strategy, options) if previous is not None else {}
        for name, call in current.items():
            per = 3 if name.endswith("3 epochs") else 1
            target = TARGETS.get(strategy) if name == "simulate, 1 epoch" else None
            note = f"<= {target:.3f} s" if target else ""
            if name in before:
                old, new, ratio = paired_seconds(before[name], call, runs=args.runs)
                print(f"{strategy:<16}{name:<20}{old / per:>11.3f}{new / per:>11.3f}{ratio:>7.2f}  {note}")
            else:
                _, new, _ = paired_seconds(call, call, runs=args.runs)
                print(f"{strategy:<16}{name:<20}{'':>11}{new / per:>11.3f}{'':>7}  {note}")
    print("(simulate, 3 epochs: seconds per epoch)")


if __name__ == "__main__":
    main()
