"""Test-wide settings, the fast unit core and the one shared report.

The tests mirror the package: ``tests/ground``, ``padding``, ``timing``, ``simulation``,
``optimize``, ``answers`` and ``narrative`` test the engine's folders of the same name,
``tests/faces`` its faces (CLI, report, explorer, figures, sampler, exports, loaders, measure),
``tests/integration`` the end-to-end runs (the report on the real notebooks, resume through the
training libraries), ``tests/architecture`` the project's shape, ``tests/browser`` the pages in
Chromium.  Every test under one of ``UNIT_FOLDERS`` is marked ``unit``: ``pytest -m unit``
(``make test-fast``) runs that fast core alone.

Hypothesis: no per-example deadline and no "too slow" health check (CI shares 2 cores with
other work, so wall time says nothing about correctness).  Under CI (``CI=true``) examples
are derandomized, so a CI run is reproducible; locally they stay random and keep exploring.

``shared_report``: the report's end-to-end tests (``tests/integration/test_report.py``,
``test_report_step_times.py``) read one report on the real notebooks, run once per session
(a papermill run of every notebook costs tens of seconds), plus the same command run again
into a second folder for the reproducibility test; both start in the background with the
session's first test.  Under pytest-xdist (``make test`` runs ``pytest -n auto``) the workers
share them: the first worker to start a test under ``tests/`` starts the two runs in a folder
beside the workers' own temporary folders, and a worker that needs them waits for their exit
codes there.

The optimiser's compiled kernels, the frontier's, the floors' and the packers' (numba, cached
next to their modules) are compiled once by the process that starts the workers, on a thread
of its own while they start and collect (no test is sent to a worker before it ends), so that
the workers, the report's runs and the notebooks' kernels load them from the cache instead of
each compiling them at once (about 40 s of CPU on a fresh clone, paid once instead of up to
five times).  The packers and the floors' label search, which share no compiled function with
the optimiser, compile meanwhile in a process of their own on the core the workers leave idle
once they have collected (about 8 s of the 40).  After ``make setup``, which compiles the
optimiser's kernels ahead (``analysis.optimize._ahead``), most of this loads them; what is
left to compile is the packers and what only the tests call (the dense DP).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

from analysis import BatchRule, LengthHistogram, frontier, optimize_edges, save_histogram, simulate
from analysis.optimize._kernel import solve_kernel
from analysis.optimize._problem import build_problem

settings.register_profile(
    "workbench",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=os.environ.get("CI", "").lower() in {"1", "true", "yes"},
    print_blob=True,
)
settings.load_profile("workbench")

#: The shared report's lengths: 2,000 short samples and 50 beyond the case's 8,192 (a path
#: that once failed inside the notebooks), clipped at ``SharedReport.max_len``, which keeps some
#: of them beyond 8,192 and clips the others (so notebook 01 shows a real clipping).
REPORT_LENGTHS = np.r_[
    np.random.default_rng(11).integers(20, 900, size=2_000),
    np.random.default_rng(12).integers(8_193, 12_000, size=50),
]


@dataclass(frozen=True)
class SharedReport:
    """One ``report`` command on the real notebooks (``out``), the same command again
    (``repeat``), and what it was given."""

    lengths: np.ndarray
    out: Path
    repeat: Path
    n_buckets: int = 3
    max_len: int = 10_000
    max_tokens: int = 16_384  # the token-budget rule (batch_size is then None), a path that once failed
    tokens_per_s: int = 10_000
    reference_strategy: str = "sorted"

    def argv(self, src: Path, out: Path) -> list[str]:
        """The command line, after ``padding-workbench``."""
        return [
            "--quiet",
            "report",
            str(src),
            "--out",
            str(out),
            "--buckets",
            str(self.n_buckets),
            "--max-len",
            str(self.max_len),
            "--max-tokens",
            str(self.max_tokens),
            "--tokens-per-s",
            str(self.tokens_per_s),
            "--reference-strategy",
            self.reference_strategy,
        ]


# `padding-workbench ARGS` in another process: cli.main(argv) records the same command line
# as an in-process call (`python -m analysis` would record its own spelling)
_CLI_MAIN = "import sys; from analysis.cli import main; sys.exit(main(sys.argv[1:]))"

#: How long a test waits for the shared report (both runs take well under a minute alone).
_REPORT_TIMEOUT_S = 600


#: The folders of the fast unit core (``-m unit``): the engine's own tests, no face, no notebook.
UNIT_FOLDERS = frozenset({"ground", "padding", "timing", "simulation", "optimize", "answers", "narrative"})

#: Tests of those folders left out of the fast core, by file and function: each takes over about
#: a third of a second of CPU with numba's cache warm (bit-for-bit comparisons of the DP's
#: variants, threads, a subprocess, TRL's packer, the CLI, a report's summary page, frontiers
#: with their floor searches); the exhaustive-search oracles stay in the core.  To find new
#: ones: ``pytest -m unit --durations=30 tests`` on a quiet machine.  ``make
#: test`` runs them with every other test; tests/architecture/test_suite_layout.py checks that
#: each one named here exists.
SLOW_UNIT_TESTS = {
    "optimize/test_optimize.py": (
        "test_candidate_grid_with_refinement_is_close_to_exact",
        "test_pruned_token_dp_equals_the_dense_dp_on_random_histograms",
        "test_the_threaded_dp_runs_from_two_python_threads_at_once",
        "test_greedy_is_a_local_optimum_no_worse_than_its_start",
        "test_the_candidate_searchs_gap_bounds_its_distance_to_the_exact_optimum",
        "test_the_dp_over_cells_bounds_the_optimum_from_below_and_meets_it_on_single_starts",
        "test_pruned_bounds_never_exceed_a_bucket_cost",
        "test_log_ratios_give_the_same_optimum",
        "test_pruned_token_dp_gives_the_dense_optimum_bit_for_bit",
    ),
    "optimize/test_budget.py": (
        "test_the_pruned_dp_and_the_candidate_grid_reach_the_steps_optimum",
        "test_the_summary_page_and_the_explorer_show_the_warnings",
    ),
    "optimize/test_optimize_exact.py": (
        "test_a_bucket_count_whose_tables_would_not_fit_is_refused_before_allocating",
        "test_the_pruned_dp_is_the_dense_exact_dp_bit_for_bit",
        "test_many_samples_per_bucket",
        "test_the_issue_case",
    ),
    "simulation/test_packers.py": ("test_pack_bfd_is_trl_pack_dataset_bin_for_bin",),
    "simulation/test_strategies.py": ("test_stable_argsort_of_keys_is_numpys",),
    "padding/test_waste.py": ("test_one_bucket_is_the_random_shuffle_hypergeometric",),
    "padding/test_budget_padded.py": (
        "test_no_batch_passes_the_budget_but_a_lone_sample_padded_beyond_it",
        "test_the_summary_page_and_the_explorer_warn_of_a_sample_padded_beyond_the_budget",
    ),
    "answers/test_frontier.py": (
        "test_cli_frontier_and_floors",
        "test_the_cli_prints_the_short_table_and_every_row_with_all",
        "test_under_a_token_budget_the_plane_is_the_steps_budget_fill",
        "test_no_floor_plan_beats_a_pareto_point",
        "test_the_marks_labels_cover_no_drawn_point",
        "test_the_marks_labels_cross_no_drawn_line",
    ),
    "narrative/test_narrative.py": (
        "test_the_summary_page_and_notebook_02_say_the_same_trade_off",
        "test_under_a_token_budget_the_headline_compares_with_dynamic_batching_and_packing",
        "test_the_summary_page_says_what_the_case_is",
        "test_a_full_shuffle_reaching_the_target_is_said_not_k_1_keeps_100_percent",
        "test_the_explorer_formats_through_tables",
        "test_with_a_batch_size_the_ranks_say_what_a_step_takes_and_count_no_steps",
    ),
    "timing/test_gradient_noise.py": (
        "test_the_report_records_the_noise_model_in_recommendation_json",
        "test_window_noise_matches_batches_of_real_vectors",
    ),
    "ground/test_limits.py": (
        "test_property_random_histograms",
        "test_simulation_of_a_huge_histogram_uses_a_stated_subsample",
        "test_token_budget_large_batches_on_the_bundled_data",
        "test_batch_size_beyond_a_bucket_is_one_short_batch",
        "test_a_subsample_s_counts_are_scaled_to_the_data_s_epoch",
    ),
    "answers/test_recommendation.py": (
        "test_recommend_for_time_is_notebook_04s_calls_and_its_json_is_theirs",
    ),
}

_TESTS = Path(__file__).parent


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Under ``-m unit`` the folders outside the core are not even collected: importing their
    modules (torch, transformers, lhotse...) would cost each process more than the core's tests."""
    if config.getoption("markexpr") != "unit" or not collection_path.is_relative_to(_TESTS):
        return None
    parts = collection_path.relative_to(_TESTS).parts
    if parts and collection_path.is_dir() and len(parts) == 1 and parts[0] not in UNIT_FOLDERS:
        return True
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``unit`` every test collected under one of ``UNIT_FOLDERS`` (by directory, so a new
    test file joins the core by where it lies) but those ``SLOW_UNIT_TESTS`` names."""
    for item in items:
        if not item.path.is_relative_to(_TESTS):
            continue
        rel = item.path.relative_to(_TESTS)
        slow = SLOW_UNIT_TESTS.get(rel.as_posix(), ())
        if rel.parts[0] in UNIT_FOLDERS and getattr(item, "originalname", item.name) not in slow:
            item.add_marker(pytest.mark.unit)


def _is_xdist_worker() -> bool:
    return "PYTEST_XDIST_WORKER" in os.environ


#: What compiles beside the optimiser, in a process of its own (:func:`pytest_sessionstart`):
#: first the DP under the two rules whose backward passes batch size 2 does not compile (each
#: rule compiles its own; the optimiser's thread reaches them last, from this cache), then the
#: three packers and the floors' label search on a small matrix, nothing the optimiser calls.
_COMPILE_BESIDE = """
import numpy as np
from analysis import BatchRule, LengthHistogram, optimize_edges, simulate
from analysis.optimize._labels import bounds, label_search, polish
hist = LengthHistogram.from_lengths(np.arange(1, 40))
optimize_edges(hist, 2, batch_size=100)
optimize_edges(hist, 2, max_tokens=80)
for packer in ("packing_bfd", "packing_first_fit", "packing_next_fit"):
    simulate(hist, packer, BatchRule(max_tokens=80), rng=np.random.default_rng(0))
