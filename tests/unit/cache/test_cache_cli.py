"""``python -m pytest_qnn_genai.cache ls | prune | rm``, run as a separate process."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_qnn_genai.cache import ArtifactCache, CacheEntry

VERSIONS = {"v": "1"}


def _cli(*args: str, xdg: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "QNN_GENAI_CACHE_DIR"}
    if xdg is not None:
        env["XDG_CACHE_HOME"] = str(xdg)
    return subprocess.run([sys.executable, "-m", "pytest_qnn_genai.cache", *args], env=env,
                          capture_output=True, text=True, timeout=60)


def _fill(cache_dir: Path, ages: dict[str, float], size: int = 10_000) -> dict[str, CacheEntry]:
    """Entries ``name`` (stage ``quantize``), last used ``ages[name]`` seconds ago."""
    cache = ArtifactCache(cache_dir / "artifacts", VERSIONS, progress=lambda _m: None)
    made = {name: cache.get_or_build("quantize", {"n": name},
                                     lambda out: (out / "a.bin").write_bytes(b"x" * size),
                                     label=f"stories260k {name}") for name in ages}
    now = time.time()
    for name, ago in ages.items():
        os.utime(made[name].path / "manifest.json", (now - ago, now - ago))
    return made


def _left(cache_dir: Path) -> list[str]:
    return sorted(p.name for p in (cache_dir / "artifacts" / "quantize").iterdir())


def test_ls_prints_a_table_from_the_default_cache_dir(tmp_path: Path) -> None:
    made = _fill(tmp_path / "pytest-qnn-genai", {"a": 3600, "b": 60})
    (made["b"].path / "manifest.json").write_text("{")  # damaged: still listed
    result = _cli("ls", xdg=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["STAGE", "KEY", "LABEL", "SIZE", "CREATED", "LAST", "USED"]
    row = {line.split()[1]: line for line in lines[1:-1]}
    assert row.keys() == {made["a"].key, made["b"].key}
    assert re.match(rf"quantize +{made['a'].key} +stories260k a +10\.\d kB ", row[made["a"].key])
    assert time.strftime("%Y-%m-%d %H:%M", time.localtime(time.time() - 3600)) in row[made["a"].key]
    assert "(damaged: unreadable manifest" in row[made["b"].key]
    assert lines[-1].startswith("2 entries, 20.") and lines[-1].endswith(
        str(tmp_path / "pytest-qnn-genai" / "artifacts"))


def test_rm_removes_entries_by_key_prefix_or_stage_and_key(tmp_path: Path) -> None:
    made = _fill(tmp_path, {"a": 0, "b": 0, "c": 0})
    result = _cli("--cache-dir", str(tmp_path), "rm", made["a"].key[:10],
                  f"quantize/{made['b'].key}")
    assert result.returncode == 0, result.stderr
    assert re.fullmatch(rf"removed quantize/{made['a'].key} stories260k a \(10\.\d kB\)\n"
                        rf"removed quantize/{made['b'].key} stories260k b \(10\.\d kB\)\n",
                        result.stdout)
    assert _left(tmp_path) == [made["c"].key]


def test_rm_of_an_unknown_key_removes_nothing(tmp_path: Path) -> None:
    made = _fill(tmp_path, {"a": 0})
    result = _cli("rm", made["a"].key, "feedface", "--cache-dir", str(tmp_path))
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr == ("python -m pytest_qnn_genai.cache: error: no cache entry matches "
                             f"'feedface' in {tmp_path / 'artifacts'}\n")
    assert _left(tmp_path) == [made["a"].key]


def test_rm_of_an_ambiguous_prefix_removes_nothing(tmp_path: Path) -> None:
    cache = ArtifactCache(tmp_path / "artifacts", VERSIONS)
    by_digit: dict[str, list[int]] = {}
    for n in range(64):
        by_digit.setdefault(cache.key("quantize", {"n": str(n)})[0], []).append(n)
    twins = next(ns for ns in by_digit.values() if len(ns) > 1)[:2]
    made = _fill(tmp_path, {str(n): 0 for n in twins})
    result = _cli("--cache-dir", str(tmp_path), "rm", made[str(twins[0])].key[0])
    assert result.returncode == 1 and len(result.stderr.splitlines()) == 1
    assert "matches 2 entries" in result.stderr and len(_left(tmp_path)) == 2


def test_prune_older_than_and_max_gb(tmp_path: Path) -> None:
    made = _fill(tmp_path, {"a": 40 * 86400, "b": 5 * 86400, "c": 3 * 86400, "d": 60})
    stray = tmp_path / "artifacts" / "quantize" / f".tmp-{made['a'].key}-killed"
    stray.mkdir()
    result = _cli("--cache-dir", str(tmp_path), "prune", "--older-than", "30")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == f"removed leftover quantize/{stray.name}"
    assert result.stdout.splitlines()[1].startswith(f"evicted quantize/{made['a'].key} ")
    assert _left(tmp_path) == sorted(made[n].key for n in "bcd")
    result = _cli("prune", "--max-gb", "0.000025", "--cache-dir", str(tmp_path))  # 25 kB
    assert result.returncode == 0, result.stderr
    assert _left(tmp_path) == sorted(made[n].key for n in "cd")  # b was the least recently used
    assert re.match(r"pruned 1 entries \(10\.\d kB\) and 0 leftovers; 2 entries, 20\.\d kB left",
                    result.stdout.splitlines()[-1])


@pytest.mark.parametrize("args", [["prune", "--max-gb", "-1"], ["prune", "--older-than", "soon"],
                                  ["frobnicate"], ["rm"], []])
def test_bad_arguments_give_one_line_and_exit_2(tmp_path: Path, args: list[str]) -> None:
    result = _cli("--cache-dir", str(tmp_path), *args)
    assert result.returncode == 2 and result.stdout == ""
    assert len(result.stderr.splitlines()) == 1 and "error:" in result.stderr


def test_push_fills_a_remote_cache_from_which_a_second_machine_builds_nothing(
        tmp_path: Path) -> None:
    """``push URL``: every local entry the remote lacks is uploaded (a second push uploads
    nothing); a machine with an empty cache then downloads each entry instead of building it."""
    from pytest_qnn_genai.cache.remote import open_remote

    made = _fill(tmp_path / "m1", {"a": 0, "b": 0})
    url = (tmp_path / "shared").as_uri()
    first = _cli("push", url, "--cache-dir", str(tmp_path / "m1"))
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines()[-1] == (
        f"2 pushed (20.0 kB), 0 already there, 0 damaged, to {url}")
    second = ArtifactCache(tmp_path / "m2" / "artifacts", VERSIONS, progress=lambda _m: None,
                           remote=open_remote(url))

    def never(_out: Path) -> None:
        raise AssertionError("built on the second machine")

    for name, entry in made.items():
        assert second.get_or_build("quantize", {"n": name}, never).digest == entry.digest
    assert (second.stats.builds, second.stats.downloaded) == (0, 2)
    again = _cli("push", url, "--cache-dir", str(tmp_path / "m1"))
    assert again.stdout.splitlines()[-1].startswith("0 pushed (0 B), 2 already there"), again.stdout


def test_push_leaves_a_damaged_entry_out_and_stops_at_an_unreachable_store(tmp_path: Path) -> None:
    made = _fill(tmp_path / "m1", {"a": 0, "b": 0})
    data = made["a"].path / "a.bin"
    data.write_bytes(b"y" + data.read_bytes()[1:])  # one byte flipped, the size kept
    url = (tmp_path / "shared").as_uri()
    run = _cli("push", url, "--cache-dir", str(tmp_path / "m1"))
    assert run.returncode == 1
    assert f"damaged quantize/{made['a'].key} stories260k a: a.bin does not match its manifest; " \
           "not pushed" in run.stdout.splitlines()
    assert run.stdout.splitlines()[-1].startswith("1 pushed"), run.stdout
    gone = _cli("push", "http://127.0.0.1:9/cache", "--cache-dir", str(tmp_path / "m1"))
    assert gone.returncode == 1 and len(gone.stderr.splitlines()) == 1, gone.stderr
    assert gone.stderr.startswith("python -m pytest_qnn_genai.cache: error: "), gone.stderr
