"""Marks: items whose marks exclude the current target are skipped with a reason naming it."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.usefixtures("qnn_env")

MARKED = """
import pytest

@pytest.mark.soc("SM8750")
def test_only_8750(qnn_target): pass

@pytest.mark.soc("sm8650", "SM8750")
def test_8650_or_8750(qnn_target): pass

@pytest.mark.backend("gpu")
def test_gpu_only(qnn_target): pass

@pytest.mark.device
def test_needs_phone(qnn_target): pass

@pytest.mark.emulator
def test_emulator_only(qnn_target): pass

@pytest.mark.nightly
def test_nightly(): pass

@pytest.mark.soc("SM8750")
def test_unparametrised_soc_mark(): pass
"""


def test_skips_name_the_target(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(MARKED)
    result = pytester.runpytest("-v", "-rs", "--soc", "SM8650")
    result.assert_outcomes(passed=2, skipped=10)
    result.stdout.fnmatch_lines_random([
        "*test_only_8750?SM8650-htp-emulator? SKIPPED*",
        "*test_8650_or_8750?SM8650-htp-emulator? PASSED*",
        "*test_gpu_only?SM8650-htp-emulator? SKIPPED*",
        "*test_needs_phone?SM8650-htp-emulator? SKIPPED*",
        "*test_emulator_only?SM8650-htp-emulator? PASSED*",
        "*test_nightly SKIPPED*",
        "*test_unparametrised_soc_mark SKIPPED*",
        "SKIPPED [[]1[]] *: SM8650-htp-emulator: SoC SM8650 not in soc('SM8750',)",
        "SKIPPED [[]1[]] *: SM8650-htp-emulator: backend htp not in backend('gpu',)",
        "SKIPPED [[]1[]] *: SM8650-htp-emulator: needs a phone (--device SERIAL)",
        "SKIPPED [[]1[]] *: nightly test: run with --nightly",
        "SKIPPED [[]*[]] *: SM8650-htp-x86-runner: needs ExecuTorch's own runners for x86: *",
    ])


def test_under_ci_a_missing_source_tree_fails_in_one_line_other_skips_stay(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where $CI is set, the x86-runner items (upstream's runners, no source tree to build them)
    fail naming what is missing; what the marks exclude (SoC, phone, nightly) is still a skip."""
    pytester.makepyfile(MARKED)
    monkeypatch.setenv("CI", "true")
    result = pytester.runpytest("-v", "-rEs", "--soc", "SM8650")
    result.assert_outcomes(passed=2, skipped=9, errors=1)  # failed in setup, before any build
    result.stdout.fnmatch_lines_random([
        "*test_8650_or_8750?SM8650-htp-x86-runner? ERROR*",
        "*test_emulator_only?SM8650-htp-x86-runner? SKIPPED*",  # excluded by its mark anyway
        "ERROR *test_8650_or_8750?SM8650-htp-x86-runner? - Failed: SM8650-htp-x86-runner: needs "
        "ExecuTorch's own runners for x86: pass --executorch-src DIR * (where $CI is set this "
        "fails instead of skipping: a CI run does not skip what it can run)",
        "SKIPPED [[]1[]] *: nightly test: run with --nightly",
    ])
    assert "Traceback" not in result.stdout.str()
    monkeypatch.setenv("CI", "false")
    pytester.runpytest("--soc", "SM8650").assert_outcomes(passed=2, skipped=10)


def test_two_socs_run_each_test_where_allowed(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(MARKED)
    result = pytester.runpytest("-v", "--soc", "SM8650", "--soc", "SM8750", "--nightly")
    result.stdout.fnmatch_lines_random([
        "*test_only_8750?SM8750-htp-emulator? PASSED*",
        "*test_only_8750?SM8650-htp-emulator? SKIPPED*",
        "*test_8650_or_8750?SM8750-htp-emulator? PASSED*",
        "*test_nightly PASSED*",
        "*test_unparametrised_soc_mark PASSED*",
    ])


@pytest.mark.parametrize("backend", ["gpu", "lpai"])
def test_unsupported_backend_is_skipped_at_collection_naming_it(pytester: pytest.Pytester,
                                                                backend: str) -> None:
    """--backend gpu|lpai is accepted, but no LLM can be built for it: every target test is
    skipped before it runs, with the reason; a test without a target still runs."""
    pytester.makepyfile(MARKED)
    result = pytester.runpytest("-v", "-rs", "--backend", backend, "--nightly")
    result.assert_outcomes(passed=1, skipped=11)
    result.stdout.fnmatch_lines_random([
        f"*test_gpu_only?SM8650-{backend}-emulator? SKIPPED*",
        f"SKIPPED [[]*[]] *: SM8650-{backend}-emulator: backend {backend} is not supported: *",
        "*test_nightly PASSED*",
    ])


def test_device_mark_runs_with_a_device(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(MARKED)
    result = pytester.runpytest("-v", "--device", "R5CX1234", "-k", "needs_phone or emulator_only")
    result.stdout.fnmatch_lines_random([
        "*test_needs_phone?SM8650-htp-R5CX1234? PASSED*",
        "*test_emulator_only?SM8650-htp-R5CX1234? SKIPPED*",
    ])


def test_markers_are_registered(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--markers")
    for name in ("soc(*names)", "backend(*names)", "device:", "emulator:", "nightly:"):
        assert any(name in line for line in result.outlines), name
