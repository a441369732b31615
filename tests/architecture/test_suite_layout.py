"""The tests mirror the package: every test file lies in a folder of tests/, each folder of the
fast unit core is a folder of the engine (or its ground floor), and every test the core leaves
out by name exists (a renamed test would otherwise rejoin the core unnoticed)."""

from __future__ import annotations

import ast
from pathlib import Path

import analysis
from tests.conftest import SLOW_UNIT_TESTS, UNIT_FOLDERS

TESTS = Path(__file__).parents[1]
PACKAGE = Path(analysis.__file__).parent
#: The folders of tests/ outside the unit core: the faces, the end-to-end runs, the project's
#: shape, the pages in Chromium, and the data files the tests read.
OTHER_FOLDERS = {"faces", "integration", "architecture", "browser", "data"}


def test_every_test_file_lies_in_a_folder():
    assert sorted(p.name for p in TESTS.glob("test_*.py")) == []


def test_the_folders_are_the_unit_core_and_the_others():
    folders = {p.name for p in TESTS.iterdir() if p.is_dir() and not p.name.startswith((".", "__"))}
    assert folders == UNIT_FOLDERS | OTHER_FOLDERS
    assert not UNIT_FOLDERS & OTHER_FOLDERS


def test_each_unit_folder_tests_a_folder_of_the_engine():
    """``tests/ground`` tests the ground floor (the modules at the package's top); every other
    unit folder has the name of an engine subpackage."""
    assert {f for f in UNIT_FOLDERS if f != "ground"} <= {p.name for p in PACKAGE.iterdir() if p.is_dir()}


def test_every_slow_unit_test_named_exists():
    for rel, names in SLOW_UNIT_TESTS.items():
        path = TESTS / rel
        assert path.parts[len(TESTS.parts)] in UNIT_FOLDERS, rel
        defined = {
            node.name
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.FunctionDef)
        }
        assert set(names) <= defined, (rel, sorted(set(names) - defined))
