"""The README is what a newcomer reads in five minutes: at most 300 lines, the two commands that
set everything up, one runnable example test (run by tests/integration/docs), and links that lead
somewhere."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
MAX_LINES = 300
COMMANDS = ("make gate", "make test")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def readme_problems(text: str, root: Path = ROOT) -> list[str]:
    """What is wrong with ``text`` as the README (empty when nothing is)."""
    problems = []
    lines = text.count("\n") + (not text.endswith("\n"))
    if lines > MAX_LINES:
        problems.append(f"{lines} lines, more than {MAX_LINES}")
    problems += [f"no `{c}`" for c in COMMANDS if c not in text]
    blocks = re.findall(r"^```python\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    if len(blocks) != 1 or "def test_" not in blocks[0]:
        problems.append(f"{len(blocks)} python blocks; want one, with a test in it")
    problems += [f"a link to {target}, which does not exist" for target in LINK.findall(text)
                 if "://" not in target and not (root / target).exists()]
    return problems


def test_the_readme_is_short_and_says_how_to_start() -> None:
    assert readme_problems((ROOT / "README.md").read_text()) == []


def test_each_problem_is_found() -> None:
    good = (ROOT / "README.md").read_text()
    assert readme_problems(good + "\n" * MAX_LINES) == [f"{good.count(chr(10)) + MAX_LINES} lines, "
                                                        f"more than {MAX_LINES}"]
    assert readme_problems(good.replace("make test", "make check")) == ["no `make test`"]
    assert readme_problems(good.replace("make gate", "make all")) == ["no `make gate`"]
    assert readme_problems(good.replace("```python", "```py")) == [
        "0 python blocks; want one, with a test in it"]
    assert readme_problems(good + "\n[gone](docs/pages/nowhere.md)\n") == [
        "a link to docs/pages/nowhere.md, which does not exist"]
