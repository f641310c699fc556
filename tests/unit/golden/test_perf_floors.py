"""Golden perf floors: upstream's numbers and workload, strict one-line errors, floor checks
with the caller's tolerance, the build a floor holds for, refused/atomic/diffed updates."""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_qnn_genai.golden import updates
from pytest_qnn_genai.golden.perf import (
    BUILD_KEYS,
    GoldenFileError,
    GoldenPerf,
    GoldenWorkload,
    golden_diff,
    load_golden,
    load_goldens,
    update_golden,
)
from pytest_qnn_genai.golden.updates import GoldenWriteRefused

REPO = Path(__file__).resolve().parents[3]
SEED = REPO / "golden" / "perf" / "stories260k.json"
REL = "golden/perf/stories260k.json"


WORKLOAD = GoldenWorkload("Once", 128, {"prefill_ar_len": 32}, "test workload")


def _valid() -> dict[str, Any]:
    return {"model": "stories260k", "workload": WORKLOAD.to_dict(),
            "targets": {"SM8650": {"htp": {"prefill_tok_s": 2000, "decode_tok_s": 1600,
                                           "provenance": "test floor"}}}}


@pytest.fixture
def golden_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory with ``golden/perf/``, so messages show the relative path."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "golden" / "perf").mkdir(parents=True)
    return tmp_path / "golden" / "perf"


def test_seed_file_is_upstreams_stories260k_floor_and_workload(case) -> None:
    g = load_golden(SEED)
    assert g.model == "stories260k"
    for soc in ("SM8650", "SM8750"):
        assert g.floor(soc, "htp", "inference_speed_tok_s") == 1600
        assert g.floor(soc, "htp", "decode_tok_s") == 1600  # decode rate >= inference speed
        assert g.floor(soc, "htp", "prefill_tok_s") is None  # upstream has no prefill floor
        assert g.gated(soc, "htp") == ("decode_tok_s", "inference_speed_tok_s")
    sm8650, sm8750 = (g.entry(s, "htp").provenance for s in ("SM8650", "SM8750"))
    assert "test_qnn_delegate.py:9205-9206" in sm8650 and "1600)  # Lanai" in sm8650
    assert "cff6f4dd" in sm8650 and "runner.cpp:40-58" in sm8650
    assert sm8750.startswith("Upstream states no SM8750 floor for stories260k.")
    assert "not scaled" in sm8750 and "LlmSpecs" in sm8750
    assert g.entry("SM8550", "htp") is None  # no number upstream, none here
    w = g.workload  # upstream's test: prompt "Once", --max_seq_len 128 = the runner's --seq_len
    assert (w.prompt, w.seq_len) == ("Once", 128)
    assert w.build == {"decoder_model": "stories260k", "model_mode": "hybrid",
                       "prefill_ar_len": 32, "max_seq_len": 128, "max_context_len": 128,
                       "quant_recipe": "16a4w", "kv_io_bit_width": 8}
    assert "test_llama_stories_260k" in w.source and "device_evaluator.py:376" in w.source
    assert w.mismatches(case) == []  # the shipped case is built as upstream's floor was
    assert g.to_json() == SEED.read_text()  # the file is in canonical form: updates diff cleanly


def test_workload_names_every_build_difference_and_the_token_budget(case) -> None:
    other = dataclasses.replace(case, prefill_ar_len=64, quant_recipe="16a8w")
    problems = load_golden(SEED).workload.mismatches(other)
    assert problems == [
        "the floors were measured on prefill_ar_len 32 but stories260k builds 64",
        "the floors were measured on quant_recipe '16a4w' but stories260k builds '16a8w'"]
    assert WORKLOAD.max_new_tokens(2) == 126  # S - P, qnn_llama_runner's --seq_len
    with pytest.raises(ValueError, match="is 128 tokens, not fewer than seq_len 128"):
        WORKLOAD.max_new_tokens(128)
    new = GoldenWorkload.from_case(case)
    assert new.seq_len == case.max_seq_len and new.mismatches(case) == []
    assert set(new.build) == set(BUILD_KEYS)


def _set(path: tuple[str, ...], value: Any) -> Callable[[dict[str, Any]], Any]:
    def damage(d: dict[str, Any]) -> Any:
        node = d
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = value
        return d
    return damage


