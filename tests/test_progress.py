"""The progress-bar rule: on for people, off for tests, notebooks run by tools, and --quiet."""

from __future__ import annotations

import io
import sys

import pytest

from analysis import progress as prog


@pytest.fixture()
def clean_env(monkeypatch):
    for name in ("PADDING_QUIET", "PADDING_PROGRESS", "PYTEST_CURRENT_TEST", "JPY_SESSION_NAME"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


class _TTY(io.StringIO):
    def isatty(self):
        return True


def test_quiet_wins_over_everything(clean_env):
    clean_env.setenv("PADDING_PROGRESS", "1")
    clean_env.setenv("PADDING_QUIET", "1")
    items = [1, 2]
    assert not prog.progress_enabled() and prog.progress(items, "x") is items


def test_opt_in_draws_a_bar(clean_env):
    clean_env.setenv("PADDING_PROGRESS", "yes")
    bar = prog.progress([1, 2, 3], "x")
    assert bar is not None and list(bar) == [1, 2, 3] and hasattr(bar, "update")


def test_pytest_and_pipes_are_silent_terminals_are_not(clean_env):
    clean_env.delenv("PYTEST_CURRENT_TEST", raising=False)  # pytest sets it again for the call
    clean_env.setattr(sys, "stderr", _TTY())
    assert prog.progress_enabled()
    clean_env.setenv("PYTEST_CURRENT_TEST", "t.py::test (call)")
    assert not prog.progress_enabled()
    clean_env.delenv("PYTEST_CURRENT_TEST")
    clean_env.setattr(sys, "stderr", io.StringIO())
    assert not prog.progress_enabled()


def test_a_jupyter_server_session_gets_the_notebook_bar(clean_env):
    clean_env.delenv("PYTEST_CURRENT_TEST", raising=False)
    clean_env.setattr(sys, "stderr", io.StringIO())
    clean_env.setenv("JPY_SESSION_NAME", "/home/me/03_bucket_count.ipynb")
    clean_env.setitem(sys.modules, "ipykernel", sys.modules.get("ipykernel") or object())
    assert prog.progress_enabled()
    from tqdm.auto import tqdm as auto_tqdm
    assert prog._tqdm_class() is auto_tqdm


def test_null_bar_accepts_updates(clean_env):
    with prog.progress_bar(5, "epochs", enabled=False) as bar:
        bar.update(2)
        bar.set_postfix_str("x")
    clean_env.setenv("PADDING_PROGRESS", "1")
    clean_env.setattr(sys, "stderr", io.StringIO())
    with prog.progress_bar(2, "epochs") as bar:
        bar.update(2)
    assert bar.n == 2