c, a = np.indices((6, 6))
xm = np.where(a < c, (c - a) ** 2.0, np.inf)
ym = np.where(a < c, c + a + 0.0, np.inf)
label_search(bounds(xm, ym, 3, 1.0), 1e9, 1e9, max_labels=1_000, max_work=100_000)
polish(xm, ym, [0, 2, 4, 5], 1e9)
"""


def _compile_the_optimiser(beside: bool = False) -> None:
    """Compile (or load from numba's cache) the compiled functions most tests reach: the exact
    DP under a batch size (with and without the product formula: each rule compiles its own
    backward pass) and a token budget, the cost matrix of the greedy rule, a frontier
    under both rules, the floors' label search (a floor on mixing under both rules: the
    frontier above never needs it) and the three compiled packers (on a fresh clone both
    workers, the shared report's two runs and the notebooks' kernels would otherwise each
    compile these at once, seconds of CPU each: 4.5 s the label search, 3.3 s the packers).
    ``beside``: the process beside compiles the other rules' passes and the packers
    (``_COMPILE_BESIDE``), so the token budget's frontier comes last here and the packers are
    left to it (compiled here too, at once, they cost 7 s of CPU twice)."""
    hist = LengthHistogram.from_lengths(np.arange(1, 40))
    optimize_edges(hist, 2, batch_size=2)
    for rule in (BatchRule(batch_size=2), BatchRule(batch_size=100)):  # the tests' dense DP
        prob = build_problem(hist, rule, 1)
        solve_kernel(prob, 2, prob.ends, dense=True)
    if not beside:
        optimize_edges(hist, 2, batch_size=100)  # (C(x, B) without the product formula: its own pass)
        optimize_edges(hist, 2, max_tokens=80)
    optimize_edges(hist, 2, batch_size=2, method="greedy")
    for rule in (BatchRule(batch_size=2), BatchRule(max_tokens=80)):
        frontier(hist, rule, rng=np.random.default_rng(0), max_buckets=3, epochs=1)
        optimize_edges(hist, 3, rule, min_mixing=0.5)
    for packer in () if beside else ("packing_bfd", "packing_first_fit", "packing_next_fit"):
        simulate(hist, packer, BatchRule(max_tokens=80), rng=np.random.default_rng(0))


#: The compilation the process that starts xdist's workers runs beside them (at most one),
#: and the process compiling the rest beside it.
_COMPILING: list[Future[None]] = []
_BESIDE: list[subprocess.Popen[bytes]] = []


def pytest_sessionstart(session: pytest.Session) -> None:
    """The process that starts xdist's workers compiles the optimiser (once), on a thread of
    its own while the workers start and collect (seconds of imports each), and the packers
    and the label search in a process beside it (``_COMPILE_BESIDE``), so that no core waits
    for the compilation alone."""
    if not _is_xdist_worker() and session.config.getoption("numprocesses", None):
        command = [sys.executable, "-c", _COMPILE_BESIDE]
        _BESIDE.append(subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="compile")
        _COMPILING.append(pool.submit(_compile_the_optimiser, True))
        pool.shutdown(wait=False)  # the thread runs on; the hook below waits for it


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: object, ids: list[str]) -> None:
    """No test goes to a worker before the compilation beside them has ended (its error, if
    any, raised here)."""
    while _COMPILING:
        _COMPILING.pop().result()
    while _BESIDE:
        process = _BESIDE.pop()
        _, err = process.communicate()
        assert process.returncode == 0, f"compiling the packers and the label search failed:\n{err.decode()}"


def _exit_code_path(out: Path) -> Path:
    """Where a shared run's exit code is written when it ends (absent while it runs)."""
    return out.with_suffix(".exit")


