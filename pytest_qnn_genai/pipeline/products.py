"""The cached products, declared once: what one is per, the code in its key, what it is built
from, and the one call that builds it.

Contract. A :class:`Product` is one kind of artifact-cache entry (its cache ``stage``). A
:class:`Need` names one unit of it (the product, and the model case, build target and argument it
is for, as names: it travels to the prebuild process as JSON); ``make(pipeline, build)`` gets every
entry that need names through the :class:`~pytest_qnn_genai.pipeline.Pipeline` (a hit, or a build
under the key's lock); ``built_from(need)`` names the needs whose entries that build reads (the
prebuild builds them first); ``code`` lists the package modules whose code, with their package
imports, goes into its keys (an edit to the harness rebuilds what it shapes and nothing else).
:func:`table` is the whole graph: the products below, one per registered flow
(:mod:`pytest_qnn_genai.flows`), and any :func:`register` ed elsewhere (a user's plugin or
conftest module: the prebuild process imports the module that registered it).

Fixtures say which products they get with :func:`needs`; the plugin reads those declarations off
the fixture closure of each selected test and the prebuild (:mod:`pytest_qnn_genai.prebuild`)
walks the graph from them. Nothing here names a fixture. Hazard: a fixture that gets a product it
does not declare still works, but nothing builds that product ahead: its test builds it when it
asks, after the prebuild's work, one after another at the end of a cold run.
"""
from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TypeVar

from pytest_qnn_genai.flows import registry as flows
from pytest_qnn_genai.flows.base import Flow
from pytest_qnn_genai.models import families
from pytest_qnn_genai.models.registry import VARIANT_SEPARATOR, ModelCase, select
from pytest_qnn_genai.stages import gguf_import
from pytest_qnn_genai.targets import Target, soc

F = TypeVar("F", bound=Callable[..., object])
WANTS_ATTRIBUTE = "__qnn_needs__"


class Per(Enum):
    """What one need of a product names besides its argument."""

    CASE = "case"  # a model case (its references: the same on every target)
    CASE_TARGET = "case-target"  # a model case built for one build target
    TARGET = "target"  # a build target alone (the smoke blocks)
    SOURCE = "source"  # an ExecuTorch source tree (upstream's runners), the argument


class UnknownProductError(KeyError):
    """A product name the table does not hold (one line, listing the products)."""

    def __str__(self) -> str:
        return str(self.args[0])


@dataclass(frozen=True)
class Need:
    """One unit of a product: ``case`` is a case name (``stories260k@ar8`` for a declared
    variant), ``soc``/``backend`` the build target's (always the emulator's builds)."""

    product: str
    case: str = ""
    soc: str = ""
    backend: str = ""
    arg: str = ""

    @property
    def label(self) -> str:
        """``legacy stories260k SM8650-htp``, ``qdq-logits heldout stories260k SM8650-htp``."""
        target = f"{self.soc}-{self.backend}" if self.soc else ""
        what = f"{self.product} {self.arg}" if self.arg else self.product
        return " ".join(x for x in (what, self.case, target) if x)

    @property
    def in_subprocess(self) -> bool:
        """True if its build runs in a subprocess (llama.py, cmake), so it can run beside an
        in-process build without holding the interpreter."""
        return get(self.product).in_subprocess

    @property
    def long(self) -> bool:
        return get(self.product).long

    def on(self, **changes: str) -> Need:
        """The same need with other fields (``need.on(product=QUANTIZE, arg="")``)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, str]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> Need:
        return cls(**{f.name: str(data.get(f.name, "")) for f in dataclasses.fields(cls)})


@dataclass(frozen=True)
class Build:
    """A need resolved into the objects its product's ``make`` takes."""

    need: Need
    case: ModelCase | None = None
    target: Target | None = None

    def require_case(self) -> ModelCase:
        if self.case is None:
            raise ValueError(f"{self.need.label}: a model case is needed")
        return self.case

    def require_target(self) -> Target:
        if self.target is None:
            raise ValueError(f"{self.need.label}: a build target is needed")
        return self.target


def _nothing(need: Need) -> tuple[Need, ...]:
    return ()


@dataclass(frozen=True)
class Product:
    """One kind of cached product (see the module docstring)."""

    name: str
    per: Per
    make: str  # "module:function", called as function(pipeline, build); "": not built ahead
    code: tuple[str, ...] = ()
    stage: str = ""  # its cache stage; "" = its name
    built_from: Callable[[Need], tuple[Need, ...]] = _nothing
    long: bool = False  # minutes, not seconds: the prebuild starts these first
    in_subprocess: bool = False  # its build is a subprocess (llama.py, cmake)

    @property
    def cache_stage(self) -> str:
        return self.stage or self.name

    @property
    def module(self) -> str:
        """The module its ``make`` is in (for a registered product, the prebuild imports it)."""
        return self.make.partition(":")[0]

    def check_built_ahead(self) -> None:
        """One line unless it has a ``make`` (a product only its tests build has none)."""
        if not self.make:
            raise UnknownProductError(f"product {self.name!r} is built only by the tests that "
                                      "ask for it (its key holds what they compute)")

    def maker(self) -> Callable[..., object]:
        """Its ``make`` function (imported by name: the functions take the pipeline, which sits
        above this table)."""
        self.check_built_ahead()
        module, _, function = self.make.partition(":")
        found: object = getattr(importlib.import_module(module), function, None)
        if not callable(found):
            raise UnknownProductError(f"product {self.name!r}: no function {self.make!r}")
        return found


