"""The README's example test runs as a user runs it: its python block, as a file of its own, in a
fresh pytest process on the x86 emulator, one model case. It shares the session's artifact cache,
so what it asks for (the case's prepare, quantize and compile entries) is what the suites build.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
RUN_TIMEOUT_S = 1800  # on a cold cache the run builds the case's QDQ graphs and .pte
CASE = "qwen3_toy"  # the README's command


def readme_example() -> str:
    (block,) = re.findall(r"^```python\n(.*?)^```", (ROOT / "README.md").read_text(),
                          re.MULTILINE | re.DOTALL)
    return block


def _run(pytester: pytest.Pytester, settings, monkeypatch: pytest.MonkeyPatch,
         source: str) -> tuple[pytest.RunResult, str]:
    """``source`` as ``test_mine.py``, run as the README runs it, on the session's first SoC and
    cache (its builds are the suites'); the target id it ran on."""
    for name in [n for n in os.environ if n.startswith("QNN_GENAI_")]:
        monkeypatch.delenv(name)  # a user's run: only what the command line says
    soc = settings.socs[0].name
    case = CASE if not settings.models or CASE in settings.models else settings.models[0]
    pytester.makepyfile(test_mine=source)
    result = pytester.runpytest_subprocess(
        "--models", case, "--soc", soc, "-k", "emulator", "-s", "--no-qnn-prebuild",
        "--qnn-cache-dir", str(settings.cache_dir), "-p", "no:cacheprovider",
        timeout=RUN_TIMEOUT_S)
    return result, f"{soc}-htp-emulator"


def _counts(result: pytest.RunResult) -> tuple[int, int, int]:
    outcomes = result.parseoutcomes()
    return outcomes.get("passed", 0), outcomes.get("failed", 0), outcomes.get("errors", 0)


def test_the_readme_example_passes_on_the_emulator(pytester: pytest.Pytester, qnn_settings,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    result, target = _run(pytester, qnn_settings, monkeypatch, readme_example())
    assert _counts(result) == (1, 0, 0), result.stdout.str()[-4000:]
    result.stdout.fnmatch_lines([f"*{target} * tok/s: *"])  # what the README shows it print


def test_a_broken_example_fails_this_test(pytester: pytest.Pytester, qnn_settings,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The same run of the block with a fixture misspelt errors at set-up (no build): the check
    above sees it."""
    broken = readme_example().replace("qnn_record)", "qnn_recorder)")
    assert broken != readme_example()
    result, _ = _run(pytester, qnn_settings, monkeypatch, broken)
    assert _counts(result) == (0, 0, 1), result.stdout.str()[-4000:]
    result.stdout.fnmatch_lines(["*fixture 'qnn_recorder' not found*"])
