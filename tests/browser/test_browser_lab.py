"""The edges explorer live in JupyterLab, driven by a real browser.

The test starts ``jupyter lab`` (this venv's) on loopback with a token, in a temporary root
holding copies of ``notebooks/`` and ``data/`` (the notebooks read ``../data/...``) and with
``PYTHONPATH`` set to this checkout, so the kernel imports the ``analysis`` under test.
Chromium opens notebook 03, runs every cell with JupyterLab's own "Run All Cells" command,
waits for the explorer panel, then moves its K slider (the keyboard, as a user does), edits
its edges box and changes its batch-rule box, and times each redraw: from the input event
(``keydown`` or ``change``, as the page sees it) to the figure's new PNG in the DOM.  The
server is shut down at the end, whatever happens.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import Select

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = "notebooks/03_bucket_count.ipynb"

#: The goal for a K or edge move on the bundled data (ms, from input to new figure): printed
#: beside the measured medians, not asserted (a timing on a shared machine is a measurement).
REDRAW_GOAL_MS = 150.0
#: What the test does assert: a redraw this slow is broken, not slow (four times the goal).
REDRAW_BROKEN_MS = 4 * REDRAW_GOAL_MS
#: How long the whole notebook may take to run in the browser (s).
RUN_ALL_TIMEOUT_S = 300
#: How long one redraw may take before the test stops waiting (s).
REDRAW_TIMEOUT_S = 30


@dataclass(frozen=True)
class Lab:
    """A running JupyterLab server."""

    url: str
    token: str
    root: Path
    log: Path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _get(url: str) -> int:
    with urllib.request.urlopen(url, timeout=5) as response:  # loopback only
        status: int = response.status
        return status


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """``jupyter lab`` on 127.0.0.1 (a free port, a token, no browser), stopped at the end."""
    base = tmp_path_factory.mktemp("lab")
    root = base / "root"
    shutil.copytree(ROOT / "notebooks", root / "notebooks")
    shutil.copytree(ROOT / "data", root / "data")
    home = base / "home"  # every Jupyter and IPython folder the server or kernel writes to
    settings = home / "lab-settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    # no "get notified of Jupyter news?" toast over the notebook (and no fetch of the news)
    (settings / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false"}))
    (home / "config").mkdir()
    (home / "config" / "jupyter_server_config.json").write_text(json.dumps({"LabApp": {"news_url": None}}))
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "JUPYTER_PLATFORM_DIRS": "1",
        "MPLBACKEND": "Agg",
        "JUPYTER_CONFIG_DIR": str(home / "config"),
        "JUPYTER_DATA_DIR": str(home / "data"),
        "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
        "JUPYTERLAB_SETTINGS_DIR": str(home / "lab-settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(home / "lab-workspaces"),
        "IPYTHONDIR": str(home / "ipython"),
    }
    port, token = _free_port(), secrets.token_hex(16)
    command = [
        sys.executable,
        "-m",
        "jupyter",
        "lab",
        "--no-browser",
        "--ip=127.0.0.1",
        f"--port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
        "--LabApp.expose_app_in_browser=True",  # window.jupyterapp: its commands and shell
        # nothing beyond loopback: no update check, no news, no extension index
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--LabApp.extension_manager=readonly",
        *(["--allow-root"] if os.geteuid() == 0 else []),  # CI runs as root
    ]
    log = base / "lab.log"
    with log.open("wb") as sink:
        # its own process group: the kernels it starts are stopped with it
        server = subprocess.Popen(
            command, cwd=root, env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert server.poll() is None, f"jupyter lab exited:\n{log.read_text()}"
            assert time.monotonic() < deadline, f"jupyter lab did not start:\n{log.read_text()}"
            try:
                if _get(f"{url}/api/status?token={token}") == 200:
                    break
            except OSError:
                time.sleep(0.5)
        yield Lab(url, token, root, log)
    finally:
        try:
            request = urllib.request.Request(f"{url}/api/shutdown?token={token}", method="POST")
            urllib.request.urlopen(request, timeout=10).close()
            server.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            pass
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait()
        try:  # a kernel left behind in the server's group
            os.killpg(server.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _wait(what: str, check: Callable[[], Any], timeout: float, every: float = 0.05) -> Any:
    """Poll ``check`` until it returns something truthy; fail with ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {timeout:.0f} s waiting for {what}"
        time.sleep(every)


# The notebook panel JupyterLab shows, seen from the page (window.jupyterapp).
_NOTEBOOK_STATE = """
const panel = window.jupyterapp && window.jupyterapp.shell.currentWidget;
if (!panel || !panel.content || !panel.sessionContext || !panel.context) return null;
const cells = panel.content.widgets.map(c => c.model.toJSON());
const code = cells.filter(c => c.cell_type === "code");
return {
  path: panel.context.path,
  kernel: panel.sessionContext.kernelDisplayStatus,
  ready: panel.context.isReady && !!panel.sessionContext.session,
  executed: code.filter(c => c.execution_count !== null).length,
  code: code.length,
  errors: code.flatMap(c => (c.outputs || []).filter(o => o.output_type === "error")
                                             .map(o => o.ename + ": " + o.evalue)),
};
"""

