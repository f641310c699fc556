"""Golden files measured on one CPU kind: ``golden/<subdir>/<cpu>/<file>``.

Contract. A figure measured from builds and references computed on this machine (an accepted
record, genai's measured window bounds) lives in the folder of the CPU kind that measured it
(``<cpu>``: :attr:`pytest_qnn_genai.cpu.CpuKind.slug`); a run reads only its own kind's file.
:func:`absent` is the one line a test fails with when its kind has no file where other kinds
have one.

Hazard. The same build computed on another CPU kind gives other printed digits (the docs'
measurements page, "Builds depend on the CPU"): another kind's file is not this kind's truth,
and falling back to none would hold the figures to the floors alone, so a missing kind fails.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path


def path_for(golden_dir: Path, subdir: str, cpu: str, name: str) -> Path:
    """``golden_dir/subdir/cpu/name``: ``name`` as measured on the CPU kind ``cpu`` (a slug)."""
    return golden_dir / subdir / cpu / name


def kinds_recorded(golden_dir: Path, subdir: str, name: str,
                   holds: Callable[[Path], bool] | None = None) -> list[str]:
    """The CPU kinds (slugs) that have ``name`` under ``golden_dir/subdir`` (and, given
    ``holds``, whose file holds what is asked: one case of a file of many), sorted."""
    folder = golden_dir / subdir
    if not folder.is_dir():
        return []
    return sorted(d.name for d in folder.iterdir()
                  if (d / name).is_file() and (holds is None or holds(d / name)))


def absent(source: str, what: str, label: str, others: Sequence[str],
           how: str = "measure this kind's with --qnn-update-golden") -> str:
    """The line for ``what`` missing at ``source`` on this CPU kind (``label``), naming the
    ``others`` that have it and ``how`` to make this kind's."""
    where = (f"recorded on {', '.join(others)}, whose figures are not this kind's" if others
             else "recorded on no CPU kind")
    return f"{source}: no {what} on this CPU kind ({label}); {where}: {how}"
