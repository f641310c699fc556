"""The gates page's one table of every gate, held to the code: every test function of ``suites/``
has a row, every test a row names exists, and a row with no test that shows its gate failing says
why (``none: ...``) instead of leaving the cell empty.

The table is parsed from the page's source (``docs/pages/gates.md``) and the tests are read with
:mod:`ast`, never imported: a suite test added without a row, or a test renamed or deleted while a
row still names it, fails here instead of leaving the table to claim a check no test shows.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PAGE = ROOT / "docs" / "pages" / "gates.md"
HEADER = ("gate", "compares", "threshold", "source of the threshold", "shown failing by")
NODE = re.compile(r"`((?:tests|suites)/[\w./-]+\.py)::(\w+(?:::\w+)?)(?:\[[^\]`]*\])?`")
SUITE_TEST = re.compile(r"`(suites/[\w./-]+\.py)::(test_\w+)`")
INFO = "info"  # the threshold of a test that judges nothing: it needs no failing test
NONE = re.compile(r"^none\b[^:]*:\s*\S")  # "none: why", "none yet: why"


@dataclass(frozen=True)
class Row:
    cells: tuple[str, ...]

    @property
    def gate(self) -> str:
        return self.cells[0]

    @property
    def threshold(self) -> str:
        return self.cells[2]

    @property
    def failing(self) -> str:
        return self.cells[4]


def _cells(line: str) -> tuple[str, ...]:
    """A markdown table line's cells (``\\|`` is a pipe inside a cell)."""
    inner = line.strip().removeprefix("|").removesuffix("|")
    return tuple(c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", inner))


def table_rows(text: str) -> list[Row] | None:
    """The rows of the table whose header is :data:`HEADER`; None when the page has no such
    table."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines)
                  if line.startswith("|") and _cells(line) == HEADER), None)
    if start is None:
        return None
    rows = []
    for line in lines[start + 2:]:  # past the header and its |---| line
        if not line.startswith("|"):
            break
        rows.append(Row(_cells(line)))
    return rows


def _defined(path: Path) -> set[str]:
    """The test names a pytest node id can name in ``path``: module-level functions and
    ``Class::method``."""
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.ClassDef):
            names |= {f"{node.name}::{f.name}" for f in node.body
                      if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
    return names


def suite_tests(root: Path = ROOT) -> list[str]:
    """Every test function of ``suites/**/test_*.py`` as a node id (``suites/x.py::test_y``)."""
    found = []
    for path in sorted((root / "suites").rglob("test_*.py")):
        found += [f"{path.relative_to(root).as_posix()}::{name}"
                  for name in sorted(_defined(path)) if name.split("::")[-1].startswith("test_")]
    return found


def _missing(file: str, name: str, root: Path) -> str | None:
    """Why ``file::name`` names no test (None when it does)."""
    path = root / file
    if not path.is_file():
        return f"no file {file}"
    if name not in _defined(path):
        return f"{file} defines no {name}"
    return None


def gates_table_problems(text: str, root: Path = ROOT) -> list[str]:
    """What is wrong with ``text`` as the gates page's table of every gate (empty when nothing
    is): a suite test without a row, a row naming a test that does not exist, a row without a
    threshold, a row whose *shown failing by* names no test and does not say why."""
    rows = table_rows(text)
    if rows is None:
        return [f"no table with the header | {' | '.join(HEADER)} |"]
    problems = []
    covered = set()
    for n, row in enumerate(rows, 1):
        if len(row.cells) != len(HEADER):
            problems.append(f"row {n}: {len(row.cells)} cells, want {len(HEADER)}: {row.cells[0]}")
            continue
        where = f"row {n} ({row.gate})"
        for file, name in SUITE_TEST.findall(row.gate):
            covered.add(f"{file}::{name}")
            if (why := _missing(file, name, root)) is not None:
                problems.append(f"{where}: its gate {file}::{name} is no test: {why}")
        if not row.threshold:
            problems.append(f"{where}: no threshold")
        named = NODE.findall(row.failing)
        for file, name in named:
            if (why := _missing(file, name, root)) is not None:
                problems.append(f"{where}: shown failing by {file}::{name}, which is no test: "
                                f"{why}")
        if not named and row.threshold != INFO and not NONE.match(row.failing):
            problems.append(f"{where}: shown failing by nothing, and the cell does not say why "
                            f"(name the test, or write 'none: why')")
    problems += [f"no row for {test}" for test in suite_tests(root) if test not in covered]
    return problems


def gaps(text: str) -> list[str]:
    """The rows that say no test shows their gate failing (``none: ...``), as ``gate: cell``."""
    return [f"{row.gate}: {row.failing}" for row in table_rows(text) or []
            if len(row.cells) == len(HEADER) and NONE.match(row.failing)]


def test_every_gate_has_a_row_and_every_named_test_exists() -> None:
    text = PAGE.read_text()
    assert gates_table_problems(text) == []
    tests = suite_tests()  # the parse finds the suites' tests, a strict xfail's and a skip's too
    assert {"suites/perf/test_perf.py::test_relative_gate",
            "suites/parity/test_upstream_adjustments.py::test_without_compiler_injection",
            "suites/gate/test_runner_prompt.py::"
            "test_the_runners_own_prompt_path_reads_the_harness_ids"} <= set(tests)


def _row_of(text: str, gate: str) -> str:
    [line] = [line for line in text.splitlines() if line.startswith(f"| `{gate}` |")]
    return line


def test_each_fault_in_the_table_is_found() -> None:
    good = PAGE.read_text()
    degenerate = "suites/gate/test_gate.py::test_generation_is_not_degenerate"
    row = _row_of(good, degenerate)
    n = next(i for i, r in enumerate(table_rows(good) or [], 1) if r.gate == f"`{degenerate}`")

    # a suite test the table leaves out
    assert gates_table_problems(good.replace(row + "\n", "")) == [f"no row for {degenerate}"]

    # a row naming a failing test that does not exist, in a file that does and one that does not
    renamed = row.replace("::test_not_degenerate_and_pte_size`", "::test_not_degenerate_gone`")
    assert gates_table_problems(good.replace(row, renamed)) == [
        f"row {n} (`{degenerate}`): shown failing by tests/unit/checks/test_agreement.py::"
        "test_not_degenerate_gone, which is no test: tests/unit/checks/test_agreement.py "
        "defines no test_not_degenerate_gone"]
    moved = row.replace("tests/unit/checks/test_agreement.py", "tests/unit/checks/gone.py")
    assert gates_table_problems(good.replace(row, moved)) == [
        f"row {n} (`{degenerate}`): shown failing by tests/unit/checks/gone.py::"
        "test_not_degenerate_and_pte_size, which is no test: no file tests/unit/checks/gone.py"]

    # a row for a suite test that no longer exists (its row kept after a rename)
    stale = row.replace(degenerate, "suites/gate/test_gate.py::test_generation_is_gone")
    assert gates_table_problems(good.replace(row, stale)) == [
        f"row {n} (`suites/gate/test_gate.py::test_generation_is_gone`): its gate "
        "suites/gate/test_gate.py::test_generation_is_gone is no test: suites/gate/test_gate.py "
        "defines no test_generation_is_gone",
        f"no row for {degenerate}"]

    # an empty "shown failing by" cell is a gap the failure lists; "none: why" is a stated gap
    cells = _cells(row)
    empty = "| " + " | ".join([*cells[:4], ""]) + " |"
    assert gates_table_problems(good.replace(row, empty)) == [
        f"row {n} (`{degenerate}`): shown failing by nothing, and the cell does not say why "
        "(name the test, or write 'none: why')"]
    said = "| " + " | ".join([*cells[:4], "none: no test feeds it a loop"]) + " |"
    assert gates_table_problems(good.replace(row, said)) == []
    assert f"`{degenerate}`: none: no test feeds it a loop" in gaps(good.replace(row, said))
    info = "| " + " | ".join([*cells[:2], INFO, cells[3], ""]) + " |"
    assert gates_table_problems(good.replace(row, info)) == []  # judges nothing: nothing to fail

    # a row without a threshold, a row that lost a cell, and the table gone
    assert gates_table_problems(good.replace(row, "| " + " | ".join(
        [*cells[:2], "", *cells[3:]]) + " |")) == [f"row {n} (`{degenerate}`): no threshold"]
    short = "| " + " | ".join(cells[:4]) + " |"
    assert gates_table_problems(good.replace(row, short)) == [
        f"row {n}: 4 cells, want 5: `{degenerate}`", f"no row for {degenerate}"]
    assert gates_table_problems(good.replace("| shown failing by |", "| shown by |")) == [
        f"no table with the header | {' | '.join(HEADER)} |"]
