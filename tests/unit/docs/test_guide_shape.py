"""The user's docs are a guide: the measurements page states each finding short (at most 250
lines), the story of how each was found lives in the investigations archive, off the site's
navigation and linked from that page, and the changelog is a Keep a Changelog list whose header
names the version ``pyproject.toml`` declares."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PAGES = ROOT / "docs" / "pages"
GUIDE = PAGES / "measurements.md"
ARCHIVE = PAGES / "investigations"
MAX_GUIDE_LINES = 250
CATEGORIES = ("Added", "Changed", "Deprecated", "Removed", "Fixed", "Security")
RELEASE = re.compile(r"^## \[(Unreleased|\d+\.\d+\.\d+)\]( - \d{4}-\d{2}-\d{2})?$")
NAV_PAGE = re.compile(r"^\s+- (?:.*:\s+)?([\w./-]+\.md)\s*$")  # "  - Title: page.md" or "  - page.md"


def _lines(text: str) -> int:
    return text.count("\n") + (not text.endswith("\n"))


def nav_pages(mkdocs_yml: str) -> set[str]:
    """Every page file the ``nav:`` of ``mkdocs_yml`` names, at any depth (read as text: its
    entries are the indented lines under ``nav:``, and mypy has no stubs for a YAML parser)."""
    lines = mkdocs_yml.splitlines()
    block = []
    for line in lines[lines.index("nav:") + 1:]:
        if line.strip() and not line.startswith(" "):
            break  # the next top-level key
        block.append(line)
    return {m.group(1) for line in block if (m := NAV_PAGE.match(line))}


def guide_problems(guide: str, nav: set[str], archive: dict[str, str]) -> list[str]:
    """What is wrong with the measurements page and its archive (empty when nothing is):
    ``archive`` maps each page under investigations/ (its path relative to the docs) to its
    text."""
    problems = []
    if (lines := _lines(guide)) > MAX_GUIDE_LINES:
        problems.append(f"measurements.md has {lines} lines, more than {MAX_GUIDE_LINES}")
    if "investigations/index.md" not in archive:
        problems.append("no investigations/index.md")
    elif "(investigations/index.md)" not in guide:
        problems.append("measurements.md does not link the investigations archive")
    problems += [f"{page} is in the navigation" for page in sorted(archive) if page in nav]
    index = archive.get("investigations/index.md", "")
    problems += [f"{page} is not listed on investigations/index.md" for page in sorted(archive)
                 if page != "investigations/index.md"
                 and f"({page.removeprefix('investigations/')})" not in index]
    return problems


def changelog_problems(text: str, version: str) -> list[str]:
    """What is wrong with ``text`` as a Keep a Changelog file (empty when nothing is)."""
    problems = []
    header = text.split("\n## ", 1)[0]
    if "keepachangelog.com" not in header:
        problems.append("the header does not reference keepachangelog.com")
    if version not in header:
        problems.append(f"the header does not name the version {version}")
    level2 = [line for line in text.splitlines() if line.startswith("## ")]
    if "## [Unreleased]" not in level2:
        problems.append("no ## [Unreleased]")
    problems += [f"not a release heading: {line}" for line in level2 if not RELEASE.match(line)]
    problems += [f"not a Keep a Changelog category: {line}" for line in text.splitlines()
                 if line.startswith("### ") and line.removeprefix("### ") not in CATEGORIES]
    problems += [f"a heading below level 3: {line}" for line in text.splitlines()
                 if line.startswith("####")]
    return problems


def _archive() -> dict[str, str]:
    return {p.relative_to(PAGES).as_posix(): p.read_text() for p in sorted(ARCHIVE.rglob("*.md"))}


def _nav() -> set[str]:
    return nav_pages((ROOT / "mkdocs.yml").read_text())


def _version() -> str:
    return str(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"])


def test_the_measurements_page_is_a_guide_and_its_archive_is_off_the_navigation() -> None:
    archive = _archive()
    assert len(archive) >= 2
    assert {"index.md", "measurements.md", "changelog.md"} <= _nav()  # the nav is read at all
    assert guide_problems(GUIDE.read_text(), _nav(), archive) == []


def test_the_changelog_keeps_a_changelog() -> None:
    assert changelog_problems((ROOT / "CHANGELOG.md").read_text(), _version()) == []


def test_each_guide_problem_is_found() -> None:
    guide, nav, archive = GUIDE.read_text(), _nav(), _archive()
    longer = guide + "\n" * MAX_GUIDE_LINES
    assert guide_problems(longer, nav, archive) == [
        f"measurements.md has {_lines(longer)} lines, more than {MAX_GUIDE_LINES}"]
    unlinked = guide.replace("(investigations/index.md)", "(index.md)")
    assert guide_problems(unlinked, nav, archive) == [
        "measurements.md does not link the investigations archive"]
    listed = nav_pages((ROOT / "mkdocs.yml").read_text().replace(
        "  - Changelog: changelog.md\n",
        "  - Changelog: changelog.md\n  - Investigations:\n      - investigations/index.md\n"))
    assert guide_problems(guide, listed, archive) == ["investigations/index.md is in the navigation"]
    orphan = {**archive, "investigations/new.md": "# New\n"}
    assert guide_problems(guide, nav, orphan) == [
        "investigations/new.md is not listed on investigations/index.md"]


def test_each_changelog_problem_is_found() -> None:
    good, version = (ROOT / "CHANGELOG.md").read_text(), _version()
    assert changelog_problems(good.replace("## [Unreleased]", "## Unreleased"), version) == [
        "no ## [Unreleased]", "not a release heading: ## Unreleased"]
    assert changelog_problems(good.replace("### Fixed", "### Bug fixes"), version) == [
        "not a Keep a Changelog category: ### Bug fixes"]
    assert changelog_problems(good + "\n#### 2026-12-07\n", version) == [
        "a heading below level 3: #### 2026-12-07"]
    assert changelog_problems(good, "9.9.9") == ["the header does not name the version 9.9.9"]
    assert changelog_problems(good + "\n## [0.1.0] - 2026-12-08\n\n### Added\n", version) == []
