"""The report's HTML in a real browser: every page works offline, with no JavaScript error.

The page check (:func:`tests.browser.chrome.check_page`) is shown to catch what it must first:
a page that loads a script from a CDN, and a page whose script throws.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from selenium import webdriver

from tests.browser.chrome import check_page

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data" / "case_lengths.csv"

_CDN_PAGE = """<!doctype html>
<html><head><title>a CDN script</title>
<script src="https://cdnjs.cloudflare.com/ajax/libs/require.js/2.1.10/require.min.js"></script>
</head><body><p>loads a remote script</p></body></html>
"""
_THROWING_PAGE = """<!doctype html>
<html><head><title>a throwing script</title><script>notDefinedAnywhere();</script></head>
<body><p>throws</p></body></html>
"""
_OFFLINE_PAGE = """<!doctype html>
<html><head><title>offline</title><style>p { color: #333; }</style>
<script>document.addEventListener("DOMContentLoaded", () => { document.title = "ran"; });</script>
</head><body><p>inline only</p>
<img alt="one pixel" src="data:image/png;base64,PIXEL"></body></html>
""".replace(
    "PIXEL",
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==",
)


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The report on the bundled data, as a user runs it (``python -m analysis report``)."""
    out = tmp_path_factory.mktemp("browser_report") / "report"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JUPYTER_PLATFORM_DIRS": "1", "MPLBACKEND": "Agg"}
    command = [sys.executable, "-m", "analysis", "report", str(DATA), "--out", str(out)]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"the report failed:\n{done.stdout}\n{done.stderr}"
    return out


def test_the_check_catches_a_cdn_script(chrome: webdriver.Chrome, tmp_path: Path) -> None:
    page = tmp_path / "cdn.html"
    page.write_text(_CDN_PAGE)
    seen = check_page(chrome, page, tmp_path / "cdn.png")
    assert seen.external_requests == (
        "https://cdnjs.cloudflare.com/ajax/libs/require.js/2.1.10/require.min.js",
    )
    assert not seen.ok


def test_the_check_catches_a_javascript_error(chrome: webdriver.Chrome, tmp_path: Path) -> None:
    page = tmp_path / "throws.html"
    page.write_text(_THROWING_PAGE)
    seen = check_page(chrome, page, tmp_path / "throws.png")
    assert seen.external_requests == ()
    assert len(seen.js_errors) == 1 and "notDefinedAnywhere is not defined" in seen.js_errors[0]


def test_the_check_passes_an_offline_page(chrome: webdriver.Chrome, tmp_path: Path) -> None:
    page = tmp_path / "offline.html"
    page.write_text(_OFFLINE_PAGE)
    seen = check_page(chrome, page, tmp_path / "offline.png")
    assert seen.ok, seen.problems()
    assert chrome.title == "ran"  # its inline script did run
    assert seen.screenshot.read_bytes().startswith(b"\x89PNG")


def test_every_report_page_works_offline(chrome: webdriver.Chrome, report_dir: Path) -> None:
    pages = sorted(report_dir.rglob("*.html"))
    assert pages, f"the report wrote no HTML into {report_dir}"
    shots = report_dir.parent / "screenshots"
    shots.mkdir()
    seen = [check_page(chrome, page, shots / f"{page.stem}.png") for page in pages]
    for check in seen:
        print(f"screenshot: {check.screenshot}  ({'ok' if check.ok else 'FAILS'}: {check.url})")
    failing = [check.problems() for check in seen if not check.ok]
    assert not failing, "pages that need the network or raise JavaScript errors:\n" + "\n".join(failing)
