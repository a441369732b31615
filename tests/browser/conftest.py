"""The browser tests: every test in this folder is marked ``browser``.

pyproject's addopts deselect them (``-m "not browser"``), so ``make test`` never opens a
browser; ``make browser-test`` installs Debian's Chromium and runs them with ``-m browser``.
Nothing here skips: a missing browser or driver fails the test that needs it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver

from tests.browser.chrome import start_chrome

HERE = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="module")
def chrome() -> Iterator[webdriver.Chrome]:
    """Headless Chromium (:func:`tests.browser.chrome.start_chrome`), quit after the module."""
    driver = start_chrome()
    try:
        yield driver
    finally:
        driver.quit()
