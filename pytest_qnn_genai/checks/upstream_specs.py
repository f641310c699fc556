"""Upstream's own targets for a model it gates: ``LlmSpecs`` in executorch's
``backends/qualcomm/tests/test_qnn_delegate.py``, read from the installed executorch.

Contract: :func:`llm_specs` reads the entry of one ``--decoder_model`` name by parsing that file
(``ast``: it is a unittest module that needs a device and upstream's set-up, so nothing of it is
imported, and nothing is copied); :func:`counterpart` says which entry a case's weights are and
what differs in the measurement (the case folder's ``upstream.json``). The report sets a run's
figures beside them (:mod:`pytest_qnn_genai.report.upstream`).

The hazard: an upstream edit that moves or renames ``LlmSpecs`` would make the comparison vanish
silently; it is one :class:`UpstreamSpecsError` line naming the file instead, as is a damaged
``upstream.json``.
"""
from __future__ import annotations

import ast
import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_qnn_genai.models.registry import ModelCase
    from pytest_qnn_genai.targets import Target

COUNTERPART_FILE = "upstream.json"  # in a case folder: {"llm_specs": NAME, "differs": [...]}
UPSTREAM_CI = "upstream-ci"  # the variant that is upstream's CI job for a case's weights
DELEGATE_TESTS = Path("backends", "qualcomm", "tests", "test_qnn_delegate.py")
SPECS_CLASS = "LlmSpecs"

Spec = float | int | None


class UpstreamSpecsError(ValueError):
    """Upstream's specs or a case's counterpart file cannot be read (one line naming the file)."""


@dataclass(frozen=True)
class UpstreamSpecs:
    """One ``LlmSpecs`` entry: ``SM8650``/``SM8750`` tok/s floors on phones, ``pte_size`` bytes
    ceiling, ``wikitext_ppl`` ceiling, ``hellaswag_acc_norm`` and ``sqnr`` floors (None: none)."""

    model: str
    values: dict[str, Spec]
    source: str  # file:line of the entry


@dataclass(frozen=True)
class Counterpart:
    """Which upstream entry a case's weights are, and how this harness measures otherwise."""

    llm_specs: str
    differs: tuple[str, ...]


def delegate_tests_file() -> Path:
    """The installed executorch's ``test_qnn_delegate.py``."""
    spec = importlib.util.find_spec("executorch")
    if spec is None or not spec.submodule_search_locations:
        raise UpstreamSpecsError("executorch is not installed: no LlmSpecs to compare with")
    return Path(list(spec.submodule_search_locations)[0]) / DELEGATE_TESTS


def llm_specs(model: str, path: Path | None = None) -> UpstreamSpecs | None:
    """``model``'s ``LlmSpecs`` entry (None: upstream lists no such model)."""
    path = path or delegate_tests_file()
    try:
        tree = ast.parse(path.read_text(), str(path))
    except (OSError, SyntaxError) as e:
        raise UpstreamSpecsError(f"{path}: cannot read upstream's LlmSpecs ({e})") from None
    tables = [node for node in ast.walk(tree) if isinstance(node, ast.Dict)
              and node.values and all(_is_specs(v) for v in node.values)]
    if not tables:
        raise UpstreamSpecsError(f"{path}: no table of {SPECS_CLASS}(...) entries (did upstream "
                                 "move or rename it?)")
    for table in tables:
        for key, value in zip(table.keys, table.values):
            if isinstance(key, ast.Constant) and key.value == model and isinstance(value, ast.Call):
                try:
                    values = {kw.arg: ast.literal_eval(kw.value) for kw in value.keywords
                              if kw.arg is not None}
                except ValueError:
                    raise UpstreamSpecsError(f"{path}:{value.lineno}: {model}'s {SPECS_CLASS} "
                                             "holds a value that is not a literal") from None
                return UpstreamSpecs(model, values, f"{path}:{value.lineno}")
    return None


def _is_specs(node: ast.expr | None) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    return (isinstance(func, ast.Attribute) and func.attr == SPECS_CLASS) or (
        isinstance(func, ast.Name) and func.id == SPECS_CLASS)


def counterpart(case_folder: Path) -> Counterpart | None:
    """The case's upstream counterpart (None: its weights are no model upstream gates)."""
    path = case_folder / COUNTERPART_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise UpstreamSpecsError(f"{path}: not JSON ({e})") from None
    name, differs = (data.get("llm_specs"), data.get("differs", [])) if isinstance(
        data, dict) else (None, None)
    if not isinstance(name, str) or not name:
        raise UpstreamSpecsError(f"{path}: 'llm_specs' must name upstream's LlmSpecs entry")
    if not isinstance(differs, list) or not all(isinstance(d, str) for d in differs):
        raise UpstreamSpecsError(f"{path}: 'differs' must be a list of sentences")
    return Counterpart(name, tuple(differs))


def runs_upstream_ci(case: ModelCase, target: Target) -> bool:
    """Whether upstream's CI job exists for ``case`` on ``target``: the case declares an
    :data:`UPSTREAM_CI` variant and the target is upstream's x86 runner (``--enable_x86_64``)."""
    return UPSTREAM_CI in case.variants and target.is_x86_runner
