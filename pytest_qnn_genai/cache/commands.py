"""``python -m pytest_qnn_genai.cache``: list, prune, remove and push artifact cache entries.

- ``ls``: one row per entry (stage, key, label, size, created, last used; local time), then a
  total. Reads manifests only: it does not check the entries' files.
- ``prune [--max-gb X] [--older-than DAYS]``: removes leftovers of killed builds, then entries
  unused for DAYS, then least-recently-used entries until the cache fits X GB (10⁹ bytes).
- ``rm KEY [KEY...]``: removes entries by key, unique key prefix, or ``stage/key``. Every KEY is
  resolved first: if one is unknown or ambiguous nothing is removed.
- ``push URL [--stage S ...]``: uploads every entry the remote cache at URL (as
  ``--qnn-remote-cache``) lacks, files first, then the manifest, so that a machine that built
  the entries before the remote existed can fill it. Every file is checked against its manifest
  first: a damaged entry is named and not uploaded (the command then exits 1). A store that
  cannot be reached or refuses writes stops the command (one line, exit 1).

``--cache-dir`` is the plugin's cache directory (as ``--qnn-cache-dir``); entries live in its
``artifacts/`` folder. Default: ``$QNN_GENAI_CACHE_DIR``, else ``$XDG_CACHE_HOME/pytest-qnn-genai``,
else ``~/.cache/pytest-qnn-genai``. Exit status: 0 done, 1 a cache error (one line), 2 bad
arguments (one line).

Hazard: run ``prune``/``rm`` between sessions. Entries whose key is locked (being built or
repaired) are skipped or refused, but an entry a running session found earlier and still reads
from can be removed under it.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn, TextIO

from pytest_qnn_genai.cache.housekeeping import (
    CacheBusy,
    EntryInfo,
    entries,
    evict,
    format_bytes,
    remove,
    sweep,
)
from pytest_qnn_genai.cache.layout import MANIFEST, Manifest, read_manifest
from pytest_qnn_genai.cache.stats import CacheStats
from pytest_qnn_genai.files import file_sha256
from pytest_qnn_genai.settings import artifacts_dir, default_cache_dir

PROG = "python -m pytest_qnn_genai.cache"


class CommandError(Exception):
    """A request the cache cannot satisfy (unknown key, locked entry)."""


def _when(seconds: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(seconds)) if seconds else "-"


def _table(rows: list[list[str]], out: TextIO) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        out.write("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() + "\n")


def cmd_ls(root: Path, args: argparse.Namespace, out: TextIO) -> int:
    infos = sorted(entries(root), key=lambda i: (i.stage, i.created or 0, i.key))
    if infos:
        _table([["STAGE", "KEY", "LABEL", "SIZE", "CREATED", "LAST USED"]]
               + [[i.stage, i.key, i.label or (f"(damaged: {i.damaged})" if i.damaged else "-"),
                   format_bytes(i.size), _when(i.created), _when(i.last_used)] for i in infos],
               out)
    total = sum(i.size for i in infos)
    out.write(f"{len(infos)} entries, {format_bytes(total)} in {root}\n")
    return 0


def cmd_prune(root: Path, args: argparse.Namespace, out: TextIO) -> int:
    leftovers = sweep(root)
    for p in leftovers:
        out.write(f"removed leftover {p.parent.name}/{p.name}\n")

    def said(info: EntryInfo) -> None:
        out.write(f"evicted {info.name} {info.label or '-'} ({format_bytes(info.size)}, "
                  f"last used {_when(info.last_used)})\n")

    result = evict(root, on_evict=said,
                   max_bytes=None if args.max_gb is None else int(args.max_gb * 1e9),
                   unused_before=None if args.older_than is None
                   else time.time() - args.older_than * 86400)
    freed = sum(i.size for i in result.evicted)
    left = len(entries(root))
    out.write(f"pruned {len(result.evicted)} entries ({format_bytes(freed)}) and {len(leftovers)} "
              f"leftovers; {left} entries, {format_bytes(result.total)} left in {root}\n")
    if args.max_gb is not None and result.total > args.max_gb * 1e9:
        raise CommandError(f"still {format_bytes(result.total)} > {args.max_gb:g} GB: the rest "
                           "is in use or being built")
    return 0


def resolve(root: Path, spec: str, infos: Sequence[EntryInfo]) -> EntryInfo:
    """The one entry ``spec`` names: a key, a unique key prefix, or ``stage/key``."""
    stage, _, key = spec.rpartition("/")
    found = [i for i in infos if i.key.startswith(key) and (not stage or i.stage == stage)] \
        if key else []
    if not found:
        raise CommandError(f"no cache entry matches {spec!r} in {root}")
    if len(found) > 1:
        names = ", ".join(i.name for i in found[:3]) + (", ..." if len(found) > 3 else "")
        raise CommandError(f"{spec!r} matches {len(found)} entries ({names}); give more of the key")
    return found[0]


def cmd_rm(root: Path, args: argparse.Namespace, out: TextIO) -> int:
    infos = entries(root)
    chosen: dict[str, EntryInfo] = {}
    for spec in args.keys:
        info = resolve(root, spec, infos)
        chosen[info.name] = info
    for info in chosen.values():
        try:
            remove(info)
        except CacheBusy as e:
            raise CommandError(str(e)) from None
        out.write(f"removed {info.name} {info.label or '-'} ({format_bytes(info.size)})\n")
    return 0


def _damage(info: EntryInfo, manifest: Manifest) -> str:
    """Why ``info``'s files do not match ``manifest``, its own ("" when they all do). The same
    check as ``ArtifactCache._check``, which this module cannot call: moving it out of the store
    changes the code digest in every cache key."""
    for name, meta in manifest["files"].items():
        path = info.path / name
        if not path.is_file() or path.stat().st_size != meta["size"] \
                or file_sha256(path) != meta["sha256"]:
            return f"{name} does not match its manifest"
    return ""


def cmd_push(root: Path, args: argparse.Namespace, out: TextIO) -> int:
    from pytest_qnn_genai.cache.remote import RemoteConfigError, open_remote
    from pytest_qnn_genai.cache.remote.base import RemoteError, manifest_path
    from pytest_qnn_genai.cache.remote.mirror import RemoteMirror

    try:
        store = open_remote(args.url)
    except RemoteConfigError as e:
        raise CommandError(str(e)) from None
    said: list[str] = []
    mirror = RemoteMirror(store, CacheStats(), said.append)
    pushed = there = damaged = 0
    with tempfile.TemporaryDirectory() as tmp:
        for info in entries(root):
            if args.stage and info.stage not in args.stage:
                continue
            try:  # what the remote has is not read or hashed here
                have = store.get(manifest_path(info.stage, info.key), Path(tmp) / MANIFEST)
            except RemoteError as e:
                raise CommandError(str(e)) from None
            if have:
                there += 1
                continue
            manifest = None if info.damaged else read_manifest(info.path)
            why = info.damaged if manifest is None else _damage(info, manifest)
            if why or manifest is None:
                damaged += 1
                out.write(f"damaged {info.name} {info.label or '-'}: {why}; not pushed\n")
                continue
            mirror.upload(info.path, manifest)
            if said:  # unreachable or refusing writes: nothing more can be pushed
                raise CommandError(said[0])
            pushed += 1
            out.write(f"pushed {info.name} {info.label or '-'} ({format_bytes(info.size)})\n")
    out.write(f"{pushed} pushed ({format_bytes(mirror.stats.bytes_uploaded)}), {there} already "
              f"there, {damaged} damaged, to {store.describe()}\n")
    return 1 if damaged else 0


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, not the usage block
        self.exit(2, f"{self.prog}: error: {message}\n")


def _amount(raw: str) -> float:
    """A finite number >= 0 (GB, days)."""
    try:
        value = float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {raw!r}") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {raw!r}")
    return value


def parser() -> argparse.ArgumentParser:
    common = _Parser(add_help=False)
    common.add_argument("--cache-dir", type=Path, default=argparse.SUPPRESS, metavar="DIR",
                        help="the plugin's cache directory (default: $QNN_GENAI_CACHE_DIR, else "
                             "$XDG_CACHE_HOME/pytest-qnn-genai or ~/.cache/pytest-qnn-genai)")
    top = _Parser(prog=PROG, parents=[common],
                  description="List, prune and remove pytest-qnn-genai artifact cache entries.")
    sub = top.add_subparsers(dest="command", required=True, metavar="{ls,prune,rm,push}")
    sub.add_parser("ls", parents=[common], help="list entries").set_defaults(run=cmd_ls)
    prune = sub.add_parser("prune", parents=[common], help="remove leftovers, old and LRU entries")
    prune.add_argument("--max-gb", type=_amount, metavar="X",
                       help="evict least-recently-used entries until the cache fits X GB")
    prune.add_argument("--older-than", type=_amount, metavar="DAYS",
                       help="remove entries not used for DAYS days")
    prune.set_defaults(run=cmd_prune)
    rm = sub.add_parser("rm", parents=[common], help="remove entries by key")
    rm.add_argument("keys", nargs="+", metavar="KEY", help="a key, unique key prefix or stage/key")
    rm.set_defaults(run=cmd_rm)
    push = sub.add_parser("push", parents=[common], help="upload entries a remote cache lacks")
    push.add_argument("url", metavar="URL", help="the remote cache (as --qnn-remote-cache)")
    push.add_argument("--stage", action="append", metavar="S",
                      help="only this stage's entries (repeatable; default: every stage)")
    push.set_defaults(run=cmd_push)
    return top


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    args = parser().parse_args(argv)
    cache_dir = getattr(args, "cache_dir", None) or default_cache_dir()
    run: Callable[[Path, argparse.Namespace, TextIO], int] = args.run
    try:
        return run(artifacts_dir(cache_dir.expanduser()), args, out or sys.stdout)
    except (CommandError, OSError) as e:
        sys.stderr.write(f"{PROG}: error: {e}\n")
        return 1
