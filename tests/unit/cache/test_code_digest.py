"""Digests of the harness's own source: every module a root imports, transitively, by raw bytes."""
from __future__ import annotations

import shutil
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import pytest_qnn_genai
from pytest_qnn_genai.cache.code import CodeDigestError, clear_cache, code_digest, module_closure

SOURCES = {
    "__init__.py": "",
    "root.py": """
        from typing import TYPE_CHECKING
        from pkg import helpers                 # a submodule, imported with `from`
        from .rel import thing                  # relative
        if TYPE_CHECKING:
            from pkg.typed import Alias         # never runs: does not count
        else:
            from pkg.fallback import Alias      # runs: counts

        def build():
            import pkg.lazy.deep                # function-local, dotted
        """,
    "helpers.py": "from pkg.util import value  # util is a module, value is not\n",
    "util.py": "value = 1\n",
    "rel.py": "thing = 2\n",
    "typed.py": "Alias = int\n",
    "fallback.py": "Alias = int\n",
    "lazy/__init__.py": "",
    "lazy/deep.py": "from ..util import value\n",
    "unrelated.py": "import pkg.util\n",
}


@pytest.fixture
def pkg(tmp_path: Path) -> Iterator[Path]:
    clear_cache()
    for name, text in SOURCES.items():
        path = tmp_path / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    yield tmp_path / "pkg"
    clear_cache()


def _digest(root: Path, module: str = "pkg.root", **kwargs: object) -> str:
    clear_cache()
    return code_digest(module, package_root=root, **kwargs)


def test_closure_follows_every_kind_of_import(pkg: Path) -> None:
    assert module_closure("pkg.root", package_root=pkg) == [
        "pkg", "pkg.fallback", "pkg.helpers", "pkg.lazy", "pkg.lazy.deep", "pkg.rel", "pkg.root",
        "pkg.util"]


def test_a_type_only_import_does_not_tie_the_digest(pkg: Path) -> None:
    base = _digest(pkg)
    with open(pkg / "typed.py", "a") as f:
        f.write("Other = str\n")
    assert _digest(pkg) == base  # only named for the type checker
    with open(pkg / "fallback.py", "a") as f:
        f.write("Other = str\n")
    assert _digest(pkg) != base


def test_digest_changes_with_an_imported_module_only(pkg: Path) -> None:
    base = _digest(pkg)
    assert _digest(pkg) == base
    with open(pkg / "unrelated.py", "a") as f:
        f.write("x = 3\n")
    assert _digest(pkg) == base
    with open(pkg / "util.py", "a") as f:
        f.write("# a comment is an edit too: the digest covers raw bytes\n")
    assert _digest(pkg) != base


def test_extra_files_count_and_results_are_cached_per_process(pkg: Path, tmp_path: Path) -> None:
    adapter = tmp_path / "adapter.c"
    adapter.write_text("int x;\n")
    base = _digest(pkg)
    with_adapter = _digest(pkg, extra_files=[adapter])
    assert with_adapter != base
    adapter.write_text("int y;\n")
    assert code_digest("pkg.root", package_root=pkg, extra_files=[adapter]) == with_adapter
    clear_cache()
    assert code_digest("pkg.root", package_root=pkg, extra_files=[adapter]) != with_adapter


def test_the_digest_does_not_depend_on_where_the_package_is(pkg: Path, tmp_path: Path) -> None:
    moved = shutil.copytree(pkg, tmp_path / "elsewhere" / "pkg")
    assert _digest(moved) == _digest(pkg)


def test_a_copy_of_the_harness(tmp_path: Path) -> None:
    original = Path(pytest_qnn_genai.__file__).parent
    copy = Path(shutil.copytree(original, tmp_path / "pytest_qnn_genai",
                                ignore=shutil.ignore_patterns("__pycache__")))
    root = "pytest_qnn_genai.stages.quantize"
    base = _digest(copy, root)
    assert _digest(original, root) == base  # same bytes elsewhere (unless edited meanwhile)
    covered = module_closure(root, package_root=copy)
    source = (copy / "stages" / "quantize.py").read_text()
    parents = {".".join(root.split(".")[:i]) for i in range(1, 4)}
    transitive = [m for m in covered if m not in parents and m.rsplit(".", 1)[-1] not in source]
    assert transitive, covered
    edited = copy.joinpath(*transitive[0].split(".")[1:])
    edited = edited / "__init__.py" if edited.is_dir() else edited.with_suffix(".py")
    outside = next(p for p in sorted(copy.rglob("*.py"))
                   if ".".join(p.relative_to(tmp_path).with_suffix("").parts) not in covered
                   and p.name != "__init__.py")
    with open(outside, "a") as f:
        f.write("\n# not imported by the stage\n")
    assert _digest(copy, root) == base
    with open(edited, "a") as f:
        f.write("\n# imported through another module\n")
    assert _digest(copy, root) != base


def test_errors_are_one_line(pkg: Path) -> None:
    with pytest.raises(CodeDigestError, match=r"^pkg.nothing: no such module in .*pkg$"):
        _digest(pkg, "pkg.nothing")
    (pkg / "util.py").write_text("def broken(:\n")
    with pytest.raises(CodeDigestError, match=r"util.py: cannot parse \(.*, line 1\)$"):
        _digest(pkg)
    with pytest.raises(CodeDigestError, match="modules of several packages: other, pkg"):
        code_digest(["pkg.root", "other.mod"], package_root=pkg)
