"""pyproject.toml (pip users) and environment.yml (conda users) must list the same packages."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9_.\-]+)\s*(.*?)\s*$")
_CONDA_NAMES = {"pytorch": "torch"}  # conda-forge name -> PyPI name


def _parse(requirement: str) -> tuple[str, str]:
    """``"numpy>=1.26"`` -> ``("numpy", ">=1.26")`` with a normalised name."""
    match = _REQUIREMENT.match(requirement)
    assert match, requirement
    name, spec = match.groups()
    return re.sub(r"[-_.]+", "-", name).lower(), spec.replace(" ", "")


def pyproject_requirements() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = project["dependencies"] + project["optional-dependencies"]["dev"]
    return dict(_parse(r) for r in reqs)


def conda_requirements() -> tuple[dict[str, str], list[str]]:
    """Conda packages (without python and pip) and the pip section's lines.

    A minimal reader for this file's shape (``- name spec`` items, one nested ``- pip:``
    list), so the test needs no YAML library.
    """
    conda: dict[str, str] = {}
    pip: list[str] = []
    section = None
    in_pip = False
    for raw in (ROOT / "environment.yml").read_text().splitlines():
        line = raw.split("#", 1)[0].rstrip()
        if not line.strip():
            continue
        if not raw.startswith(" "):
            section = line.split(":", 1)[0]
            in_pip = False
            continue
        item = line.strip()
        if section != "dependencies" or not item.startswith("- "):
            continue
        item = item[2:].strip()
        if item == "pip:":
            in_pip = True
            continue
        indent = len(raw) - len(raw.lstrip())
        if in_pip and indent > 2:
            pip.append(item)
            continue
        in_pip = False
        name, spec = _parse(item.replace("=", "==", 1) if re.match(r"^[\w.-]+=[^=]", item) else item)
        if name not in {"python", "pip"}:
            conda[_CONDA_NAMES.get(name, name)] = spec
    return conda, pip


def test_environment_yml_lists_the_same_packages_as_pyproject() -> None:
    conda, _ = conda_requirements()
    assert conda == pyproject_requirements()


def test_environment_yml_installs_the_project_with_dev_extra() -> None:
    _, pip = conda_requirements()
    assert pip == ["-e .[dev]"]


def test_environment_yml_pins_python_311() -> None:
    text = (ROOT / "environment.yml").read_text()
    assert re.search(r"^\s*- python=3\.11\s*$", text, re.M)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["requires-python"] == ">=3.11"


def test_the_dev_extra_holds_every_other_extra() -> None:
    """``make test`` installs ``dev``: it holds what ``make report`` installs (``report``),
    what measure_lengths imports (``measure``) and the benchmark's torch (``bench``)."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    dev = dict(_parse(r) for r in extras["dev"])
    for extra, requirements in extras.items():
        missing = [name for name, _ in map(_parse, requirements) if name not in dev]
        assert not missing, (extra, missing)
    assert dev["torch"] == dict(map(_parse, extras["bench"]))["torch"] == "==2.13.0"