# Arm the timer for one change: t0 at the first keydown/change/input event the page sees (in
# the capture phase, before any widget handles it), t1 when the panel's image next gets a new
# src (a src that arrives before the event belongs to an earlier change and is not counted).
_ARM = """
const panel = arguments[0];
const img = panel.querySelector("img.widget-image");
const probe = {t0: null, t1: null, src: img.getAttribute("src")};
window.__redraw = probe;
const start = () => { if (probe.t0 === null) probe.t0 = performance.now(); };
for (const type of ["keydown", "change", "input"]) {
  document.addEventListener(type, start, {capture: true, once: true});
}
const seen = new MutationObserver(() => {
  const src = img.getAttribute("src");
  if (src === probe.src) return;
  if (probe.t0 === null) { probe.src = src; return; }  // a late redraw of an earlier change
  if (probe.t1 === null) { probe.t1 = performance.now(); seen.disconnect(); }
});
seen.observe(img, {attributes: true, attributeFilter: ["src"]});
"""
_PROBE = "return window.__redraw && window.__redraw.t1 !== null ? window.__redraw : null;"


def _control(panel: WebElement, kind: str, label: str) -> WebElement:
    """The panel's ``kind`` widget (``widget-slider``, ``widget-dropdown``, ``widget-text``)
    whose label reads ``label``."""
    for widget in panel.find_elements(By.CSS_SELECTOR, f".{kind}"):
        if widget.find_element(By.CSS_SELECTOR, "label").text.strip() == label:
            return widget
    raise AssertionError(f"no {kind} labelled {label!r} in the explorer panel")


def _status(panel: WebElement) -> str:
    return str(panel.find_elements(By.CSS_SELECTOR, ".widget-html")[0].text)


def _image_src(panel: WebElement) -> str:
    return str(panel.find_element(By.CSS_SELECTOR, "img.widget-image").get_attribute("src"))


def _settled(panel: WebElement, quiet_s: float = 0.5) -> str:
    """The status line once no optimiser pass is pending (the panel says when one is) and the
    figure has not changed for ``quiet_s`` seconds (its PNG arrives after the status)."""

    def quiet() -> str | None:
        status, src = _status(panel), _image_src(panel)
        if not status or "computing" in status:
            return None
        time.sleep(quiet_s)
        return status if (_status(panel), _image_src(panel)) == (status, src) else None

    return str(_wait("the explorer to settle", quiet, 120))


def _timed(driver: webdriver.Chrome, panel: WebElement, what: str, act: Callable[[], None]) -> float:
    """Milliseconds from the input event ``act`` causes to the figure's new PNG in the DOM."""
    driver.execute_script(_ARM, panel)
    act()
    probe = _wait(
        f"the explorer's figure to redraw after {what} (status: {_status(panel)!r})",
        lambda: driver.execute_script(_PROBE),
        REDRAW_TIMEOUT_S,
    )
    assert probe["t0"] is not None, "the change reached the page as no keydown/change/input event"
    assert probe["t1"] >= probe["t0"], probe
    return float(probe["t1"] - probe["t0"])


