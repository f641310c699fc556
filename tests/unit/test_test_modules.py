"""`make test` collects `tests` and `suites` in one pytest run, whose test folders are not packages
(rootdir-relative imports, pytest's default "prepend" mode): two test modules with one file name
stop the whole collection ("import file mismatch"). `make unit` collects only tests/unit, so this
test says it first."""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def clashes(root: Path, folders: tuple[str, ...]) -> dict[str, list[str]]:
    """Test module file names found more than once below ``folders`` (outside packages)."""
    found: dict[str, list[str]] = defaultdict(list)
    for folder in folders:
        for path in (root / folder).rglob("test_*.py"):
            if not (path.parent / "__init__.py").exists():
                found[path.name].append(str(path.relative_to(root)))
    return {name: paths for name, paths in found.items() if len(paths) > 1}


def test_no_two_test_modules_share_a_file_name() -> None:
    assert not clashes(ROOT, ("tests", "suites")), "rename one of each"


def test_a_clash_is_found(tmp_path: Path) -> None:
    for folder in ("tests/unit", "suites/gate"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "test_same.py").write_text("")
    assert clashes(tmp_path, ("tests", "suites")) == {
        "test_same.py": ["tests/unit/test_same.py", "suites/gate/test_same.py"]}