def _record_exit_code(process: subprocess.Popen[bytes], out: Path) -> None:
    """Wait for ``process`` and write its exit code beside ``out`` (whole, by a rename)."""
    code = process.wait()
    partial = out.with_suffix(".exit-partial")
    partial.write_text(str(code))
    partial.replace(_exit_code_path(out))


@pytest.fixture(scope="session", autouse=True)
def _shared_report_started(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SharedReport | None]:
    """Start the shared report's two runs, each in its own process, when the session's first
    test under ``tests/`` starts (and only when a collected test uses ``shared_report``): they
    run on the cores pytest leaves idle while the other tests run.  Under xdist only the first
    worker starts them (the folder's creation decides); that worker waits for them at its
    session's end, since another worker may still need them, unless the session is stopping
    early (``-x``, ``--maxfail``): then they are killed."""
    if not any("shared_report" in getattr(item, "fixturenames", ()) for item in request.session.items):
        yield None
        return
    root = tmp_path_factory.getbasetemp()
    base = (root.parent if _is_xdist_worker() else root) / "shared_report"
    report = SharedReport(lengths=REPORT_LENGTHS, out=base / "report", repeat=base / "repeat")
    try:
        base.mkdir()
    except FileExistsError:  # another worker started them
        yield report
        return
    _compile_the_optimiser()  # once here, not in each run (a no-op load when already cached)
    src = save_histogram(LengthHistogram.from_lengths(report.lengths), base / "lengths.csv")
    runs = []
    for out in (report.out, report.repeat):
        with out.with_suffix(".log").open("wb") as sink:
            command = [sys.executable, "-c", _CLI_MAIN, *report.argv(src, out)]
            process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)
        waiter = threading.Thread(target=_record_exit_code, args=(process, out), daemon=True)
        waiter.start()
        runs.append((process, waiter))
    yield report
    session = request.session
    for process, waiter in runs:
        if session.shouldfail or session.shouldstop:
            process.kill()
        waiter.join(timeout=_REPORT_TIMEOUT_S)
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.fixture(scope="session")
def shared_report(_shared_report_started: SharedReport) -> SharedReport:
    """The report (``out``) and its repeat, once both runs have finished (started by this
    process or by another xdist worker)."""
    report = _shared_report_started
    deadline = time.monotonic() + _REPORT_TIMEOUT_S
    for out in (report.out, report.repeat):
        log, done = out.with_suffix(".log"), _exit_code_path(out)
        while not done.exists():
            assert time.monotonic() < deadline, f"the shared report did not finish ({log})"
            time.sleep(0.1)
        code = int(done.read_text())
        assert code == 0, f"the shared report failed ({log}):\n{log.read_text()}"
    return report
