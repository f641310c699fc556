"""The one report of a sharded run: the shards' ``results.json`` merged into the report a single
run would have made (``python -m pytest_qnn_genai.report merge``, :mod:`.commands`).

Each shard (``--qnn-shard K/N --qnn-report DIR``) keeps what it took in its fingerprint
(``fingerprint["shard"]``: K/N, its combinations, the run's totals, a digest of every collected
test id; :class:`~pytest_qnn_genai.shards.Selection`). The merge refuses, in one line each
(:class:`MergeError`): a results file that is no shard's, shards of different splits (K/N vs
K/M), a shard given twice, a missing shard, different harness commits, different tool versions
(executorch, torch, QAIRT, ...), different settings or model cases, different collections (the
shards were run with other paths or options, so their shares need not cover the run), and a
combination claimed by two shards.

The merged file: the records concatenated in shard order; the header of shard 1 dated at the
earliest shard's start (the run began then); the fingerprint's versions, settings and cases (all
equal), the harness marked dirty if any shard's tree was, the artifacts' union (one entry per
stage and key: two shards that each built a shared entry, e.g. upstream's runners, keep shard
order's first), no ``shard`` section, and ``merged`` naming the shards. Verdict counts, the
summary's "what changed" and the plots are computed from it as from any run
(:func:`~pytest_qnn_genai.report.write.write_report`).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_qnn_genai.report.fingerprint import differences
from pytest_qnn_genai.report.results import RESULTS_NAME, Header, ResultsFile
from pytest_qnn_genai.shards import Selection, ShardError
from pytest_qnn_genai.untyped import Json

if TYPE_CHECKING:
    from pytest_qnn_genai.cache.stats import UsedEntry

_SHORT = 12  # characters of a commit shown


class MergeError(ValueError):
    """The given results cannot make one run's report (one line saying why)."""


@dataclass(frozen=True)
class ShardRun:
    """One shard's results file and what it took."""

    path: Path
    results: ResultsFile
    selection: Selection

    @property
    def name(self) -> str:
        return f"shard {self.selection.shard} ({self.path})"


def find_results(path: Path) -> Path:
    """A ``results.json``, a folder holding one, or a ``--qnn-report`` folder holding exactly one
    run (``DIR/<date>/results.json``)."""
    path = Path(path)
    if path.is_file():
        return path
    if not path.is_dir():
        raise MergeError(f"{path}: no such file or folder")
    if (path / RESULTS_NAME).is_file():
        return path / RESULTS_NAME
    runs = sorted(path.glob(f"*/{RESULTS_NAME}"))
    if len(runs) == 1:
        return runs[0]
    if not runs:
        raise MergeError(f"{path}: no {RESULTS_NAME} in it or in its sub-folders")
    names = ", ".join(p.parent.name for p in runs)
    raise MergeError(f"{path} holds {len(runs)} runs ({names}): name the folder of one")


def load_shard(path: Path) -> ShardRun:
    """One shard's results (a :class:`MergeError` or ``ResultsFileError`` line if it is none)."""
    found = find_results(path)
    results = ResultsFile.load(found)
    data = results.header.fingerprint.get("shard")
    if data is None:
        raise MergeError(f"{found}: not a shard's results (no shard in its fingerprint: run it "
                         "with --qnn-shard K/N --qnn-report DIR)")
    try:
        selection = Selection.from_dict(data)
    except ShardError as e:
        raise MergeError(f"{found}: {e}") from None
    return ShardRun(found, results, selection)


def _check_split(shards: Sequence[ShardRun]) -> None:
    first = shards[0]
    count = first.selection.shard.count
    for s in shards[1:]:
        if s.selection.shard.count != count:
            raise MergeError(f"shards of different splits: {first.name} vs {s.name}")
    seen: dict[int, ShardRun] = {}
    for s in shards:
        k = s.selection.shard.index
        if k in seen:
            raise MergeError(f"shard {s.selection.shard} given twice: {seen[k].path} and {s.path}")
        seen[k] = s
    missing = [f"{k}/{count}" for k in range(1, count + 1) if k not in seen]
    if missing:
        raise MergeError(f"shard{'s' if len(missing) > 1 else ''} {', '.join(missing)} missing "
                         f"(given: {', '.join(str(s.selection.shard) for s in shards)}): every "
                         f"shard of {count} must be merged")


