"""The progress-bar rule: on for people (a terminal, a notebook open in Jupyter), off for pipes,
tests and notebooks run by tools, and off when asked; the engine only calls what it is given."""

from __future__ import annotations

import io
import sys

import numpy as np
import pytest

from analysis import progress as prog
from analysis import simulate


@pytest.fixture()
def clean_env(monkeypatch):
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    return monkeypatch


class _TTY(io.StringIO):
    def isatty(self):
        return True


def test_disabled_is_none_even_on_a_terminal(clean_env):
    clean_env.setattr(sys, "stderr", _TTY())
    assert prog.bar(enabled=False) is None
    assert prog.bar() is not None


def test_pipes_are_silent_terminals_are_not(clean_env):
    clean_env.setattr(sys, "stderr", io.StringIO())
    assert prog.bar() is None
    clean_env.setattr(sys, "stderr", None)
    assert prog.bar() is None
    clean_env.setattr(sys, "stderr", _TTY())
    assert prog.bar() is not None


def test_enabled_draws_a_bar_and_yields_every_item(clean_env):
    clean_env.setattr(sys, "stderr", io.StringIO())
    wrap = prog.bar(enabled=True)
    out = io.StringIO()
    assert list(wrap(range(3), "counting", file=out)) == [0, 1, 2]
    assert "counting" in out.getvalue()


def test_a_jupyter_server_session_gets_the_notebook_bar(clean_env):
    clean_env.setattr(sys, "stderr", io.StringIO())
    clean_env.setenv("JPY_SESSION_NAME", "/home/me/03_bucket_count.ipynb")
    clean_env.delitem(sys.modules, "ipykernel", raising=False)
    assert prog.bar() is None  # the variable alone (no kernel) is not a notebook
    clean_env.setitem(sys.modules, "ipykernel", sys.modules.get("ipykernel") or object())
    wrap = prog.bar()
    assert wrap is not None
    import tqdm.auto

    made = wrap([1, 2], "x", file=io.StringIO(), disable=True)
    assert isinstance(made, tqdm.auto.tqdm)
    assert list(made) == [1, 2]


def test_the_engine_calls_the_progress_it_is_given():
    calls = []

    def record(items, desc):
        calls.append(desc)
        return items

    res = simulate(
        [3, 1, 2, 8], "sorted", rng=np.random.default_rng(0), epochs=3, batch_size=2, progress=record
    )
    assert calls == ["simulating sorted"] and res.n_epochs == 3
