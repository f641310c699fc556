"""``python -m pytest_qnn_genai.report merge``: the shards of a real run (its records split over
two shard files, each with its own share of the artifacts) merge back into that run's records,
counts and fingerprint, with "what changed" against the previous run in ``--out``; every
refusal is one line and writes nothing."""
from __future__ import annotations

import copy
import io
import json
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from pathlib import Path

import pytest

from pytest_qnn_genai.report.commands import main
from pytest_qnn_genai.report.results import RESULTS_NAME, ResultsFile, run_dir
from pytest_qnn_genai.shards import Selection, Shard
from pytest_qnn_genai.untyped import Json
from tests.support.report_runs import changed_run, real_run

REFUSED = "python -m pytest_qnn_genai.report merge: refused: "
Data = dict[str, Json]


def _shard_data(run: ResultsFile, k: int, count: int = 2) -> Data:
    """Shard ``k`` of ``run``: its records of every ``count``-th position, the artifacts of its
    half (the middle two in both), started ``count - k`` minutes after the run."""
    data: Data = copy.deepcopy(run.to_dict())
    data["records"] = data["records"][k - 1::count]
    fp = data["header"]["fingerprint"]
    arts = fp["artifacts"]
    half = len(arts) // 2
    fp["artifacts"] = arts[:half + 1] if k == 1 else arts[half - 1:]
    data["header"]["date"] = (run.header.when + timedelta(minutes=count - k)).isoformat()
    fp["shard"] = Selection(Shard(k, count), (f"case{k} × SM8650-htp-emulator",), count,
                            len(data["records"]), len(run.records), (f"case{k} SM8650-htp",),
                            0, "digest-of-the-collection").to_dict()
    return data


def _write(root: Path, data: Data) -> Path:
    run = ResultsFile.from_dict(data)
    folder = run_dir(root, run.header)
    run.write(folder / RESULTS_NAME)
    return root


def _merge(*args: str | Path) -> tuple[int, str]:
    out = io.StringIO()
    return main(["merge", *map(str, args)], out=out), out.getvalue()


def _sorted(records: Sequence[Mapping[str, object]]) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True) for r in records)


def test_the_shards_merge_into_the_run(tmp_path: Path) -> None:
    run = real_run()
    one = _write(tmp_path / "shard-1", _shard_data(run, 1))
    two = _write(tmp_path / "shard-2", _shard_data(run, 2))
    rc, said = _merge(two, one, "--out", tmp_path / "out")  # any order
    assert rc == 0, said
    [folder] = (tmp_path / "out").iterdir()
    merged = ResultsFile.load(folder / RESULTS_NAME)
    assert _sorted([r.to_dict() for r in merged.records]) == _sorted(
        [r.to_dict() for r in run.records])
    assert [r.test for r in merged.records[:2]] == [run.records[0].test, run.records[2].test]
    assert merged.counts() == run.counts()
    fp, original = merged.header.fingerprint, run.header.fingerprint
    assert fp["artifacts"] == original["artifacts"]  # the union, each entry once
    assert {k: fp[k] for k in ("versions", "harness", "settings", "cases")} == {
        k: original[k] for k in ("versions", "harness", "settings", "cases")}
    assert "shard" not in fp and fp["merged"]["shards"] == 2
    assert merged.header.date == run.header.date  # shard 2 started first
    assert merged.header.versions == run.header.versions
    counts = ", ".join(f"{n} {v}" for v, n in run.counts().items())
    assert said == (f"merged 2 shards ({len(run.records)} records; figures: {counts}) into "
                    f"{folder}: results.json, summary.md, summary.html, speed.png, trend.png\n")
    md = (folder / "summary.md").read_text()
    assert "| merged from | 2 shards: shard 1/2: 1 of 2 combinations" in md
    assert "No earlier run to compare with" in md


def test_what_changed_against_the_previous_run_in_out_or_compare_to(tmp_path: Path) -> None:
    run = real_run()
    one = _write(tmp_path / "s1", _shard_data(run, 1))
    two = _write(tmp_path / "s2", _shard_data(run, 2))
    previous = changed_run("kHtpHighPerformance", decode_scale=1.0, days=-1)  # yesterday
    _write(tmp_path / "out", previous.to_dict())
    assert _merge(one, two, "--out", tmp_path / "out")[0] == 0
    md = (run_dir(tmp_path / "out", run.header) / "summary.md").read_text()
    assert f"## What changed since {previous.header.date[:10]}" in md
    assert "performance_mode | kHtpHighPerformance | kHtpBurst |" in md
    elsewhere = tmp_path / "baseline.json"
    changed_run("kHtpSustainedHighPerformance", decode_scale=1.0, days=-2).write(elsewhere)
    assert _merge(one, two, "--out", tmp_path / "out2", "--compare-to", elsewhere)[0] == 0
    md = (run_dir(tmp_path / "out2", run.header) / "summary.md").read_text()
    assert f"Compared with {elsewhere}" in md and "kHtpSustainedHighPerformance" in md


