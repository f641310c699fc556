"""The model cases a run can select: the package's own and those in folders given by the user.

A case is a folder with a ``case.json`` (:mod:`pytest_qnn_genai.models.case`). The package ships
its default cases next to this module; ``--qnn-cases DIR`` (repeatable) adds every ``*/case.json``
one level below each DIR. Without names, a run takes the cases of its tier (``case.json``'s
``tier``: ``nightly`` ones only with ``--nightly``); a name selects its case whatever its tier.
A name used twice, a missing file, a checkpoint whose shapes disagree
with its params and a ``decoder_model`` no family serves are each one :class:`ModelCaseError`
line naming the case.
"""
from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from pytest_qnn_genai.models.case import (
    FLOW_VARIANTS,
    KV_IO_BIT_WIDTHS,
    RUNTIME_FIELDS,
    TIERS,
    VARIANT_FIELDS,
    VARIANT_SEPARATOR,
    ModelCase,
    ModelCaseError,
    load_case,
)

MODELS_DIR = Path(__file__).parent
DEFAULT_TIER = TIERS[0]

__all__ = ["DEFAULT_TIER", "FLOW_VARIANTS", "KV_IO_BIT_WIDTHS", "MODELS_DIR", "RUNTIME_FIELDS",
           "TIERS", "VARIANT_FIELDS", "VARIANT_SEPARATOR", "ModelCase", "ModelCaseError",
           "available", "load_case", "load_cases", "select"]


def _case_folders(folder: Path) -> list[Path]:
    return sorted(p.parent for p in folder.glob("*/case.json") if p.is_file())


def load_cases(folders: Iterable[Path], *, packaged: bool = False) -> dict[str, ModelCase]:
    """Every case in ``*/case.json`` below each of ``folders``, by name. A folder that does not
    exist or holds no case, and a name two cases share, are one line each."""
    cases: dict[str, ModelCase] = {}
    for folder in folders:
        folder = Path(folder)
        if not folder.is_dir():
            raise ModelCaseError(f"model case folder {folder} does not exist")
        found = _case_folders(folder)
        if not found:
            raise ModelCaseError(f"model case folder {folder} holds no */case.json")
        for sub in found:
            case = load_case(sub, packaged=packaged)
            if case.name in cases:
                raise ModelCaseError(
                    f"model case {case.name} ({sub / 'case.json'}): the name is taken by "
                    f"{cases[case.name].folder / 'case.json'}")
            cases[case.name] = case
    return cases


def available(case_dirs: Iterable[Path] = ()) -> dict[str, ModelCase]:
    """The package's cases, then those below ``case_dirs`` (``--qnn-cases``), by name."""
    cases = load_cases([MODELS_DIR], packaged=True)
    for name, case in load_cases(case_dirs).items():
        if name in cases:
            raise ModelCaseError(f"model case {name} ({case.folder / 'case.json'}): the name is "
                                 f"taken by the package's case {name}")
        cases[name] = case
    return cases


def select(names: list[str], case_dirs: Iterable[Path] = (), *,
           nightly: bool = False) -> list[ModelCase]:
    """The named cases, whatever their tier; when ``names`` is empty, every ``default``-tier case
    and, with ``nightly``, the ``nightly`` ones too. Unknown names raise :class:`ModelCaseError`."""
    cases = available(case_dirs)
    if not names:
        return [c for c in cases.values() if c.tier == DEFAULT_TIER or nightly]
    unknown = [n for n in names if n not in cases]
    if unknown:
        raise ModelCaseError(
            f"unknown model case(s) {', '.join(unknown)}; available: {', '.join(cases)}")
    return [cases[n] for n in names]
