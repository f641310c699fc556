"""Model cases as data: which files, which shapes, which quant recipe, which prompts.

A model case is everything the pipeline needs to build and judge one LLM. Add a model by adding a
folder with its files and a ``case.json`` next to this module (see ``stories260k/case.json``).

A case may declare build *variants* (``"variants": {"ar8": {"prefill_ar_len": 8}}``): the same
weights built by the staged flow with other static-graph shapes or a 16-bit KV cache IO
(``{"kv16": {"kv_io_bit_width": 16}}``), for the emulator A/B gate (``--qnn-ab ar8:new``).
``new`` names the case as it is and ``legacy`` llama.py's build of it. A variant's name is
``<case>@<variant>`` (:attr:`ModelCase.is_variant`).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from pytest_qnn_genai.files import file_sha256

MODELS_DIR = Path(__file__).parent
# Settings read when a built program runs, never when it is built (prompts, token counts, the perf
# workload in ``extra``): they stay out of build cache keys.
RUNTIME_FIELDS = ("eval_prompt", "max_new_tokens", "extra")
# Build settings a variant may change (shapes of the static graphs, the KV cache IO width; the
# weights, tokenizer and the recipe's weight and activation dtypes stay the case's own), the KV
# IO widths a static LLM has (upstream's llm_wrappers: 8 or 16), and the variant names every case
# has.
VARIANT_FIELDS = ("prefill_ar_len", "max_seq_len", "max_context_len", "kv_io_bit_width")
KV_IO_BIT_WIDTHS = (8, 16)
FLOW_VARIANTS = ("legacy", "new")
VARIANT_SEPARATOR = "@"


class ModelCaseError(ValueError):
    """A model case's files are missing or inconsistent (reported as one line)."""


@dataclass(frozen=True)
class ModelCase:
    """One LLM to build and judge: files, static-graph shapes, recipe and prompts."""

    name: str
    folder: Path
    decoder_model: str  # the legacy llama.py --decoder_model name
    checkpoint: str  # llama2.c layout {"model": ..., "model_args": ...} or Meta's (see family)
    params: str  # params.json
    tokenizer_model: str  # SentencePiece .model or tiktoken ranks (see family)
    tokenizer_bin: str  # llama2.c tokenizer.bin (for the C++ runner)
    model_mode: str = "hybrid"
    prefill_ar_len: int = 32
    max_seq_len: int = 128
    max_context_len: int = 128
    quant_recipe: str = "16a4w"  # see stages.quantize
    kv_io_bit_width: int = 8
    eval_prompt: str = "Once upon a time"
    max_new_tokens: int = 48
    calibration_prompts: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)
    variants: dict[str, dict[str, int]] = field(default_factory=dict)  # name -> VARIANT_FIELDS

    def path(self, attr: str) -> Path:
        """Absolute path of one of the case's files (``"checkpoint"``, ``"params"``, ...)."""
        return self.folder / getattr(self, attr)

    @property
    def family(self) -> str:
        """The checkpoint layout and tokenizer family, picked from ``decoder_model`` as llama.py
        picks them: ``llama3`` (Meta ``consolidated.00.pth``, tiktoken) for ``llama3_2-*``,
        else ``llama2c`` (llama2.c checkpoint, SentencePiece). The name of the module in
        :mod:`pytest_qnn_genai.models` that loads it (``load_checkpoint``,
        ``to_static_llama_state_dict``)."""
        return "llama3" if self.decoder_model.startswith("llama3") else "llama2c"

    @property
    def params_dict(self) -> dict[str, Any]:
        return json.loads(self.path("params").read_text())

    def files(self) -> dict[str, Path]:
        """The case's files by role."""
        return {a: self.path(a) for a in ("checkpoint", "params", "tokenizer_model", "tokenizer_bin")}

    def build_fingerprint(self) -> dict[str, Any]:
        """Everything that shapes what the pipeline builds from this case (a cache-key input), and
        nothing that does not: the run-time settings (:data:`RUNTIME_FIELDS`) are left out, so
        changing the eval prompt or the token count rebuilds no model."""
        spec = {k: v for k, v in asdict(self).items()
                if k not in ("folder", "variants", *RUNTIME_FIELDS)}
        spec["file_sha256"] = {role: file_sha256(p) for role, p in self.files().items()}
        return spec

    @property
    def variant_names(self) -> tuple[str, ...]:
        """Every build of this case the A/B gate can compare (``legacy``, ``new``, declared)."""
        return (*FLOW_VARIANTS, *self.variants)

    def variant(self, name: str) -> ModelCase:
        """The case built as variant ``name`` (``new``: itself; ``legacy`` is no staged build)."""
        if name == "new":
            return self
        if name not in self.variants:
            raise ModelCaseError(f"model case {self.name} has no build variant {name!r}; its "
                                 f"variants: {', '.join(self.variant_names)}")
        return replace(self, name=f"{self.name}{VARIANT_SEPARATOR}{name}", variants={},
                       **self.variants[name])

    @property
    def is_variant(self) -> bool:
        """Whether this is a declared variant of a case (:meth:`variant`), not a case itself."""
        return VARIANT_SEPARATOR in self.name

    def check_variants(self) -> None:
        """Each declared variant changes only :data:`VARIANT_FIELDS`, to positive integers (a KV
        IO width to one of :data:`KV_IO_BIT_WIDTHS`)."""
        if not isinstance(self.variants, dict):
            raise ModelCaseError(f"model case {self.name}: variants must be an object of "
                                 f"name: {{field: value}}, got {type(self.variants).__name__}")
        for name, overrides in self.variants.items():
            bad = ([k for k in overrides if k not in VARIANT_FIELDS]
                   if isinstance(overrides, dict) else [type(overrides).__name__])
            if name in FLOW_VARIANTS or ":" in name or not isinstance(overrides, dict) or bad:
                raise ModelCaseError(
                    f"model case {self.name}: variant {name!r} must be a new name (not "
                    f"{'/'.join(FLOW_VARIANTS)}, no ':') overriding only "
                    f"{', '.join(VARIANT_FIELDS)}" + (f"; got {', '.join(map(str, bad))}"
                                                      if bad else ""))
            wrong = {k: v for k, v in overrides.items() if not (type(v) is int and v > 0)}
            if wrong:
                raise ModelCaseError(f"model case {self.name}: variant {name!r}: {wrong} must be "
                                     "positive integers")
            if overrides.get("kv_io_bit_width", KV_IO_BIT_WIDTHS[0]) not in KV_IO_BIT_WIDTHS:
                raise ModelCaseError(f"model case {self.name}: variant {name!r}: kv_io_bit_width "
                                     f"must be one of {', '.join(map(str, KV_IO_BIT_WIDTHS))}, "
                                     f"got {overrides['kv_io_bit_width']}")