def _drop(path: tuple[str, ...]) -> Callable[[dict[str, Any]], Any]:
    def damage(d: dict[str, Any]) -> Any:
        node = d
        for k in path[:-1]:
            node = node[k]
        del node[path[-1]]
        return d
    return damage


ENTRY = ("targets", "SM8650", "htp")
DAMAGE = {
    "decode-not-a-number": (_set(ENTRY + ("decode_tok_s",), "fast"),
                            "SM8650/htp: 'decode_tok_s' must be a positive number or null, "
                            'got "fast"'),
    "negative-prefill": (_set(ENTRY + ("prefill_tok_s",), -3.5),
                         "SM8650/htp: 'prefill_tok_s' must be a positive number or null, got -3.5"),
    "zero-floor": (_set(ENTRY + ("decode_tok_s",), 0), "'decode_tok_s' must be a positive number"),
    "bool-floor": (_set(ENTRY + ("decode_tok_s",), True), "got true"),
    "nan-floor": (_set(ENTRY + ("decode_tok_s",), float("nan")), "got NaN"),
    "missing-decode": (_drop(ENTRY + ("decode_tok_s",)), "SM8650/htp: missing key 'decode_tok_s'"),
    "missing-provenance": (_drop(ENTRY + ("provenance",)), "missing key 'provenance'"),
    "empty-provenance": (_set(ENTRY + ("provenance",), " "), "'provenance' must be a non-empty"),
    "typo-key": (_set(ENTRY + ("decode_toks",), 5), "unknown key 'decode_toks'"),
    "entry-not-object": (_set(ENTRY, [1600]), "SM8650/htp: entry must be an object, got [1600]"),
    "unknown-soc": (lambda d: {**d, "targets": {"SM9999": d["targets"]["SM8650"]}},
                    "unknown SoC 'SM9999'"),
    "unknown-backend": (lambda d: {**d, "targets": {"SM8650": {"npu": {}}}},
                        "SM8650: unknown backend 'npu'"),
    "no-targets": (_set(("targets",), {}), "'targets' must be a non-empty object"),
    "missing-model": (_drop(("model",)), "missing key 'model'"),
    "wrong-model": (_set(("model",), "stories110m"), "'model' is 'stories110m' but the file"),
    "file-tolerance": (_set(("tolerance",), 0.05),
                       "unknown key 'tolerance' (allowed: model, workload, targets); there is no "
                       "tolerance in the file: the tolerance is --qnn-perf-noise"),
    "entry-tolerance": (_set(ENTRY + ("tolerance",), 0.1), "SM8650/htp: unknown key 'tolerance'"),
    "missing-workload": (_drop(("workload",)), "missing key 'workload'"),
    "workload-seq-len": (_set(("workload", "seq_len"), "128"),
                         "workload: 'seq_len' must be an integer >= 2, got \"128\""),
    "workload-prompt": (_set(("workload", "prompt"), ""), "workload: 'prompt' must be a non-empty"),
    "workload-build-key": (_set(("workload", "build", "ar_len"), 32),
                           "workload: build: unknown key 'ar_len'"),
    "workload-build-value": (_set(("workload", "build", "prefill_ar_len"), [32]),
                             "workload: build: 'prefill_ar_len' must be a string or an integer"),
    "workload-no-source": (_drop(("workload", "source")), "workload: missing key 'source'"),
    "top-level-list": (lambda d: [d], "top level must be an object"),
    "huge-value": (_set(ENTRY + ("decode_tok_s",), "x" * 500), 'got "' + "x" * 56 + "..."),
}


@pytest.mark.parametrize("damage,expected", DAMAGE.values(), ids=DAMAGE.keys())
def test_damaged_file_gives_one_line_naming_file_and_problem(
        golden_dir: Path, damage: Callable[[dict[str, Any]], Any], expected: str) -> None:
    (golden_dir / "stories260k.json").write_text(json.dumps(damage(_valid())))
    with pytest.raises(GoldenFileError) as info:
        load_golden(REL)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{REL}: ")
    assert expected in message


