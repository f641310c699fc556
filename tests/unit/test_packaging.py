"""The plugin installs next to a user's own ExecuTorch: ranges in pyproject.toml, exact pins only in
constraints.txt (what make and CI install), and every pin inside its range."""
from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]


def _requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = project["dependencies"] + project["optional-dependencies"]["dev"]
    return [Requirement(d) for d in deps]


def _pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, version = line.split("==")
            pins[name.strip().lower().replace("_", "-")] = version.strip()
    return pins


def test_dependencies_are_ranges_not_pins() -> None:
    for req in _requirements():
        ops = {s.operator for s in req.specifier}
        assert "==" not in ops and "===" not in ops, f"{req}: pin it in constraints.txt instead"
        assert any(op in (">=", ">", "~=") for op in ops), f"{req}: give a lower bound"
        assert any(op in ("<", "<=", "~=") for op in ops), f"{req}: bound the next major/minor"


def test_every_dependency_is_pinned_within_its_range() -> None:
    pins = _pins()
    for req in _requirements():
        name = req.name.lower().replace("_", "-")
        assert name in pins, f"{req.name} has no pin in constraints.txt"
        assert req.specifier.contains(pins[name], prereleases=True), (
            f"constraints.txt pins {name}=={pins[name]}, outside {req.specifier}")