def load_case(folder: Path) -> ModelCase:
    """Read ``folder/case.json`` into a :class:`ModelCase`, checking that its files exist."""
    spec_file = folder / "case.json"
    try:
        spec = json.loads(spec_file.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ModelCaseError(f"{spec_file}: cannot read model case ({e})") from None
    spec["calibration_prompts"] = tuple(spec.get("calibration_prompts", ()))
    try:
        case = ModelCase(folder=folder, **spec)
    except TypeError as e:
        raise ModelCaseError(f"{spec_file}: {e}") from None
    if VARIANT_SEPARATOR in case.name:  # the separator names a case's variants
        raise ModelCaseError(f"{spec_file}: name {case.name!r} must not contain "
                             f"{VARIANT_SEPARATOR!r}")
    for role, p in case.files().items():
        if not p.is_file():
            raise ModelCaseError(f"{spec_file}: {role} file {p.name} is missing")
    try:
        case.check_variants()
    except ModelCaseError as e:
        raise ModelCaseError(f"{spec_file}: {e}") from None
    return case


def available() -> dict[str, ModelCase]:
    """All model cases shipped with the package, by name."""
    cases = [load_case(d) for d in sorted(MODELS_DIR.iterdir()) if (d / "case.json").is_file()]
    return {c.name: c for c in cases}


def select(names: list[str]) -> list[ModelCase]:
    """The named cases (all when ``names`` is empty); unknown names raise :class:`ModelCaseError`."""
    cases = available()
    if not names:
        return list(cases.values())
    unknown = [n for n in names if n not in cases]
    if unknown:
        raise ModelCaseError(
            f"unknown model case(s) {', '.join(unknown)}; available: {', '.join(cases)}")
    return [cases[n] for n in names]