def test_exact_message_for_a_non_numeric_floor(golden_dir: Path) -> None:
    (golden_dir / "stories260k.json").write_text(
        json.dumps(_set(ENTRY + ("decode_tok_s",), "fast")(_valid())))
    with pytest.raises(GoldenFileError) as info:
        load_golden(REL)
    assert str(info.value) == (f'{REL}: SM8650/htp: \'decode_tok_s\' must be a positive number '
                               'or null, got "fast"')


@pytest.mark.parametrize("text,expected", [
    ('{"model": "stories260k",', "invalid JSON at line 1 column 25: Expecting property name"),
    ("", "invalid JSON at line 1 column 1"),
])
def test_bad_json_is_one_line(golden_dir: Path, text: str, expected: str) -> None:
    (golden_dir / "stories260k.json").write_text(text)
    with pytest.raises(GoldenFileError) as info:
        load_golden(REL)
    assert str(info.value).startswith(f"{REL}: {expected}") and "\n" not in str(info.value)


def test_missing_file_is_one_line(golden_dir: Path) -> None:
    with pytest.raises(GoldenFileError, match=r"^golden/perf/nope.json: cannot read \(No such"):
        load_golden("golden/perf/nope.json")


def test_load_goldens_reads_every_model(golden_dir: Path) -> None:
    shutil.copy(SEED, golden_dir / "stories260k.json")
    assert list(load_goldens(golden_dir)) == ["stories260k"]
    assert load_goldens(golden_dir / "absent") == {}


def test_check_applies_floor_and_the_callers_tolerance(golden_dir: Path) -> None:
    g = GoldenPerf("stories260k", WORKLOAD, {}).with_floors(
        "SM8650", "htp", {"prefill_tok_s": 2000, "decode_tok_s": 1600}, "test floor")
    assert g.check("SM8650", "htp", {"prefill_tok_s": 2100, "decode_tok_s": 1521}, 0.05) == []
    [miss] = g.check("SM8650", "htp", {"prefill_tok_s": 2100, "decode_tok_s": 1519}, 0.05)
    assert miss == "stories260k SM8650/htp: decode_tok_s 1519.0 < floor 1600 (tolerance 5%)"
    assert g.check("SM8650", "htp", {"prefill_tok_s": 2100, "decode_tok_s": 1521}, 0.0) != []
    [nan] = g.check("SM8650", "htp", {"prefill_tok_s": 2100, "decode_tok_s": float("nan")}, 0.1)
    assert "decode_tok_s nan < floor" in nan
    [unmeasured] = g.check("SM8650", "htp", {"decode_tok_s": 1700}, 0.1)
    assert "prefill_tok_s was not measured" in unmeasured
    assert g.check("SM8750", "htp", {}, 0.1) == []  # no golden for this SoC: nothing to gate
    assert g.gated("SM8750", "htp") == ()  # (the perf suite skips such a phone)
    with pytest.raises(ValueError, match="tolerance must be in"):
        g.check("SM8650", "htp", {}, 1.0)
    with pytest.raises(ValueError, match="'ttft_s' is not a floor figure"):
        g.with_floors("SM8650", "htp", {"ttft_s": 0.1}, "x")


def test_judge_gives_each_floor_its_figure_with_the_floor_named(case) -> None:
    """check()'s messages and judge()'s verdicts are one comparison: a phone figure below its
    floor is a failed figure judged by ``floor 1600 (SM8650 phone, -10% noise)``."""
    g = GoldenPerf("stories260k", WORKLOAD, {}).with_floors(
        "SM8650", "htp", {"prefill_tok_s": None, "decode_tok_s": 1600}, "test floor")
    [low] = g.judge("SM8650", "htp", {"prefill_tok_s": 2100, "decode_tok_s": 800}, 0.1)
    assert (low.name, low.value, low.verdict, low.judge, low.rule, low.bound) == (
        "decode_tok_s", 800, "fail", "floor 1600 (SM8650 phone, -10% noise)", "phone-floor", 1600)
    assert low.context["vs_floor"] == 0.5
    [ok] = g.judge("SM8650", "htp", {"decode_tok_s": 1441}, 0.1)
    assert ok.verdict == "pass" and g.check("SM8650", "htp", {"decode_tok_s": 1441}, 0.1) == []
    [missing] = g.judge("SM8650", "htp", {}, 0.1)
    assert missing.verdict == "fail" and missing.value is None
    assert g.judge("SM8750", "htp", {"decode_tok_s": 1.0}, 0.1) == []  # no floors: nothing judged
    wrong = GoldenWorkload("Once", 128, {"prefill_ar_len": 16}, "w")
    [build] = wrong.judge_build(case, "g.json")
    assert build.verdict == "fail" and build.judge == "the floors' build (g.json)"


