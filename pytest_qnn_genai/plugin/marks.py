"""The gate's marks (the one list of them) and the rule that skips an item its marks exclude.

Where ``$CI`` is set, an item skipped for want of something a CI machine can provide (upstream's
source tree for the x86 runners) fails instead, naming it (:func:`exclusion`): a CI job whose
runner tests all skipped was green with nothing run.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from pytest_qnn_genai.settings import in_ci
from pytest_qnn_genai.targets import UNSUPPORTED_BACKENDS, Target

if TYPE_CHECKING:
    from pytest_qnn_genai.settings import Settings

MARKERS: dict[str, str] = {
    "soc(*names)": "run only on these SoCs (e.g. soc('SM8650', 'SM8750'))",
    "backend(*names)": "run only on these QNN backends (htp, gpu, lpai)",
    "device": "needs a real phone (--device SERIAL)",
    "emulator": "runs only on the x86 HTP emulator",
    "nightly": "runs only with --nightly",
    "parity": "legacy-vs-new parity checks",
    "flow(*names)": "the flows a test exercises (legacy, new, genai)",
    "perf": "performance benchmarks",
    "qnn_missing_in_ci(line)": "set by the plugin, not by tests: fails the test where $CI is set "
                               "instead of skipping it (what it needs was not found)",
}
MISSING_IN_CI = "qnn_missing_in_ci"  # the mark of an item CI must not skip (its arg: the line)


def register(config: pytest.Config) -> None:
    """Register the markers (also listed in pyproject for --strict-markers users)."""
    for spec, text in MARKERS.items():
        config.addinivalue_line("markers", f"{spec}: {text}")


def exclusion(item: pytest.Item, settings: Settings) -> pytest.MarkDecorator | None:
    """The mark that keeps ``item`` from running this session: a skip naming why, or where
    ``$CI`` is set and what is missing is upstream's source tree, :data:`MISSING_IN_CI`."""
    reason = skip_reason(item, settings)
    if reason is None:
        return None
    target = item_target(item)
    if (in_ci() and target is not None and target.is_x86_runner
            and settings.x86_runner_missing and reason.endswith(settings.x86_runner_missing)
            and _excluded(target, item) is None):  # what its marks exclude is skipped anyway
        return pytest.mark.qnn_missing_in_ci(  # MISSING_IN_CI
            f"{reason} (where $CI is set this fails instead of skipping: a CI run does not "
            "skip what it can run)")
    return pytest.mark.skip(reason=reason)


def fail_if_missing(item: pytest.Item) -> None:
    """Fail an item :func:`exclusion` marked, with its one line."""
    mark = item.get_closest_marker(MISSING_IN_CI)
    if mark is not None:
        pytest.fail(str(mark.args[0]), pytrace=False)


def item_target(item: pytest.Item) -> Target | None:
    """The target an item is parametrised with (fixture ``qnn_target``), if any."""
    callspec = getattr(item, "callspec", None)
    value = callspec.params.get("qnn_target") if callspec else None
    return value if isinstance(value, Target) else None


def _excluded(target: Target, item: pytest.Item) -> str | None:
    soc = item.get_closest_marker("soc")
    if soc and target.soc.name not in {str(a).upper() for a in soc.args}:
        return f"{target.id}: SoC {target.soc.name} not in soc{tuple(soc.args)}"
    backend = item.get_closest_marker("backend")
    if backend and target.backend not in backend.args:
        return f"{target.id}: backend {target.backend} not in backend{tuple(backend.args)}"
    if item.get_closest_marker("device") and (target.is_emulator or target.is_x86_runner):
        return f"{target.id}: needs a phone (--device SERIAL)"
    if item.get_closest_marker("emulator") and not target.is_emulator:
        return f"{target.id}: runs only on the x86 emulator in this process (the host runner)"
    return None


def skip_reason(item: pytest.Item, settings: Settings) -> str | None:
    """Why ``item`` must not run for this session's target(s), or None."""
    if item.get_closest_marker("nightly") and not settings.nightly:
        return "nightly test: run with --nightly"
    target = item_target(item)
    if target is not None and target.backend in UNSUPPORTED_BACKENDS:
        return (f"{target.id}: backend {target.backend} is not supported: "
                f"{UNSUPPORTED_BACKENDS[target.backend]}")
    if target is not None and target.is_x86_runner and settings.x86_runner_missing:
        return f"{target.id}: {settings.x86_runner_missing}"
    if target is not None:
        return _excluded(target, item)
    reasons = [_excluded(t, item) for t in settings.targets]
    return reasons[0] if all(reasons) else None
