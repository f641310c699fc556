"""A test that needs upstream's source tree skips without one on a developer's machine and fails
with one line where ``$CI`` is set; the tree is found at run time, beside the checkout too."""
from __future__ import annotations

from pathlib import Path

import pytest

from pytest_qnn_genai.runners import ENV_VAR
from tests.support import upstream

NEEDS_TREE = """
from pathlib import Path
from tests.support import upstream

def test_needs_the_tree(monkeypatch):
    monkeypatch.setattr(upstream, "BESIDE", Path(TREE))
    assert upstream.require_source_tree(None).is_dir()
"""


def _run(pytester: pytest.Pytester, beside: Path) -> pytest.RunResult:
    pytester.makepyfile(NEEDS_TREE.replace("TREE", repr(str(beside))))
    return pytester.runpytest("-p", "no:cacheprovider", "-p", "no:qnn_genai", "-rs")


def test_a_missing_tree_under_ci_fails_in_one_line(pytester: pytest.Pytester,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.setenv("CI", "true")
    result = _run(pytester, tmp_path / "no-tree")
    result.assert_outcomes(failed=1)
    [line] = [x for x in result.outlines if x.startswith("CI=true: ")]
    assert line == (f"CI=true: upstream's ExecuTorch source tree not found, so this test cannot "
                    f"run and CI does not skip it: looked in {tmp_path / 'no-tree'}; pass "
                    f"--executorch-src DIR or set {ENV_VAR}")
    assert "Traceback" not in result.stdout.str()


def test_a_missing_tree_outside_ci_skips_naming_it(pytester: pytest.Pytester,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    result = _run(pytester, tmp_path / "no-tree")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED *upstream's ExecuTorch source tree not found: looked "
                                 f"in {tmp_path / 'no-tree'}*"])


def test_the_tree_beside_the_checkout_is_found_at_run_time(pytester: pytest.Pytester,
                                                           monkeypatch: pytest.MonkeyPatch,
                                                           tmp_path: Path) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)  # outside make: no variable
    monkeypatch.setenv("CI", "true")
    (tmp_path / "executorch").mkdir()
    _run(pytester, tmp_path / "executorch").assert_outcomes(passed=1)
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "executorch"))  # the variable, set after import
    assert upstream.source_tree() == tmp_path / "executorch"


def test_the_makefile_default_is_the_tree_beside_the_checkout() -> None:
    makefile = (upstream.REPO_ROOT / "Makefile").read_text()
    assert "$(CURDIR)/../shared/upstream/executorch" in makefile
    assert upstream.BESIDE == upstream.REPO_ROOT.parent / "shared" / "upstream" / "executorch"
