"""Model families: one module per architecture family, every one behind :class:`Family`.

A family is what llama.py decides from ``--decoder_model`` before it builds anything: which
checkpoint layout it reads and how it turns it into the state dict ``static_llama.LlamaModel``
loads, which tokenizer calibration encodes with (and whether a chat template wraps the
calibration samples), which transformers class is the same architecture, and the
``--decoder_model_version`` its runner is started with. The rest of the package asks a case's
family (``case.family``) and never branches on family names. Every module of this package whose
name does not start with ``_`` is a family; :func:`all_families` finds them, so adding a family is
adding one module (plus its model cases' data), and ``tests/unit/models/test_families.py`` holds
each to this protocol and to llama.py's own tables.

Layering: the models room sits below stages/runtime/flows; a family describes things (names,
files, callables that load) and imports nothing above it. Hazard: family modules import torch;
transformers, executorch and pytorch_tokenizers are imported inside the functions that need them.
"""
from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel

    from pytest_qnn_genai.models.params import CaseFile, ModelParams
    from pytest_qnn_genai.untyped import Tokenizer


class CaseFiles(Protocol):
    """What a family reads of a model case (:class:`~pytest_qnn_genai.models.case.ModelCase`
    is one): the case finds its family, so a family never imports the case's module."""

    @property
    def name(self) -> str: ...

    @property
    def folder(self) -> Path: ...

    @property
    def hf_folder(self) -> Path: ...

    @property
    def decoder_model(self) -> str: ...

    @property
    def max_context_len(self) -> int: ...

    @property
    def params_dict(self) -> ModelParams: ...

    def path(self, attr: str) -> Path: ...

    def files(self) -> dict[str, Path]: ...


class FamilyError(ValueError):
    """No family serves a ``decoder_model``, or a family module breaks the protocol (one line)."""


@dataclass(frozen=True)
class LegacyInputs:
    """What ``llama.py`` is given for a case's weights and tokenizer: its flags, and the
    environment variables to set for it (e.g. a Hugging Face cache laid out by the family)."""

    args: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)


class ToyTokenizer(Protocol):
    """A toy's freshly trained tokenizer, as :mod:`pytest_qnn_genai.models.train` uses it."""

    bos_id: int | None  # what the runner puts before a prompt (None: nothing)
    eos_id: int  # what ends a story in the training stream
    chat_end_id: int | None  # the token that ends an assistant turn (None: no chat windows)

    def encode(self, text: str) -> list[int]:
        """Ids of ``text``, no BOS/EOS."""
        ...

    def decode(self, ids: list[int]) -> str:
        ...

    def word_id(self, word: str) -> int:
        """The one token of ``word`` after a space, mid-sentence."""
        ...

    def chat(self, prompt: str) -> list[int] | None:
        """BOS (if any) + the chat template ``qnn_llama_runner`` wraps ``prompt`` in for this family's
        ``--decoder_model_version`` (None: the family has no chat template)."""
        ...


