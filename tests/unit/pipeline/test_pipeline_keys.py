"""Cache keys change when what shapes an artifact changes, and only then.

The builders are replaced by fakes that count their calls, so these tests run in seconds; the keys,
the cache and the code digests are the real ones. The package whose code the keys hash is a copy
in a temporary folder, edited as a developer would edit the real one.
"""
from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

import pytest_qnn_genai
from pytest_qnn_genai.cache import ArtifactCache, code_digest
from pytest_qnn_genai.cache.code import clear_cache
from pytest_qnn_genai.flows import registry as flows
from pytest_qnn_genai.models.registry import available
from pytest_qnn_genai.pipeline import Pipeline
from pytest_qnn_genai.targets import Target, soc

VERSIONS = {"torch": "t", "executorch": "e"}
EMULATOR = Target(soc("SM8650"))
PHONE = Target(soc("SM8650"), device="R5CX1234ABC")


@pytest.fixture
def package_copy(tmp_path: Path) -> Iterator[Path]:
    src = Path(pytest_qnn_genai.__file__).parent
    dst = tmp_path / "pkg" / "pytest_qnn_genai"
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "*.pt", "*.bin",
                                                            "*.model"))
    clear_cache()
    yield dst
    clear_cache()


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Fake quantize/compile/legacy builders that record what was built."""
    import pytest_qnn_genai.flows.legacy as legacy
    import pytest_qnn_genai.stages.compile_alone as compile_alone
    import pytest_qnn_genai.stages.quantize as quantize_stage

    calls: list[str] = []

    def fake_quantize(prepared, soc_spec, out: Path, backend: str) -> None:
        calls.append("quantize")
        (out / "qdq.json").write_text("{}")

    def fake_legacy(case, target, out: Path, timeout_s: float = 0.0) -> None:
        calls.append(f"legacy-{'emulator' if target.is_emulator else 'phone'}")
        (out / "legacy.json").write_text("{}")

    monkeypatch.setattr(quantize_stage, "quantize", fake_quantize)
    monkeypatch.setattr(legacy, "build_legacy", fake_legacy)
    monkeypatch.setattr(compile_alone, "compile_alone", lambda *a: calls.append("compile"))
    monkeypatch.setattr(Pipeline, "prepared", lambda self, case: object())
    return calls


def _legacy(pipeline: Pipeline, case, target: Target) -> None:
    pipeline.flow_entry(flows.get("legacy"), case, target)


def _pipeline(tmp_path: Path, package_root: Path | None = None) -> Pipeline:
    cache = ArtifactCache(tmp_path / "artifacts", VERSIONS, progress=lambda _m: None)
    return Pipeline(cache, package_root=package_root)


def test_editing_a_stage_rebuilds_its_entry_and_nothing_else(tmp_path: Path, package_copy: Path,
                                                             builds: list[str]) -> None:
    case = available()["stories260k"]
    _pipeline(tmp_path, package_copy).qdq_entry(case, EMULATOR)
    _legacy(_pipeline(tmp_path, package_copy), case, EMULATOR)
    assert builds == ["quantize", "legacy-emulator"]

    with open(package_copy / "report" / "plots.py", "a") as f:  # not imported by either builder
        f.write("\n# an unrelated edit\n")
    clear_cache()
    _pipeline(tmp_path, package_copy).qdq_entry(case, EMULATOR)
    _legacy(_pipeline(tmp_path, package_copy), case, EMULATOR)
    assert builds == ["quantize", "legacy-emulator"]

    with open(package_copy / "stages" / "recipe.py", "a") as f:  # imported by stages.quantize
        f.write("\n# a change to the recipe the quantize stage applies\n")
    clear_cache()
    _pipeline(tmp_path, package_copy).qdq_entry(case, EMULATOR)
    _legacy(_pipeline(tmp_path, package_copy), case, EMULATOR)
    assert builds == ["quantize", "legacy-emulator", "quantize"]

    with open(package_copy / "compat" / "torchtune.py", "a") as f:  # llama.py's stand-in
        f.write("\n# the stand-in llama.py imports in its own process\n")
    clear_cache()
    _legacy(_pipeline(tmp_path, package_copy), case, EMULATOR)
    assert builds[-1] == "legacy-emulator" and len(builds) == 4

    # a family module: found at run time, no static import reaches it (pipeline.FAMILIES)
    with open(package_copy / "models" / "families" / "qwen3.py", "a") as f:
        f.write("\n# an edit to a family, of another case even\n")
    clear_cache()
    _pipeline(tmp_path, package_copy).qdq_entry(case, EMULATOR)
    _legacy(_pipeline(tmp_path, package_copy), case, EMULATOR)
    assert builds[4:] == ["quantize", "legacy-emulator"]


def test_run_time_settings_rebuild_nothing(tmp_path: Path, builds: list[str]) -> None:
    case = available()["stories260k"]
    _pipeline(tmp_path).qdq_entry(case, EMULATOR)
    _legacy(_pipeline(tmp_path), case, EMULATOR)
    changed = dataclasses.replace(case, eval_prompt="Lily and Ben", max_new_tokens=7,
                                  extra={"perf_prompt": "Once"})
    _pipeline(tmp_path).qdq_entry(changed, EMULATOR)
    _legacy(_pipeline(tmp_path), changed, EMULATOR)
    assert builds == ["quantize", "legacy-emulator"]
    reshaped = dataclasses.replace(case, prefill_ar_len=16)  # this one shapes the graphs
    _pipeline(tmp_path).qdq_entry(reshaped, EMULATOR)
    assert builds[-1] == "quantize" and len(builds) == 3


def test_legacy_build_for_a_phone_is_its_own_entry(tmp_path: Path, builds: list[str]) -> None:
    case = available()["stories260k"]
    _legacy(_pipeline(tmp_path), case, EMULATOR)
    _legacy(_pipeline(tmp_path), case, PHONE)  # without --enable_x86_64
    assert builds == ["legacy-emulator", "legacy-phone"]


def test_code_digest_of_the_installed_package_is_stable() -> None:
    clear_cache()
    first = code_digest("pytest_qnn_genai.stages.quantize")
    clear_cache()
    assert code_digest("pytest_qnn_genai.stages.quantize") == first


def test_declaring_a_variant_rebuilds_nothing_and_the_variant_is_its_own_build(
        tmp_path: Path, builds: list[str]) -> None:
    case = available()["stories260k"]
    _pipeline(tmp_path).qdq_entry(case, EMULATOR)
    more = dataclasses.replace(case, variants={**case.variants, "ar16": {"prefill_ar_len": 16}})
    _pipeline(tmp_path).qdq_entry(more, EMULATOR)  # the base build is the same build
    assert builds == ["quantize"]
    variant = more.variant("ar16")
    assert (variant.name, variant.prefill_ar_len, variant.variants) == ("stories260k@ar16", 16, {})
    _pipeline(tmp_path).qdq_entry(variant, EMULATOR)
    _pipeline(tmp_path).qdq_entry(more.variant("ar16"), EMULATOR)
    assert builds == ["quantize", "quantize"]