def _commit(run: ShardRun) -> str:
    harness = run.results.header.fingerprint.get("harness") or {}
    return str(harness.get("commit") or run.results.header.git_sha or "unknown")


def _check_same_code(shards: Sequence[ShardRun]) -> None:
    first = shards[0]
    for s in shards[1:]:
        if _commit(s) != _commit(first):
            raise MergeError(f"shards of different harness commits: {first.name} ran "
                             f"{_commit(first)[:_SHORT]}, {s.name} ran {_commit(s)[:_SHORT]}")
        a, b = first.results.header.versions, s.results.header.versions
        for tool in sorted(a.keys() | b.keys()):
            if a.get(tool) != b.get(tool):
                raise MergeError(f"shards of different {tool} versions: {first.name} ran "
                                 f"{a.get(tool) or 'none'}, {s.name} ran {b.get(tool) or 'none'}")


def _check_same_run(shards: Sequence[ShardRun]) -> None:
    first = shards[0]
    fp = first.results.header.fingerprint
    for s in shards[1:]:
        other = s.results.header.fingerprint
        diffs = differences({"settings": fp.get("settings"), "cases": fp.get("cases")},
                            {"settings": other.get("settings"), "cases": other.get("cases")})
        if diffs:
            d = diffs[0]
            raise MergeError(f"shards run with different options: {d.what} is {d.previous} in "
                             f"{first.name}, {d.current} in {s.name}")
        a, b = first.selection, s.selection
        if (a.collected, a.total_tests) != (b.collected, b.total_tests):
            raise MergeError(f"shards collected different tests: {first.name} {a.total_tests} "
                             f"tests (digest {a.collected or '?'}), {s.name} {b.total_tests} "
                             f"(digest {b.collected or '?'}): run every shard with the same "
                             "paths and options")
    owner: dict[str, ShardRun] = {}
    for s in shards:
        for combo in s.selection.combinations:
            if combo in owner:
                raise MergeError(f"combination {combo} run by {owner[combo].name} and {s.name}")
            owner[combo] = s
    total = first.selection.total_combinations
    if len(owner) != total:
        raise MergeError(f"the shards ran {len(owner)} of the run's {total} combinations")


def check(shards: Sequence[ShardRun]) -> list[ShardRun]:
    """The shards in order 1..N, or a :class:`MergeError` (module docstring)."""
    if not shards:
        raise MergeError("no shard given")
    _check_split(shards)
    ordered = sorted(shards, key=lambda s: s.selection.shard)
    _check_same_code(ordered)
    _check_same_run(ordered)
    return ordered


def _fingerprint(shards: Sequence[ShardRun]) -> dict[str, Json]:
    prints = [s.results.header.fingerprint for s in shards]
    merged = {k: v for k, v in prints[0].items() if k != "shard"}
    harness = dict(prints[0].get("harness") or {})
    if any((p.get("harness") or {}).get("dirty") for p in prints):
        harness["dirty"] = True
    merged["harness"] = harness
    artifacts: dict[tuple[str, str], UsedEntry] = {}
    for p in prints:
        for a in p.get("artifacts", []):
            artifacts.setdefault((a["stage"], a["key"]), a)
    merged["artifacts"] = sorted(artifacts.values(),
                                 key=lambda a: (a["stage"], a["label"], a["key"]))
    merged["merged"] = {"shards": len(shards),
                        "lines": [s.selection.line() for s in shards]}
    return merged


def merge(shards: Sequence[ShardRun]) -> ResultsFile:
    """One run's results from its shards (checked by :func:`check`)."""
    ordered = check(shards)
    first: Header = ordered[0].results.header
    start = min(ordered, key=lambda s: s.results.header.when).results.header.date
    header = replace(first, date=start, fingerprint=_fingerprint(ordered))
    return ResultsFile(header, [r for s in ordered for r in s.results.records])