@dataclass(frozen=True)
class Wants:
    """What a fixture declares it gets (:func:`needs`): a product with its argument, on which of
    the item's targets (default: every target whose builds are known ahead) and for which of the
    item's case's builds (default: the case itself)."""

    product: str
    arg: str = ""
    where: Callable[[Target], bool] | None = None
    cases: Callable[[ModelCase], Sequence[ModelCase]] | None = None


def needs(*wants: str | Wants) -> Callable[[F], F]:
    """Declare the products a fixture gets, for the prebuild to build ahead::

        @pytest.fixture(scope="session")
        @needs(products.QUANTIZE)
        def qnn_qdq(qnn_pipeline, qnn_case, qnn_target): ...
    """
    declared = tuple(w if isinstance(w, Wants) else Wants(w) for w in wants)

    def mark(func: F) -> F:
        setattr(func, WANTS_ATTRIBUTE, declared)
        return func
    return mark


def declared(func: object) -> tuple[Wants, ...]:
    """What a fixture function declares with :func:`needs` (none: ``()``)."""
    found = getattr(func, WANTS_ATTRIBUTE, ())
    return tuple(w for w in found if isinstance(w, Wants)) if isinstance(found, tuple) else ()


# -- the table ----------------------------------------------------------------------------------
_REGISTERED: dict[str, Product] = {}


def register(product: Product) -> Product:
    """Add a product to the table from outside the package (the prebuild process imports the
    module its ``make`` is in, which registers it there too)."""
    if product.name in _builtin() or product.name in flows.flows():
        raise ValueError(f"product {product.name!r} is the harness's own")
    _REGISTERED[product.name] = product
    return product


def unregister(name: str) -> None:
    _REGISTERED.pop(name, None)


def table() -> dict[str, Product]:
    """Every product by name: the harness's own, one per registered flow (read from the flows'
    registry each time: a flow module added later is a product too), the registered ones."""
    static = _builtin()
    made = [static[QUANTIZE], *(_flow_product(flow) for flow in flows.flows().values()),
            *(p for name, p in static.items() if name != QUANTIZE)]
    return {**{p.name: p for p in made}, **_REGISTERED}


def get(name: str) -> Product:
    known = table()
    if name not in known:
        raise UnknownProductError(f"unknown product {name!r}; products: {', '.join(known)}")
    return known[name]


def registered_modules() -> list[str]:
    """The modules that registered products from outside (for the prebuild process)."""
    return sorted({p.module for p in _REGISTERED.values() if p.module})


def import_modules(modules: Sequence[str]) -> None:
    """Import the modules that register products (in the prebuild process)."""
    for module in modules:
        importlib.import_module(module)


def resolve(need: Need, case_dirs: Sequence[Path] = ()) -> Build:
    """The case and target objects ``need`` names (``case_dirs``: the session's ``--qnn-cases``)."""
    case = None
    if need.case:
        base, _, variant = need.case.partition(VARIANT_SEPARATOR)
        case = select([base], case_dirs)[0]
        case = case.variant(variant) if variant else case
    target = Target(soc(need.soc), need.backend) if need.soc else None
    return Build(need, case, target)


def need_for(product: str, case: ModelCase | None, target: Target | None, arg: str = "",
             source: Path | None = None) -> Need | None:
    """The need of ``product`` for an item's case and build target, or None when the item has
    nothing it is per (no case for a per-case product; no source tree for upstream's runners)."""
    per = get(product).per
    if per == Per.SOURCE:
        return None if source is None else Need(product, arg=str(source))
    if per == Per.TARGET:
        return None if target is None else Need(product, soc=target.soc.name,
                                                 backend=target.backend, arg=arg)
    if case is None:
        return None
    if per == Per.CASE or target is None:
        return Need(product, case.name, arg=arg) if per == Per.CASE else None
    return Need(product, case.name, target.soc.name, target.backend, arg)