class Toy(Protocol):
    """How a family's toy model case is trained by the shared trainer
    (:mod:`pytest_qnn_genai.models.train`): its tokenizer, its model, its files."""

    NAME: str  # the model case's name
    STEPS: int  # default training steps
    PARAMS: ModelParams  # the shape (params.json)
    CASE: CaseFile  # case.json fields the trainer does not derive

    def train_tokenizer(self, stories: list[str], out: Path) -> ToyTokenizer:
        """Train on ``stories`` and write the tokenizer file(s) into ``out``."""
        ...

    def new_model(self, params: ModelParams) -> torch.nn.Module:
        """A freshly initialised model of shape ``params`` (from torch's global seed)."""
        ...

    def logits(self, model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
        """``[B, T, vocab]`` logits for token ids ``x [B, T]``."""
        ...

    def save(self, model: torch.nn.Module, out: Path, params: ModelParams) -> None:
        """Write the trained weights in every layout the family's cases hold."""
        ...

    def reference(self, out: Path, params: ModelParams) -> torch.nn.Module:
        """The model read back from the files :meth:`save` wrote."""
        ...

    def describe(self) -> str:
        """The model card's family sections (architecture, files, tokenizer)."""
        ...


@runtime_checkable
class Family(Protocol):
    """A family module's declared contract (module attributes and functions)."""

    NAME: str
    # llama.py --decoder_model names this family serves -> their --decoder_model_version
    # (decoder_constants.DECODER_MODEL_VERSION)
    DECODER_MODELS: Mapping[str, str]
    # files a case of this family has besides case.json's four, by role -> name in its folder
    EXTRA_FILES: Mapping[str, str]
    HF_CLASS: str  # the transformers class of the same architecture (the fp32 reference)
    TOY: Toy | None  # the family's toy model case, as the shared trainer builds it (None: none)

    def expected_shapes(self, params: ModelParams) -> dict[str, tuple[int, ...]]:
        """Every key of the family's checkpoint file and its shape for ``params``."""
        ...

    def check_checkpoint(self, case: CaseFiles) -> None:
        """Raise ``ModelCaseError`` (one line) unless the checkpoint's keys and shapes are
        ``expected_shapes(params)``; reads no more of the file than it must."""
        ...

    def load_checkpoint(self, case: CaseFiles) -> dict[str, torch.Tensor]:
        """The weights as llama.py hands them to ``static_llama.LlamaModel`` before its
        ``transform_weight`` permute (Meta names: ``layers.{i}.attention.wq.weight``, ...)."""
        ...

    def calibration_tokenizer(self, case: CaseFiles) -> Tokenizer:
        """The tokenizer llama.py's ``TokenizerWrapper`` calibrates with for this family (a
        ``pytorch_tokenizers`` object)."""
        ...

    def calibration_ids(self, case: CaseFiles, tokenizer: Tokenizer, prompt: str) -> list[int]:
        """The tokens llama.py calibrates on for one ``--calib_samples`` user message
        (``DecoderDatasetBuilder.from_conversation``: its chat template, if any, then encode)."""
        ...

    def reference_model(self, case: CaseFiles,
                        state_dict: dict[str, torch.Tensor] | None = None) -> PreTrainedModel:
        """``HF_CLASS`` holding the case's weights (or ``state_dict``, in the layout
        :meth:`load_checkpoint` returns), fp32, eager attention, eval mode."""
        ...

    def legacy_inputs(self, case: CaseFiles, work_dir: Path) -> LegacyInputs:
        """llama.py's flags (and environment) for the case's weights and tokenizer; files it
        needs laid out are put under ``work_dir``."""
        ...


MEMBERS = ("NAME", "DECODER_MODELS", "EXTRA_FILES", "HF_CLASS", "TOY", "expected_shapes",
           "check_checkpoint", "load_checkpoint", "calibration_tokenizer", "calibration_ids",
           "reference_model", "legacy_inputs")


def _module_names() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def module_names() -> tuple[str, ...]:
    """The family modules' full names: found at run time, so code digests, which follow static
    imports only (``cache/code.py``), take them as roots."""
    return tuple(f"{__name__}.{name}" for name in _module_names())


@cache
def all_families() -> dict[str, Family]:
    """Every family module of this package, by ``NAME``; a module missing a protocol member or
    two families serving one ``decoder_model`` is a :class:`FamilyError`."""
    out: dict[str, Family] = {}
    served: dict[str, str] = {}
    for module_name in _module_names():
        module = importlib.import_module(f"{__name__}.{module_name}")
        missing = [m for m in MEMBERS if not hasattr(module, m)]
        if missing:
            raise FamilyError(f"family module {module.__name__} lacks {', '.join(missing)}")
        family: Family = module  # a module that has every member
        for decoder_model in family.DECODER_MODELS:
            if decoder_model in served:
                raise FamilyError(f"decoder_model {decoder_model!r} is served by both "
                                  f"{served[decoder_model]} and {family.NAME}")
            served[decoder_model] = family.NAME
        out[family.NAME] = family
    return out


def for_decoder_model(decoder_model: str) -> Family:
    """The family serving llama.py's ``--decoder_model`` name."""
    for family in all_families().values():
        if decoder_model in family.DECODER_MODELS:
            return family
    served = sorted(d for f in all_families().values() for d in f.DECODER_MODELS)
    raise FamilyError(f"no model family serves decoder_model {decoder_model!r} (served: "
                      f"{', '.join(served)})")
