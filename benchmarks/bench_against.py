"""Benchmark: ``optimize_edges(K=6)`` in this checkout beside another one, file by file and batch
size by batch size, and whether the two give the same plans.

Run from the repository root::

    git worktree add /tmp/before COMMIT      # the checkout to compare with
    PYTHONPATH=. .venv/bin/python benchmarks/bench_against.py /tmp/before
    PYTHONPATH=. .venv/bin/python benchmarks/bench_against.py /tmp/before --sizes 8,100 --rounds 3

For the bundled data and every ``../shared/data/*.npy`` (unclipped), each batch size of
``--sizes`` (default 100, 300, 1,000, 1,500, 3,000 and 10,000): the median CPU milliseconds of
the exact ``optimize_edges(hist, 6, batch_size=B)`` (one core, warm: each child compiles or
loads its own numba cache first) in each checkout, their ratio (this one over the other, the
median of the rounds' ratios), and ``same`` where every round of both gave the same edges.
Each round times the other checkout, then this one, each in a child process, so that both
see the same machine (these are shared: compare the ratios).  The bundled data's calls take a
tenth of a second or more, so they run 3 times a round, the shared files' 11.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from _common import SHARED_DATA

from analysis.paths import BUNDLED_DATA, PROJECT_ROOT

# The child: each (file, batch size) timed in turn; prints {"name B": [ms, edges]} as JSON.
_CHILD = """
import json, os, statistics, sys, time
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
from analysis.batching import BatchRule
from analysis.loaders import load_lengths
from analysis.optimize import optimize_edges
files, sizes = json.loads(sys.argv[1]), json.loads(sys.argv[2])
out = {}
for name, path in files.items():
    hist = load_lengths(path)
    for b in sizes:
        rule = BatchRule(batch_size=b)
        plan = optimize_edges(hist, 6, rule, candidates=None)
        seconds = []
        for _ in range(3 if name == "bundled" else 11):
            start = time.process_time()
            optimize_edges(hist, 6, rule, candidates=None)
            seconds.append(time.process_time() - start)
        out[f"{name} {b}"] = [statistics.median(seconds) * 1e3, [int(e) for e in plan.edges]]
print(json.dumps(out))
"""


def run_child(checkout: Path, files: dict[str, str], sizes: list[int]) -> dict[str, list]:
    """The child's timings and edges in ``checkout`` (its own ``analysis`` first on the path)."""
    env = dict(os.environ, PYTHONPATH=str(checkout), OMP_NUM_THREADS="1")
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(files), json.dumps(sizes)],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise SystemExit(f"bench_against: the child in {checkout} failed: {last}")
    result: dict[str, list] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("other", type=Path, help="the checkout to compare with (git worktree add DIR COMMIT)")
    parser.add_argument("--sizes", default="100,300,1000,1500,3000,10000", help="batch sizes (commas)")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    if not (args.other / "analysis" / "__init__.py").is_file():
        raise SystemExit(f"bench_against: {args.other} is not a checkout of this project (no analysis/)")
    try:
        sizes = [int(s) for s in args.sizes.split(",")]
    except ValueError:
        raise SystemExit(f"bench_against: --sizes takes integers and commas, not {args.sizes!r}") from None
    files = {"bundled": str(BUNDLED_DATA)}
    files.update({p.stem: str(p) for p in sorted(SHARED_DATA.glob("*.npy"))})
    rounds = []
    for _ in range(args.rounds):
        rounds.append((run_child(args.other, files, sizes), run_child(PROJECT_ROOT, files, sizes)))
    print(f"K = 6, CPU ms (one core), {args.other} beside this checkout, {args.rounds} rounds:")
    print(f"   {'data, batch size':<34} {'other':>9} {'this':>9} {'ratio':>7}")
    for key in rounds[0][0]:
        other = statistics.median(o[key][0] for o, _ in rounds)
        this = statistics.median(t[key][0] for _, t in rounds)
        ratio = statistics.median(t[key][0] / o[key][0] for o, t in rounds)
        same = all(o[key][1] == t[key][1] == rounds[0][0][key][1] for o, t in rounds)
        print(f"   {key:<34} {other:9.2f} {this:9.2f} {ratio:6.2f}x {'same' if same else 'DIFFERENT PLANS'}")


if __name__ == "__main__":
    main()