# -- the harness's products ---------------------------------------------------------------------
QUANTIZE = "quantize"
SMOKE = "smoke-lower"
LLM_CONFIG = "llm-config"
FP32_REFERENCE = "fp32-reference"
QDQ_LOGITS = "qdq-logits"
FP32_LOGITS = "fp32-logits"
TRANSFORMERS_LOGITS = "transformers-logits"
RUNNERS = "runners-build"
QDQ_ENCODINGS = "qdq-encodings"
GGUF_IMPORT = "gguf-import"  # a GGUF file -> its Hugging Face folder (a case's files)
GENAI = "genai"  # upstream genai_pipeline's build: preparation, quantization, compilation
QDQ_WINDOW_LOGITS = "qdq-window-logits"  # any QDQ graph on the flows' comparison windows
TARGET_RUN = "target-run"  # a program's judged generation on the emulator (pipeline/outputs.py)
TARGET_LOGITS = "target-logits"  # a program's logits of a token sequence on the emulator
RUNNER_RUN = "runner-run"  # a program's judged run on upstream's x86 runner (pipeline/outputs.py)
TARGET_WORK = "target-work"  # a program's counted work on the emulator (runtime/work.py)
UPSTREAM_SQNR = "upstream-sqnr"  # llama.py's sqnr_eval of a program (flows/llama_eval.py)
# the token sets of the logits products: the fp32 continuation of the eval prompt, or every
# held-out window (:func:`pytest_qnn_genai.checks.perplexity.heldout_documents`)
EVAL = ""
HELDOUT = "heldout"
_MAKERS = "pytest_qnn_genai.pipeline.makers:"  # the harness's make functions


def _on_quantize(need: Need) -> tuple[Need, ...]:
    return (need.on(product=QUANTIZE, arg=""),)


def _qdq_logits_from(need: Need) -> tuple[Need, ...]:
    reference = () if need.arg == HELDOUT else (Need(FP32_REFERENCE, need.case),)
    return (*_on_quantize(need), *reference)


def _flow_product(flow: Flow) -> Product:
    return Product(flow.name, Per.CASE_TARGET, _MAKERS + "flow", (type(flow).__module__, *flow.code),
                   stage=flow.stage, built_from=_on_quantize if flow.from_qdq else _nothing,
                   long=True, in_subprocess=flow.in_subprocess)


def _builtin() -> dict[str, Product]:
    if _BUILTIN:
        return _BUILTIN
    reference = ("pytest_qnn_genai.stages.reference", "pytest_qnn_genai.stages.prepare",
                 *families.module_names())
    made = [
        Product(QUANTIZE, Per.CASE_TARGET, _MAKERS + "quantize",
                ("pytest_qnn_genai.stages.quantize", *families.module_names()), long=True),
        Product(SMOKE, Per.TARGET, _MAKERS + "smoke", ("pytest_qnn_genai.flows.smoke",)),
        Product(LLM_CONFIG, Per.CASE, _MAKERS + "llm_config", ("pytest_qnn_genai.stages.recipe",)),
        Product(FP32_REFERENCE, Per.CASE, _MAKERS + "eval_reference", reference),
        Product(QDQ_LOGITS, Per.CASE_TARGET, _MAKERS + "qdq_logits", reference, built_from=_qdq_logits_from),
        Product(FP32_LOGITS, Per.CASE, _MAKERS + "fp32_logits", reference),
        Product(TRANSFORMERS_LOGITS, Per.CASE, _MAKERS + "transformers_eval_logits",
                ("pytest_qnn_genai.models.hf",),
                built_from=lambda need: (Need(FP32_REFERENCE, need.case),)),
        Product(RUNNERS, Per.SOURCE, _MAKERS + "runners", ("pytest_qnn_genai.runners.build",), long=True,
                in_subprocess=True),
        Product(GGUF_IMPORT, Per.CASE, _MAKERS + "gguf_import", gguf_import.CODE),
        Product(GENAI, Per.CASE_TARGET, _MAKERS + "genai",
                ("pytest_qnn_genai.flows.genai_front", "pytest_qnn_genai.flows.genai_run",
                 "pytest_qnn_genai.flows.genai_recipes", "pytest_qnn_genai.flows.genai_compile",
                 "pytest_qnn_genai.stages.recipe"), long=True),
        Product(QDQ_WINDOW_LOGITS, Per.CASE_TARGET, "",
                ("pytest_qnn_genai.flows.genai_front", "pytest_qnn_genai.checks.qdq_windows",
                 "pytest_qnn_genai.stages.prepare", *families.module_names())),
        # what a program gives on the emulator: only the tests that judge it ask (the program,
        # their inputs and the runtime in the key; the cache's versions carry QAIRT's)
        Product(TARGET_RUN, Per.CASE_TARGET, "", ("pytest_qnn_genai.runtime.run",)),
        Product(TARGET_LOGITS, Per.CASE_TARGET, "", ("pytest_qnn_genai.runtime.run",)),
        Product(RUNNER_RUN, Per.CASE_TARGET, "", ("pytest_qnn_genai.devices.llama_runs",)),
        Product(TARGET_WORK, Per.CASE_TARGET, "",
                ("pytest_qnn_genai.runtime.work", "pytest_qnn_genai.runtime.work_probe",
                 "pytest_qnn_genai.runtime.host_runner")),
        Product(UPSTREAM_SQNR, Per.CASE_TARGET, "", ("pytest_qnn_genai.flows.llama_eval",)),
        Product(QDQ_ENCODINGS, Per.CASE_TARGET, _MAKERS + "qdq_encodings",
                ("pytest_qnn_genai.checks.encodings",),
                built_from=lambda need: (need.on(product=need.arg, arg=""),)),
    ]
    _BUILTIN.update({p.name: p for p in made})
    return _BUILTIN


_BUILTIN: dict[str, Product] = {}
