"""Headless Chromium for the browser tests: Debian's ``chromium`` driven by its
``chromium-driver`` (never a build that selenium-manager would download), and the one page
check every report page must pass.

:func:`start_chrome` starts the browser with its console log (``goog:loggingPrefs``
``browser``) and DevTools' network events (``performance``) recorded, and with every host name
resolved to nothing but loopback (``--host-resolver-rules``): a page that reaches for a CDN
cannot get it, and the request is still recorded.  :func:`check_page` opens a page and returns
its JavaScript errors (console entries at level ``SEVERE``: uncaught exceptions,
``console.error``, failed loads) and every request it made to a URL that is not the page's own
kind (``file:``, ``data:``, ``blob:``, ``about:``), and saves a screenshot of the whole page.
"""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")

#: Schemes a page may load from without the network.
LOCAL_SCHEMES = ("file:", "data:", "blob:", "about:", "chrome:", "devtools:")

#: Every host name fails to resolve except loopback: nothing leaves the machine.
HOST_RULES = "MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1"

#: The tallest screenshot taken (px); longer pages are cut there.
MAX_SCREENSHOT_HEIGHT = 16_000


def start_chrome(width: int = 1400, height: int = 1000) -> webdriver.Chrome:
    """Headless Chromium with its console and network events logged.

    Raises (a failure, never a skip) when Debian's ``chromium`` or ``chromium-driver`` is
    missing: ``make browser-test`` installs them.
    """
    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        assert path.is_file(), f"{path} is missing: install Debian's {package} (make browser-test does)"
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        f"--window-size={width},{height}",
        f"--host-resolver-rules={HOST_RULES}",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-default-apps",
        "--disable-sync",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    # an explicit driver path: selenium never runs selenium-manager (no download)
    return webdriver.Chrome(options=options, service=Service(executable_path=str(CHROMEDRIVER)))


@dataclass(frozen=True)
class PageCheck:
    """What :func:`check_page` saw on one page."""

    url: str
    js_errors: tuple[str, ...]
    external_requests: tuple[str, ...]
    screenshot: Path

    @property
    def ok(self) -> bool:
        return not self.js_errors and not self.external_requests

    def problems(self) -> str:
        lines = [f"{self.url}:"]
        lines += [f"  JavaScript error: {e}" for e in self.js_errors]
        lines += [f"  external request: {u}" for u in self.external_requests]
        return "\n".join(lines)


def drain_logs(driver: webdriver.Chrome) -> None:
    """Forget what the console and network logs hold so far (reading a log empties it)."""
    driver.get_log("browser")
    driver.get_log("performance")


def requested_urls(driver: webdriver.Chrome) -> list[str]:
    """Every URL a page asked for since the logs were last read (``Network.requestWillBeSent``,
    sent before the request goes out: a blocked or failed one is listed too)."""
    urls = []
    for entry in driver.get_log("performance"):
        message: dict[str, Any] = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            urls.append(str(message["params"]["request"]["url"]))
    return urls


def js_errors(driver: webdriver.Chrome) -> list[str]:
    """Console entries at level ``SEVERE`` since the logs were last read."""
    return [str(e["message"]) for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def screenshot(driver: webdriver.Chrome, path: Path) -> Path:
    """Save the whole page (up to :data:`MAX_SCREENSHOT_HEIGHT` px) as a PNG at ``path``."""
    metrics = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})
    size = metrics["cssContentSize"]
    clip = {
        "x": 0,
        "y": 0,
        "width": size["width"],
        "height": min(size["height"], MAX_SCREENSHOT_HEIGHT),
        "scale": 1,
    }
    shot = driver.execute_cdp_cmd(
        "Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True, "clip": clip}
    )
    path.write_bytes(base64.b64decode(shot["data"]))
    return path


def check_page(driver: webdriver.Chrome, page: Path, shot: Path, settle_s: float = 1.5) -> PageCheck:
    """Open ``page`` (a local file), let its scripts run for ``settle_s`` seconds after the
    load event, and return its JavaScript errors and external requests, with a screenshot
    saved at ``shot``."""
    drain_logs(driver)
    url = page.resolve().as_uri()
    driver.get(url)  # returns after the load event
    time.sleep(settle_s)  # scripts that load more scripts (require.js, MathJax) do it after load
    errors = js_errors(driver)
    external = [u for u in requested_urls(driver) if not u.startswith(LOCAL_SCHEMES)]
    return PageCheck(url, tuple(errors), tuple(dict.fromkeys(external)), screenshot(driver, shot))
