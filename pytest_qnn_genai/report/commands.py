"""``python -m pytest_qnn_genai.report merge DIR... --out DIR``: one report from a run's shards.

Each ``DIR`` is a shard's ``--qnn-report`` folder (holding one run), its run folder or its
``results.json`` (:func:`~pytest_qnn_genai.report.merge.find_results`). The merged run is written
into ``--out`` as ``--qnn-report`` writes one (``OUT/<date>/``: ``results.json``, ``summary.md``,
``summary.html``, the plots), "what changed" against ``--compare-to`` or else the newest earlier
run in ``--out``, the trend over every earlier run there. Exit status: 0 merged, 1 an unreadable
results file (one line), 2 bad arguments or a refused merge (one line).
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn, TextIO

from pytest_qnn_genai.report.merge import MergeError, load_shard, merge
from pytest_qnn_genai.report.results import ResultsFileError
from pytest_qnn_genai.report.write import load_baseline, write_report

PROG = "python -m pytest_qnn_genai.report"
DEFAULT_NOISE = 0.10  # --qnn-perf-noise's default, for shards whose fingerprint lacks it


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, not the usage block
        self.exit(2, f"{self.prog}: error: {message}\n")


def parser() -> argparse.ArgumentParser:
    top = _Parser(prog=PROG, description="pytest-qnn-genai run reports.")
    sub = top.add_subparsers(dest="command", required=True, metavar="{merge}")
    cmd = sub.add_parser("merge", help="merge the reports of a run's shards (--qnn-shard K/N) "
                                       "into the report one run would have made")
    cmd.add_argument("shards", nargs="+", type=Path, metavar="DIR",
                     help="a shard's --qnn-report folder (one run in it), run folder or "
                          "results.json; every shard of the run, once")
    cmd.add_argument("--out", type=Path, required=True, metavar="DIR",
                     help="the report folder to write the merged run into (as --qnn-report)")
    cmd.add_argument("--compare-to", type=Path, metavar="PATH",
                     help="an earlier results.json (or its folder) for 'what changed' (default: "
                          "the newest earlier run in --out)")
    return top


def cmd_merge(args: argparse.Namespace, out: TextIO) -> int:
    shards = [load_shard(p) for p in args.shards]
    merged = merge(shards)
    baseline = None if args.compare_to is None else load_baseline(args.compare_to)
    settings = merged.header.fingerprint.get("settings") or {}
    noise = float(settings.get("perf_noise", DEFAULT_NOISE))
    folder, written, _ = write_report(args.out, merged, baseline, noise,
                                      None if args.compare_to is None else str(args.compare_to))
    counts = ", ".join(f"{n} {v}" for v, n in merged.counts().items())
    out.write(f"merged {len(shards)} shards ({len(merged.records)} records; figures: {counts}) "
              f"into {folder}: {', '.join(p.name for p in written)}\n")
    return 0


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return cmd_merge(args, out or sys.stdout)
    except MergeError as e:
        sys.stderr.write(f"{PROG} merge: refused: {e}\n")
        return 2
    except (ResultsFileError, OSError) as e:
        sys.stderr.write(f"{PROG} merge: error: {e}\n")
        return 1