def test_the_explorer_redraws_in_jupyterlab(chrome: webdriver.Chrome, lab: Lab) -> None:
    driver = chrome
    driver.set_window_size(1400, 1400)
    driver.get(f"{lab.url}/lab/tree/{NOTEBOOK}?token={lab.token}")
    state = _wait(
        "the notebook and its kernel",
        lambda: (
            (s := driver.execute_script(_NOTEBOOK_STATE))
            and s["path"] == NOTEBOOK
            and s["ready"]
            and s["kernel"] == "idle"
            and s
        ),
        120,
        every=0.25,
    )
    # the stored outputs carry execution counts: clear them, so that a count means this run
    driver.execute_script("return window.jupyterapp.commands.execute('notebook:clear-all-cell-outputs');")
    _wait("the stored outputs to clear", lambda: driver.execute_script(_NOTEBOOK_STATE)["executed"] == 0, 10)
    started = time.monotonic()
    # chromedriver awaits the promise the command returns: every cell has run (or failed)
    driver.execute_script("return window.jupyterapp.commands.execute('notebook:run-all-cells');")
    state = _wait(
        "every cell to run",
        lambda: (
            (s := driver.execute_script(_NOTEBOOK_STATE))
            and (s["errors"] or (s["executed"] == s["code"] and s["kernel"] == "idle"))
            and s
        ),
        RUN_ALL_TIMEOUT_S,
        every=0.25,
    )
    assert not state["errors"], f"the notebook raised: {state['errors']}"
    print(f"\nnotebook 03 ran in JupyterLab in {time.monotonic() - started:.1f} s")

    # the explorer panel: the output box that holds the slider and the figure
    def find_panel() -> WebElement | None:
        for box in driver.find_elements(By.CSS_SELECTOR, ".jp-OutputArea-output .widget-vbox"):
            if box.find_elements(By.CSS_SELECTOR, ".widget-slider") and box.find_elements(
                By.CSS_SELECTOR, "img.widget-image[src]"
            ):
                return box
        return None

    panel: WebElement = _wait("the explorer panel to render", find_panel, 60, every=0.25)
    driver.execute_script("arguments[0].scrollIntoView({block: 'start'});", panel)
    first = _settled(panel)
    assert "efficiency" in first, first

    slider = _control(panel, "widget-slider", "buckets K")
    handle = slider.find_element(By.CSS_SELECTOR, ".noUi-handle")
    readout = slider.find_element(By.CSS_SELECTOR, ".widget-readout")
    edges_box = _control(panel, "widget-text", "edges").find_element(By.CSS_SELECTOR, "input")
    rule_select = _control(panel, "widget-dropdown", "batch rule").find_element(By.CSS_SELECTOR, "select")
    rule_box = Select(rule_select)

    k_ms = []
    for key in [Keys.ARROW_RIGHT] * 4 + [Keys.ARROW_LEFT] * 4:
        before = int(readout.text)
        k_ms.append(
            _timed(
                driver,
                panel,
                f"K {before} {'+1' if key == Keys.ARROW_RIGHT else '-1'}",
                lambda key=key: handle.send_keys(key),
            )
        )
        after = int(_wait("the K readout to move", lambda b=before: (v := int(readout.text)) != b and v, 5))
        assert abs(after - before) == 1
        status = _settled(panel)
        assert f"{after} buckets" in status, status

    edge_ms = []
    for step in (1, 2, 3, 4, 5, 6):
        edges = [int(e) for e in edges_box.get_attribute("value").replace(" ", "").split(",")]
        edges[1] += step * 7  # move the first inner edge: evaluated exactly, no optimiser run
        text = ", ".join(str(e) for e in edges)
        edges_box.clear()
        edges_box.send_keys(text)  # typed before the timer is armed; Enter is the change
        edge_ms.append(_timed(driver, panel, f"edges {text}", lambda: edges_box.send_keys(Keys.ENTER)))
        status = _settled(panel)
        assert edges_box.get_attribute("value") == text, status

    rule_ms = []
    for rule in ("max_tokens", "batch_size", "max_tokens", "batch_size"):
        rule_ms.append(
            _timed(driver, panel, f"rule {rule}", lambda rule=rule: rule_box.select_by_value(rule))
        )
        status = _settled(panel)
        assert rule_box.first_selected_option.get_attribute("value") == rule
        assert "efficiency" in status, status

    # a floor (issue 34: the explorer with a floor set, and under a token budget): the box
    # under the rule, read on Enter; each K it has not placed runs one floor search
    floor_box = _control(panel, "widget-text", ">=").find_element(By.CSS_SELECTOR, "input")
    floor_box.send_keys("30%")
    floor_ms = [_timed(driver, panel, "floor 30%", lambda: floor_box.send_keys(Keys.ENTER))]
    status = _settled(panel)
    assert "--min-mixing 30%" in status and "frontier," in status, status
    for rule in ("batch_size", "max_tokens"):
        if rule_box.first_selected_option.get_attribute("value") != rule:
            floor_ms.append(
                _timed(
                    driver, panel, f"rule {rule}, floor set", lambda rule=rule: rule_box.select_by_value(rule)
                )
            )
            status = _settled(panel)
        for key in (Keys.ARROW_RIGHT, Keys.ARROW_LEFT):  # a new K, then one placed
            floor_ms.append(
                _timed(driver, panel, f"K with a floor, {rule}", lambda key=key: handle.send_keys(key))
            )
            status = _settled(panel)
            assert "--min-mixing 30%" in status, status
    assert "budget fill" in status, status  # the last K under the token budget

    shot = lab.root.parent / "explorer.png"
    driver.save_screenshot(str(shot))
    print(f"screenshot: {shot}")

    def line(name: str, ms: list[float]) -> str:
        median = statistics.median(ms)
        verdict = "within" if median <= REDRAW_GOAL_MS else "OVER"
        each = ", ".join(f"{m:.0f}" for m in ms)
        return f"{name}: median {median:.0f} ms, {verdict} the {REDRAW_GOAL_MS:.0f} ms goal (each: {each})"

    print(line("K slider redraw", k_ms))
    print(line("edge edit redraw", edge_ms))
    print(line("batch-rule redraw (first view)", rule_ms))
    print(line("floor, K and rule redraws with a floor set", floor_ms))
    assert statistics.median(k_ms) <= REDRAW_BROKEN_MS, line("K slider redraw", k_ms)
    assert statistics.median(edge_ms) <= REDRAW_BROKEN_MS, line("edge edit redraw", edge_ms)
    assert statistics.median(floor_ms) <= REDRAW_BROKEN_MS, line("floor redraws", floor_ms)
