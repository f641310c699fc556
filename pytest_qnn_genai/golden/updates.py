"""The one way a committed expectation changes: :func:`write`, which writes atomically, says what
changed one line per figure, and journals the write so the run reports the test as *updated*.

Every writer of a golden file (continuations, perf floors, an accepted record) calls
:func:`write`; syrupy's snapshots are the one exception (syrupy writes them itself) and the plugin
reads their changes from syrupy's assertions instead. The hazard this guards: a test that rewrote
its golden and then judged the run against what it had just written passed by construction, so
an update run read "passed" and its diff went unreviewed. A test that wrote must therefore return
without judging, and the plugin turns its pass into ``updated`` (:func:`take` drains the journal
after each test phase; the journal is per process, as pytest runs one test at a time per process).

:class:`Change` lines come from the file's JSON (one line per changed leaf: ``targets.SM8650.htp.
decode_tok_s: 1600 -> 1750``) or, for other text, one line per changed line of the file.
"""
from __future__ import annotations

import difflib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pytest_qnn_genai.files import write_text_atomic
from pytest_qnn_genai.sequences import first_difference

_SHOWN = 72  # characters of a value a change line shows


class GoldenWriteRefused(PermissionError):
    """A golden file write was attempted without the explicit update flag."""


@dataclass(frozen=True)
class Change:
    """One changed figure (or line) of a golden file; ``None`` is "absent"."""

    where: str
    old: str | None
    new: str | None

    def line(self) -> str:
        return f"{self.where}: {_cut(self.old)} -> {_cut(self.new)}"


@dataclass(frozen=True)
class Update:
    """What one :func:`write` did to one file: its changes and the unified diff."""

    path: Path
    changes: tuple[Change, ...]
    diff: str
    created: bool = False

    @property
    def changed(self) -> bool:
        return bool(self.changes)

    def lines(self) -> list[str]:
        """``<path>: created|unchanged`` or one ``<path> <where>: old -> new`` per change."""
        if not self.changes:
            return [f"{self.path}: unchanged"]
        head = [f"{self.path}: created"] if self.created else []
        return head + [f"{self.path} {c.line()}" for c in self.changes]


_JOURNAL: list[Update] = []


def write(path: Path, text: str, *, allow_write: bool) -> Update:
    """Atomically replace ``path`` with ``text`` (no write when unchanged) and journal the
    :class:`Update`; :class:`GoldenWriteRefused` unless ``allow_write`` (the update flag)."""
    if not allow_write:
        raise GoldenWriteRefused(f"{path}: golden files change only with --qnn-update-golden")
    old = path.read_text(encoding="utf-8") if path.exists() else None
    made = Update(path, tuple(changes(old, text)), unified_diff(path, old or "", text),
                  created=old is None)
    if made.changed:
        write_text_atomic(path, text)
    _JOURNAL.append(made)
    return made


def take() -> list[Update]:
    """The updates journalled since the last call (the plugin calls it after each test phase)."""
    out = list(_JOURNAL)
    _JOURNAL.clear()
    return out


def unified_diff(path: Path, old: str, new: str) -> str:
    """Unified diff of a file's text; "" when unchanged."""
    return "".join(difflib.unified_diff(old.splitlines(keepends=True),
                                        new.splitlines(keepends=True),
                                        fromfile=f"{path} (old)", tofile=f"{path} (new)"))


def changes(old: str | None, new: str) -> Iterator[Change]:
    """The changes from ``old`` (None: no file) to ``new``: per JSON leaf when both parse as
    JSON, else per changed line."""
    try:
        before: object = _ABSENT if old is None else json.loads(old)
        after: object = json.loads(new)
    except json.JSONDecodeError:
        yield from _line_changes(old or "", new)
        return
    yield from _json_changes("", before, after)


_ABSENT = object()  # a key the file does not have (JSON null is None)


def _json_changes(where: str, old: object, new: object) -> Iterator[Change]:
    if isinstance(new, dict) and (isinstance(old, dict) or old is _ABSENT):
        before = old if isinstance(old, dict) else {}
        for key in dict.fromkeys([*before, *new]):
            at = f"{where}.{key}" if where else str(key)
            yield from _json_changes(at, before.get(key, _ABSENT), new.get(key, _ABSENT))
    elif isinstance(old, dict) and new is _ABSENT:
        for key, value in old.items():
            yield from _json_changes(f"{where}.{key}" if where else str(key), value, _ABSENT)
    elif isinstance(old, list) and isinstance(new, list) and old != new:
        first = first_difference(old, new)
        yield Change(f"{where}[{first}:] (of {len(old)} -> {len(new)})", _show(old[first:]),
                     _show(new[first:]))
    elif old != new or type(old) is not type(new):
        yield Change(where or "(file)", _show(old), _show(new))


def _line_changes(old: str, new: str) -> Iterator[Change]:
    a, b = old.splitlines(), new.splitlines()
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        for k in range(max(i2 - i1, j2 - j1)):
            yield Change(f"line {(j1 if j1 + k < j2 else i1) + k + 1}",
                         a[i1 + k] if i1 + k < i2 else None, b[j1 + k] if j1 + k < j2 else None)


def _show(value: object) -> str | None:
    return None if value is _ABSENT else json.dumps(value, ensure_ascii=False)


def _cut(text: str | None) -> str:
    if text is None:
        return "(absent)"
    return text if len(text) <= _SHOWN else text[:_SHOWN - 3] + "..."
