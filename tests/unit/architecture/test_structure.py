"""The package's structure, held by tests: no import cycle (an import under ``TYPE_CHECKING`` or
inside a function counts: it is a dependency all the same), and nothing in the package names a
fixture of ``suites/`` (fixtures declare the products they get; the package reads the
declarations, never a list of the suites' fixture names). The layers themselves are the
import-linter contract in pyproject.toml (``make lint``)."""
from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = "pytest_qnn_genai"
# fixtures the suites override (the plugin's or another plugin's, by design): their names are
# the overridden fixture's
OVERRIDES = {"snapshot"}


def import_cycles(package: str) -> list[list[str]]:
    """Every set of the package's modules that import each other in a circle (Tarjan's strongly
    connected components of the import graph, with type-checking imports)."""
    graph = grimp.build_graph(package, exclude_type_checking_imports=False, cache_dir=None)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        for module in sorted(graph.modules):
            if module not in index:
                visit(module)
    finally:
        sys.setrecursionlimit(limit)
    return sorted(found)


def fixture_names(folder: Path) -> set[str]:
    """The names of the functions decorated ``@pytest.fixture`` in ``folder``'s modules."""
    names = set()
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and any(
                    "fixture" in ast.unparse(d) for d in node.decorator_list):
                names.add(node.name)
    return names


def named_in(folder: Path, names: set[str]) -> list[str]:
    """``file:line name`` for each string (docstrings too) in ``folder``'s modules that names
    one of ``names`` as a word."""
    if not names:
        return []
    word = re.compile(r"\b(" + "|".join(sorted(map(re.escape, names))) + r")\b")
    found = []
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                for match in word.finditer(node.value):
                    found.append(f"{path.relative_to(folder)}:{node.lineno} {match.group(1)}")
    return found


def test_the_package_has_no_import_cycle() -> None:
    assert import_cycles(PACKAGE) == []


def test_a_cycle_through_a_type_checking_import_is_found(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "circle"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("def f():\n    from circle import b\n")
    (package / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                  "    from circle import a\n")
    (package / "c.py").write_text("from circle import a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert import_cycles("circle") == [["circle.a", "circle.b"]]


def test_no_fixture_of_the_suites_is_named_in_the_package() -> None:
    suites = fixture_names(ROOT / "suites") - OVERRIDES
    assert {"heldout_fp32", "legacy_artifacts", "new_lookahead_cases"} <= suites  # it reads them
    assert named_in(ROOT / PACKAGE, suites) == []


def test_a_package_string_naming_a_suites_fixture_is_found(tmp_path: Path) -> None:
    (tmp_path / "suites").mkdir()
    (tmp_path / "suites" / "conftest.py").write_text(
        "import pytest\n\n@pytest.fixture(scope='session')\ndef heldout_fp32():\n    pass\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "plan.py").write_text('NEEDS = {"qnn_pte": 1,\n "heldout_fp32": 2}\n')
    names = fixture_names(tmp_path / "suites")
    assert names == {"heldout_fp32"}
    assert named_in(tmp_path / "pkg", names) == ["plan.py:2 heldout_fp32"]
