"""Digests of the harness's own source for cache keys: artifacts depend on the code that built them.

Contract: ``code_digest(["pytest_qnn_genai.stages.quantize"])`` is a sha256 over the raw bytes of
those modules and of every module of the same package they import, transitively, plus optional
extra files (e.g. ``pytest_qnn_genai/sdk/qnnhtp_abi_adapter.c``). It depends only on the files'
bytes and their paths relative to the package folder, so two checkouts of the same code agree.

- Raw bytes, deliberately: any edit, even to a comment or whitespace, changes the digest. A
  needless rebuild costs minutes; a stale artifact built by other code costs a wrong verdict, and
  stripping comments or docstrings would take a tokenizer and its own bugs.
- Imports are found with :mod:`ast` anywhere in a module: top level, inside functions, under
  ``try:`` (an import that may not run still counts), but not under ``if TYPE_CHECKING:``: such
  an import never runs, and with the package typed throughout it would tie every entry to every
  type it names (a rebuild for nothing). ``import a.b.c``
  and ``from a.b import c`` also take ``a/__init__.py`` and ``a/b/__init__.py`` (they run on
  import) and ``c`` when it is a submodule. Relative imports are resolved against the importing
  module's package.
- The package folder is found from the package's import spec, or passed in (``package_root``), so
  a test can point it at a copy of the package.

Hazards: dynamic imports (``importlib.import_module(name)``, ``__import__``) are not seen: pass
such modules as roots. Other packages (torch, executorch) are not covered: their versions belong
in the key. Data files the code reads are not modules: pass them as ``extra_files``. Results are
cached per process (:func:`clear_cache`), so an edit made during a session is not seen by it,
which keeps one session's keys consistent.
"""
from __future__ import annotations

import ast
import hashlib
import importlib.util
from collections.abc import Iterator, Sequence
from pathlib import Path

_cache: dict[tuple[str, str, tuple[str, ...], tuple[str, ...]], str] = {}


class CodeDigestError(Exception):
    """A module or file to digest cannot be found or parsed."""


def code_digest(modules: str | Sequence[str], *, package_root: Path | None = None,
                extra_files: Sequence[Path] = ()) -> str:
    """Hex sha256 of ``modules``, the package's modules they import (transitively) and extras."""
    names = _names(modules)
    package, root = _package(names, package_root)
    extras = tuple(sorted(str(Path(f).resolve()) for f in extra_files))
    memo = (package, str(root), names, extras)
    if memo not in _cache:
        digest = hashlib.sha256()
        for path in sorted(_closure(package, root, names).values()):
            digest.update(f"{path.relative_to(root).as_posix()}\0{_sha256(path)}\n".encode())
        for extra in map(Path, extras):
            if not extra.is_file():
                raise CodeDigestError(f"extra file {extra} does not exist")
            label = extra.relative_to(root).as_posix() if extra.is_relative_to(root) else extra.name
            digest.update(f"extra:{label}\0{_sha256(extra)}\n".encode())
        _cache[memo] = digest.hexdigest()
    return _cache[memo]


def module_closure(modules: str | Sequence[str], *, package_root: Path | None = None) -> list[str]:
    """The module names :func:`code_digest` covers for ``modules``, sorted."""
    names = _names(modules)
    package, root = _package(names, package_root)
    return sorted(_closure(package, root, names))


def clear_cache() -> None:
    """Forget the digests computed by this process (for tests that edit sources)."""
    _cache.clear()


def _names(modules: str | Sequence[str]) -> tuple[str, ...]:
    names = tuple(sorted({modules} if isinstance(modules, str) else set(modules)))
    if not names:
        raise CodeDigestError("no module to digest")
    return names


def _package(names: tuple[str, ...], package_root: Path | None) -> tuple[str, Path]:
    """The top-level package all ``names`` belong to, and its folder."""
    tops = {n.partition(".")[0] for n in names}
    if len(tops) != 1:
        raise CodeDigestError(f"modules of several packages: {', '.join(sorted(tops))}")
    package = tops.pop()
    if package_root is None:
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise CodeDigestError(f"{package} is not an importable package")
        package_root = Path(list(spec.submodule_search_locations)[0])
    root = package_root.resolve()
    if not (root / "__init__.py").is_file():
        raise CodeDigestError(f"{root} is not a package folder (no __init__.py)")
    return package, root


def _file(name: str, root: Path) -> Path | None:
    """The source file of module ``name`` under ``root``, or None if it is not a module there."""
    parts = name.split(".")[1:]
    base = root.joinpath(*parts)
    for candidate in (base / "__init__.py", base.with_name(base.name + ".py") if parts else None):
        if candidate is not None and candidate.is_file():
            return candidate
    return None


def _closure(package: str, root: Path, names: tuple[str, ...]) -> dict[str, Path]:
    for name in names:
        if _file(name, root) is None:
            raise CodeDigestError(f"{name}: no such module in {root}")
    found: dict[str, Path] = {}
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in found:
            continue
        path = _file(name, root)
        if path is None:
            continue  # `from pkg.mod import function`: not a module
        found[name] = path
        parts = name.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]  # parent packages run too
        todo += _imports(name, path, package)
    return found


def _imports(name: str, path: Path, package: str) -> Iterator[str]:
    """Names of the package's modules (or possible modules) that ``path`` imports."""
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except SyntaxError as e:
        raise CodeDigestError(f"{path}: cannot parse ({e.msg}, line {e.lineno})") from None
    here = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in _runtime_nodes(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names if _inside(a.name, package))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = here.split(".")
                anchor = anchor[:len(anchor) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            if _inside(base, package):
                yield base
                yield from (f"{base}.{a.name}" for a in node.names if a.name != "*")


def _type_checking(test: ast.expr) -> bool:
    """``TYPE_CHECKING`` or ``typing.TYPE_CHECKING``."""
    return ((isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
            or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def _runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node of ``tree`` except the bodies of ``if TYPE_CHECKING:`` (their ``else`` runs)."""
    todo: list[ast.AST] = [tree]
    while todo:
        node = todo.pop()
        yield node
        if isinstance(node, ast.If) and _type_checking(node.test):
            todo.extend(node.orelse)
            continue
        todo.extend(ast.iter_child_nodes(node))


def _inside(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
