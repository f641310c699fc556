"""The package's ``Any`` budget: every direct ``Any`` and every use of an alias that is (or holds)
``Any`` counts, and there are at most :data:`BUDGET`. Each one left is a seam with a value the
package cannot type (``pytest_qnn_genai/untyped.py`` says which and why); a shape the package
knows is a ``TypedDict`` or a ``Protocol`` instead, which mypy (strict) holds the code to."""
from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "pytest_qnn_genai"
BUDGET = 60


def _annotation_strings(tree: ast.Module) -> list[ast.expr]:
    """String annotations (and string ``TypeAlias`` values) parsed as expressions."""
    found: list[ast.expr] = []

    def add(node: ast.expr | None) -> None:
        for sub in ast.walk(node) if node is not None else ():
            if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                try:
                    parsed = ast.parse(sub.value, mode="eval").body
                except SyntaxError:
                    continue
                found.append(ast.increment_lineno(parsed, sub.lineno - 1))

    for node in ast.walk(tree):
        if isinstance(node, ast.arg):
            add(node.annotation)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            add(node.returns)
        elif isinstance(node, ast.AnnAssign):
            add(node.annotation)
            if isinstance(node.annotation, ast.Name) and node.annotation.id == "TypeAlias":
                add(node.value)
    return found


def _names(node: ast.AST) -> list[ast.Name | ast.Attribute]:
    """``Any``-candidate references below ``node``: names, and ``typing.Any`` attributes."""
    return [n for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
            or (isinstance(n, ast.Attribute) and n.attr == "Any")]


def _label(node: ast.Name | ast.Attribute) -> str:
    return node.id if isinstance(node, ast.Name) else "Any"


def _aliases(trees: dict[Path, ast.Module]) -> set[str]:
    """Module-level aliases whose value names ``Any`` or another such alias (to a fixed point)."""
    assignments: list[tuple[str, ast.expr]] = []
    for tree in trees.values():
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                    and isinstance(node.targets[0], ast.Name):
                assignments.append((node.targets[0].id, node.value))
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) \
                    and node.value is not None and isinstance(node.annotation, ast.Name) \
                    and node.annotation.id == "TypeAlias":
                value = node.value
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    value = ast.parse(value.value, mode="eval").body
                assignments.append((node.target.id, value))
    aliases: set[str] = set()
    while True:
        more = {name for name, value in assignments if name not in aliases
                and any(_label(n) in aliases | {"Any"} for n in _names(value))}
        if not more:
            return aliases
        aliases |= more


def count_any(package: Path) -> Counter[str]:
    """Uses of ``Any`` and of its aliases per ``file:line`` below ``package``."""
    trees = {p: ast.parse(p.read_text(), str(p)) for p in sorted(package.rglob("*.py"))}
    aliases = _aliases(trees)
    uses: Counter[str] = Counter()
    for path, tree in trees.items():
        nodes: list[ast.AST] = [tree, *_annotation_strings(tree)]
        for node in nodes:
            for name in _names(node):
                if _label(name) in aliases | {"Any"}:
                    uses[f"{path.relative_to(package.parent)}:{name.lineno}"] += 1
    return uses


def _report(uses: Counter[str]) -> str:
    by_file = Counter({k.rsplit(":", 1)[0]: 0 for k in uses})
    for k, n in uses.items():
        by_file[k.rsplit(":", 1)[0]] += n
    return "\n".join(f"  {n:3d}  {f}" for f, n in by_file.most_common())


def test_any_stays_within_the_budget() -> None:
    uses = count_any(PACKAGE)
    total = sum(uses.values())
    print(f"Any (direct and through aliases): {total} of {BUDGET}\n{_report(uses)}")
    assert total <= BUDGET, (
        f"{total} uses of Any or an Any alias in the package, budget {BUDGET}; type the shape "
        f"(TypedDict, Protocol) or say in untyped.py why it cannot be:\n{_report(uses)}")


def test_the_count_finds_every_kind_of_use(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "untyped.py").write_text(
        "from typing import Any, TypeAlias\n"
        "Json = Any\n"  # 1: the alias's own Any
        "Tree: TypeAlias = 'dict[str, Json]'\n")  # 2: a string alias holding an alias
    (pkg / "user.py").write_text(
        "import typing\n"
        "from typing import Any\n"  # an import is no use
        "from pkg.untyped import Json, Tree\n"
        "Manifest = dict[str, Json]\n"  # 3: an alias of an alias
        "def f(a: Json, b: 'list[Any]') -> typing.Any:\n"  # 4, 5, 6
        "    c: Manifest = {}\n"  # 7
        "    d: Tree = {}\n"  # 8
        "    e: dict[str, object] = {}\n"  # typed: no use
        "    return a, b, c, d, e\n")
    uses = count_any(pkg)
    assert sum(uses.values()) == 8, uses
    assert uses["pkg/user.py:5"] == 3
