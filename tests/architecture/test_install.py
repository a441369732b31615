"""The installs' script (``.ci/install``) hands uv the configuration pip has: its indexes,
find-links and constraints as uv's options, its certificate and timeout by environment, a later
section over an earlier one (pure functions; the installs themselves run in ``make``)."""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / ".ci" / "install"

#: ``pip config list`` on these machines (a file's settings, then the variables').
PIP_CONFIG = """\
global.cert='/etc/ssl/certs/ca-certificates.crt'
global.constraint='/etc/xdg/pip/constraints.txt'
global.extra-index-url='file:///opt/pypi/simple file:///opt/pypi-more/simple'
global.find-links='/opt/wheels'
:env:.cert='/etc/ssl/certs/ca-certificates.crt'
:env:.default-timeout='180'
:env:.disable-pip-version-check='1'
:env:.find-links='/opt/wheels'
"""


@pytest.fixture(scope="module")
def install() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("ci_install", str(SCRIPT))
    spec = importlib.util.spec_from_loader("ci_install", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_pips_configuration_becomes_uvs_options(install: ModuleType) -> None:
    options, env = install.uv_options(install.parse_pip_config(PIP_CONFIG))
    pairs = list(zip(options[::2], options[1::2], strict=True))
    assert pairs == [
        ("--index-strategy", "unsafe-best-match"),
        ("--constraint", str(SCRIPT.parent / "constraints.txt")),
        ("--excludes", str(SCRIPT.parent / "excludes.txt")),
        ("--constraint", "/etc/xdg/pip/constraints.txt"),
        ("--extra-index-url", "file:///opt/pypi/simple"),
        ("--extra-index-url", "file:///opt/pypi-more/simple"),
        ("--find-links", "/opt/wheels"),
    ]
    assert env == {"SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt", "UV_HTTP_TIMEOUT": "180"}


def test_a_later_section_wins_and_other_lines_are_left_out(install: ModuleType) -> None:
    text = (
        "global.index-url='https://a.example/simple'\n"
        "install.index-url='https://b.example/simple'\n"
        "download.index-url='https://c.example/simple'\n"  # another command's: not the install's
        "global.no-index='true'\n"
        "global.trusted-host='a.example b.example'\n"
        "a line pip never prints\n"
        "global.timeout=not a literal\n"
    )
    config = install.parse_pip_config(text)
    assert config == {
        "index-url": "https://b.example/simple",
        "no-index": "true",
        "trusted-host": "a.example b.example",
    }
    options, env = install.uv_options(config)
    assert options[6:] == [
        "--index-url",
        "https://b.example/simple",
        "--no-index",
        "--allow-insecure-host",
        "a.example",
        "--allow-insecure-host",
        "b.example",
    ]
    assert env == {}
    assert install.parse_pip_config("") == {}


def test_a_failed_step_is_named_by_its_error_line(install: ModuleType) -> None:
    uv = "  × No solution found\nerror: Because only trl==1.13.0 is available ...\nhint: use another index\n"
    assert install._last(uv) == "error: Because only trl==1.13.0 is available ..."
    assert install._last("first\nsecond\n") == "second"
    assert install._last("") == "no message"


def test_the_installed_soundfile_loads_its_library() -> None:
    """lhotse imports soundfile, and so do transformers' audio utilities, which trl and the
    Trainer import: a soundfile wheel without libsndfile (uv's pick from this machine's local
    index, before ``.ci/constraints.txt``) fails all of them on a machine without the system's
    libsndfile."""
    soundfile = importlib.import_module("soundfile")  # (the dev extra's lhotse requires it)
    assert soundfile.__libsndfile_version__.count(".") >= 1
