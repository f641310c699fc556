"""Comments and docstrings say why, never when: no issue numbers, work sittings, dates, commit
hashes or one machine's timings in the code. Those drift (one build was "44 s cold" in one comment
and "~2.5 min" in another) and say nothing about the hazard; a measured figure belongs on the
docs' measurements page (or its investigations archive) with the command that measured it. This
scans every comment and docstring of the package, suites/, scripts/ and tests/ and names each
offending file:line."""
from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("pytest_qnn_genai", "suites", "scripts", "tests")
_UNIT = r"(?:s|ms|min|mins|minutes?|seconds?|h|hours?|CPU s)"
PATTERNS = {
    "an issue number": re.compile(r"(?<!upstream )\bissues? #?\d+(?:\.\d+)*\b", re.IGNORECASE),
    "a sitting": re.compile(r"\bsittings?\b", re.IGNORECASE),
    "a date": re.compile(r"\b20\d\d-[01]\d(?:-[0-3]\d)?\b"),
    "a commit hash": re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b"),
    "a measured time": re.compile(
        rf"\bmeasured\b[^.;]*?\d+(?:\.\d+)?\s?{_UNIT}\b"  # "measured: 19.6 CPU s"
        rf"|~\s?\d+(?:\.\d+)?(?:-\d+(?:\.\d+)?)?\+?\s?{_UNIT}\b"  # "~2.5 min", "~10-60 s"
        rf"|\b\d+(?:\.\d+)?\s?{_UNIT} of a (?:cold|warm)\b"  # "395 s of a cold run"
        rf"|\b\d+(?:\.\d+)?\s?{_UNIT} (?:cold|warm)\b"  # "44 s cold"
        r"|\b\d+(?:\.\d+)? CPU s\b",  # "19.0 against 13.6 CPU s"
        re.IGNORECASE),
}


def _docstrings(tree: ast.Module) -> list[ast.Constant]:
    nodes: list[ast.AST] = [tree, *(n for n in ast.walk(tree) if isinstance(
        n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))]
    out = []
    for node in nodes:
        body = getattr(node, "body", [])
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            out.append(body[0].value)
    return out


def _texts(source: str) -> list[tuple[int, str]]:
    """(line, text) of every comment and every docstring line."""
    out = [(tok.start[0], tok.string) for tok in tokenize.generate_tokens(io.StringIO(source).readline)
           if tok.type == tokenize.COMMENT]
    for doc in _docstrings(ast.parse(source)):
        text = doc.value if isinstance(doc.value, str) else ""
        out += [(doc.lineno + i, line) for i, line in enumerate(text.splitlines())]
    return sorted(out)


def scan(root: Path, folders: tuple[str, ...] = SCANNED) -> list[str]:
    """``file:line: <what>: <text>`` for every comment or docstring line that dates the code."""
    found = []
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if rel == "tests/unit/test_comment_style.py":  # its own patterns and examples
                continue
            for line, text in _texts(path.read_text(encoding="utf-8")):
                for what, pattern in PATTERNS.items():
                    if pattern.search(text):
                        found.append(f"{rel}:{line}: {what}: {text.strip()}")
    return found


def test_comments_say_why_not_when() -> None:
    found = scan(ROOT)
    assert not found, ("comments/docstrings that date the code (say what goes wrong and why; the "
                       "figures go on the docs' measurements page):\n" + "\n".join(found))


def test_a_dated_comment_is_found(tmp_path: Path) -> None:
    pkg = tmp_path / "pytest_qnn_genai"
    pkg.mkdir()
    (pkg / "clean.py").write_text('"""Builds the runners: a cold build takes minutes."""\n'
                                  "TIMEOUT_S = 600  # a build past this is hung\n")
    (pkg / "dated.py").write_text(
        '"""The store (issue 22).\n\nMeasured in sitting 9."""\n'  # lines 1, 3
        "x = 1  # as of 2026-11-30\n"  # 4
        "y = 2  # fixed in 97fc978\n"  # 5
        "def f() -> None:\n"
        '    """A cold build: 44 s cold, ~2.5 min warm; measured: 19.6 CPU s."""\n'  # 7
        "z = 'issue 3'  # a string that is no comment or docstring is not scanned\n")
    found = scan(tmp_path, ("pytest_qnn_genai",))
    assert [f.split(": ", 2)[:2] for f in found] == [
        ["pytest_qnn_genai/dated.py:1", "an issue number"],
        ["pytest_qnn_genai/dated.py:3", "a sitting"],
        ["pytest_qnn_genai/dated.py:4", "a date"],
        ["pytest_qnn_genai/dated.py:5", "a commit hash"],
        ["pytest_qnn_genai/dated.py:7", "a measured time"],
    ], found
