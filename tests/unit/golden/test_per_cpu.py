"""Golden files per CPU kind: the kinds that have a file, and the one line a kind without it
fails with (an accepted record, genai's measured window bounds)."""
from __future__ import annotations

from pathlib import Path

from pytest_qnn_genai.golden import per_cpu


def test_the_kinds_recorded_are_the_folders_holding_the_file(tmp_path: Path) -> None:
    assert per_cpu.kinds_recorded(tmp_path, "genai", "b.json") == []
    for kind in ("z-cpu-avx2", "a-cpu-avx512"):
        path = per_cpu.path_for(tmp_path, "genai", kind, "b.json")
        path.parent.mkdir(parents=True)
        path.write_text("{}")
    (tmp_path / "genai" / "empty-cpu").mkdir()
    assert per_cpu.kinds_recorded(tmp_path, "genai", "b.json") == ["a-cpu-avx512", "z-cpu-avx2"]
    # a file of many entries: only the kinds whose file holds the one asked for
    per_cpu.path_for(tmp_path, "genai", "z-cpu-avx2", "b.json").write_text('{"case": 1}')
    assert per_cpu.kinds_recorded(tmp_path, "genai", "b.json",
                                  lambda p: "case" in p.read_text()) == ["z-cpu-avx2"]


def test_the_line_names_this_kind_the_others_and_how() -> None:
    line = per_cpu.absent("golden/genai/x-avx2/b.json", "bounds", "X, AVX2", ["y-avx512"],
                          "set them by hand")
    assert line == ("golden/genai/x-avx2/b.json: no bounds on this CPU kind (X, AVX2); recorded "
                    "on y-avx512, whose figures are not this kind's: set them by hand")
    assert "recorded on no CPU kind: measure this kind's with --qnn-update-golden" in (
        per_cpu.absent("a.json", "record", "X, AVX2", []))