def test_a_dirty_shard_makes_the_merged_harness_dirty(tmp_path: Path) -> None:
    run = real_run()
    two = _shard_data(run, 2)
    two["header"]["fingerprint"]["harness"]["dirty"] = True
    paths = [_write(tmp_path / "s1", _shard_data(run, 1)), _write(tmp_path / "s2", two)]
    assert _merge(*paths, "--out", tmp_path / "out")[0] == 0
    merged = ResultsFile.load(run_dir(tmp_path / "out", run.header) / RESULTS_NAME)
    assert merged.header.fingerprint["harness"]["dirty"] is True


def _set(*path: str, value: Json) -> Callable[[Data], None]:
    def change(data: Data) -> None:
        node = data
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return change


def _drop_shard(data: Data) -> None:
    del data["header"]["fingerprint"]["shard"]


def _also_versions(tool: str, version: str) -> Callable[[Data], None]:
    def change(data: Data) -> None:
        data["header"]["versions"][tool] = version
        data["header"]["fingerprint"]["versions"][tool] = version
    return change


SHARD = ("header", "fingerprint", "shard")
REFUSALS = {  # a change to shard 2, what the one line says
    "not a shard": (_drop_shard, "not a shard's results (no shard in its fingerprint: run it "
                                 "with --qnn-shard K/N --qnn-report DIR)"),
    "another split": (_set(*SHARD, "shard", value="2/3"), "shards of different splits: shard "
                                                          "1/2 ("),
    "harness commit": (_set("header", "fingerprint", "harness", "commit", value="f" * 40),
                       "shards of different harness commits: shard 1/2 ("),
    "executorch": (_also_versions("executorch", "1.6.0"),
                   "shards of different executorch versions: shard 1/2 ("),
    "torch": (_also_versions("torch", "2.14.0+cpu"), "shards of different torch versions"),
    "qairt": (_also_versions("qairt", "2.52.0-emulator"), "shards of different qairt versions"),
    "settings": (_set("header", "fingerprint", "settings", "socs", value=["SM8750"]),
                 "shards run with different options: setting socs is "),
    "collection": (_set(*SHARD, "collected", value="another-digest"),
                   "shards collected different tests: shard 1/2 ("),
    "a combination twice": (_set(*SHARD, "combinations", value=["case1 × SM8650-htp-emulator"]),
                            "combination case1 × SM8650-htp-emulator run by shard 1/2 ("),
    "a combination nowhere": (_set(*SHARD, "combinations", value=[]),
                              "the shards ran 1 of the run's 2 combinations"),
}


@pytest.mark.parametrize("name", list(REFUSALS))
def test_refusals_are_one_line_and_write_nothing(tmp_path: Path, name: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    change, says = REFUSALS[name]
    run = real_run()
    two = _shard_data(run, 2)
    change(two)
    paths = [_write(tmp_path / "s1", _shard_data(run, 1)), _write(tmp_path / "s2", two)]
    rc, said = _merge(*paths, "--out", tmp_path / "out")
    err = capsys.readouterr().err
    assert (rc, said) == (2, "")
    assert err.startswith(REFUSED) and says in err and err.count("\n") == 1, err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("given", "says"), [
    ((1, 1), "shard 1/2 given twice: "),
    ((1,), "shard 2/2 missing (given: 1/2): every shard of 2 must be merged"),
    ((2,), "shard 1/2 missing (given: 2/2)"),
])
def test_a_shard_twice_or_missing_is_refused(tmp_path: Path, given: tuple[int, ...], says: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    run = real_run()
    paths = {k: _write(tmp_path / f"s{k}", _shard_data(run, k)) for k in (1, 2)}
    rc, _ = _merge(*(paths[k] for k in given), "--out", tmp_path / "out")
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith(REFUSED + says) and err.count("\n") == 1, err
    assert not (tmp_path / "out").exists()


def test_three_missing_of_four_are_named(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path / "s2", _shard_data(real_run(), 2, count=4))
    assert _merge(path, "--out", tmp_path / "out")[0] == 2
    assert capsys.readouterr().err == (f"{REFUSED}shards 1/4, 3/4, 4/4 missing (given: 2/4): "
                                       "every shard of 4 must be merged\n")


def test_unusable_inputs_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = real_run()
    root = _write(tmp_path / "two-runs", _shard_data(run, 1))
    later = _shard_data(run, 1)
    later["header"]["date"] = (run.header.when + timedelta(days=1)).isoformat()
    _write(root, later)
    assert _merge(root, "--out", tmp_path / "out")[0] == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{REFUSED}{root} holds 2 runs (") and err.count("\n") == 1, err
    assert _merge(tmp_path / "nowhere", "--out", tmp_path / "out")[0] == 2
    assert capsys.readouterr().err == f"{REFUSED}{tmp_path / 'nowhere'}: no such file or folder\n"
    bad = tmp_path / "bad" / RESULTS_NAME
    bad.parent.mkdir()
    bad.write_text("{")
    assert _merge(bad.parent, "--out", tmp_path / "out")[0] == 1
    err = capsys.readouterr().err
    assert err.startswith("python -m pytest_qnn_genai.report merge: error: ") and \
        err.count("\n") == 1, err
    assert not (tmp_path / "out").exists()
