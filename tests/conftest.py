"""Test-wide settings and the one shared report.

Hypothesis: no per-example deadline and no "too slow" health check (CI shares 2 cores with
other work, so wall time says nothing about correctness).  Under CI (``CI=true``) examples
are derandomized, so a CI run is reproducible; locally they stay random and keep exploring.

``shared_report``: the report's end-to-end tests (``test_report.py``,
``test_report_step_times.py``) read one report on the real notebooks, run once per session
(a papermill run of every notebook costs tens of seconds), plus the same command run again
into a second folder for the reproducibility test; both start in the background with the
session's first test.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

from analysis import LengthHistogram, save_histogram

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


@pytest.fixture(scope="session", autouse=True)
def _shared_report_started(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[SharedReport, list[tuple[subprocess.Popen[bytes], Path]]] | None]:
    """Start the shared report's two runs, each in its own process, when the session's first
    test under ``tests/`` starts (and only when a collected test uses ``shared_report``): they
    run on the core pytest leaves idle while the other tests run.  Killed at the session's end
    if still running (a session stopped early)."""
    if not any("shared_report" in getattr(item, "fixturenames", ()) for item in request.session.items):
        yield None
        return
    base = tmp_path_factory.mktemp("shared_report")
    report = SharedReport(lengths=REPORT_LENGTHS, out=base / "report", repeat=base / "repeat")
    src = save_histogram(LengthHistogram.from_lengths(report.lengths), base / "lengths.csv")
    runs = []
    for out in (report.out, report.repeat):
        log = out.with_suffix(".log")
        with log.open("wb") as sink:
            command = [sys.executable, "-c", _CLI_MAIN, *report.argv(src, out)]
            runs.append((subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT), log))
    yield report, runs
    for process, _ in runs:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.fixture(scope="session")
def shared_report(
    _shared_report_started: tuple[SharedReport, list[tuple[subprocess.Popen[bytes], Path]]],
) -> SharedReport:
    """The report (``out``) and its repeat, once both runs have finished."""
    report, runs = _shared_report_started
    for process, log in runs:
        code = process.wait(timeout=600)
        assert code == 0, f"the shared report failed ({log}):\n{log.read_text()}"
    return report
