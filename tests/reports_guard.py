"""A pytest plugin (``-p tests.reports_guard`` in pyproject's addopts): the whole session,
nbval's notebook runs included, must leave a user's ``reports/`` byte for byte as it was.

Tests write only to temporary folders; the notebooks save figures only when a report gives
them a ``figures_dir``.  This checks it on every ``make test``: the session fails when any
file under ``reports/`` was added, removed or changed.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

REPORTS = Path(__file__).parents[1] / "reports"
_BEFORE = pytest.StashKey[dict[str, str]]()


def snapshot(folder: Path) -> dict[str, str]:
    """SHA-256 of every file under ``folder`` (empty when it does not exist)."""
    if not folder.is_dir():
        return {}
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def pytest_sessionstart(session: pytest.Session) -> None:
    session.stash[_BEFORE] = snapshot(REPORTS)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    before = session.stash.get(_BEFORE, {})
    after = snapshot(REPORTS)
    if after != before:
        changed = sorted(set(before) ^ set(after) | {k for k in before if after.get(k) != before[k]})
        session.config.get_terminal_writer().line(
            f"reports_guard: the tests changed reports/ ({', '.join(changed[:5])}...)", red=True
        )
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