def _bumped(decode: float) -> GoldenPerf:
    g = load_golden(REL)
    return g.with_floors("SM8650", "htp", {"decode_tok_s": decode}, "measured on R5CX (test)")


def test_update_refuses_without_the_explicit_flag(golden_dir: Path) -> None:
    shutil.copy(SEED, golden_dir / "stories260k.json")
    before = (golden_dir / "stories260k.json").read_bytes()
    with pytest.raises(GoldenWriteRefused, match="without --qnn-update-golden"):
        update_golden(REL, _bumped(1750))
    with pytest.raises(GoldenWriteRefused):
        update_golden(REL, _bumped(1750), allow_write=False)
    assert (golden_dir / "stories260k.json").read_bytes() == before
    assert sorted(p.name for p in golden_dir.iterdir()) == ["stories260k.json"]


def test_update_writes_and_returns_a_diff_with_the_changed_number(golden_dir: Path) -> None:
    shutil.copy(SEED, golden_dir / "stories260k.json")
    os.chmod(golden_dir / "stories260k.json", 0o644)
    new = _bumped(1750)
    assert golden_dir.joinpath("stories260k.json").read_text() != new.to_json()
    preview = golden_diff(REL, new)
    made = update_golden(REL, new, allow_write=True)
    diff = made.diff
    assert diff == preview
    assert f"{REL} targets.SM8650.htp.decode_tok_s: 1600 -> 1750" in made.lines()
    assert '-        "decode_tok_s": 1600,' in diff and '+        "decode_tok_s": 1750,' in diff
    assert "+        \"provenance\": \"measured on R5CX (test)\"" in diff
    assert diff.startswith(f"--- {REL} (old)\n+++ {REL} (new)\n")
    reloaded = load_golden(REL)
    assert reloaded.floor("SM8650", "htp", "decode_tok_s") == 1750
    assert reloaded.floor("SM8650", "htp", "inference_speed_tok_s") == 1600  # kept
    assert (golden_dir / "stories260k.json").stat().st_mode & 0o777 == 0o644
    assert update_golden(REL, reloaded, allow_write=True).diff == ""  # unchanged: empty diff
    assert [u.changed for u in updates.take()] == [True, False]  # both journalled


def test_update_creates_a_new_file(golden_dir: Path) -> None:
    new = GoldenPerf("stories110m", WORKLOAD, {}).with_floors(
        "SM8750", "htp", {"decode_tok_s": 220.0}, "ExecuTorch stories110m: >= 220 tok/s")
    diff = update_golden("golden/perf/stories110m.json", new, allow_write=True).diff
    assert '+        "decode_tok_s": 220.0,' in diff and '+        "prefill_tok_s": null,' in diff
    assert load_golden("golden/perf/stories110m.json") == new
    assert [u.created for u in updates.take()] == [True]


def test_update_is_atomic_when_the_replace_fails(golden_dir: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copy(SEED, golden_dir / "stories260k.json")
    before = (golden_dir / "stories260k.json").read_bytes()

    def failing_replace(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError, match="No space left"):
        update_golden(REL, _bumped(1750), allow_write=True)
    assert (golden_dir / "stories260k.json").read_bytes() == before
    assert sorted(p.name for p in golden_dir.iterdir()) == ["stories260k.json"]  # no temp left


def test_update_validates_before_writing(golden_dir: Path) -> None:
    shutil.copy(SEED, golden_dir / "stories260k.json")
    before = (golden_dir / "stories260k.json").read_bytes()
    wrong_model = GoldenPerf("stories110m", WORKLOAD, load_golden(REL).entries)
    with pytest.raises(GoldenFileError, match="'model' is 'stories110m'"):
        update_golden(REL, wrong_model, allow_write=True)
    negative = _bumped(-1.0)
    with pytest.raises(GoldenFileError, match="must be a positive number"):
        update_golden(REL, negative, allow_write=True)
    assert (golden_dir / "stories260k.json").read_bytes() == before
