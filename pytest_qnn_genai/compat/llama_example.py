"""executorch's LLM example package (``examples.qualcomm.oss_scripts.llama``), imported safely.

The package's ``__init__`` imports every supported model's ``convert_weights`` module, two of which
import torchtune (see :mod:`pytest_qnn_genai.compat.torchtune`). Every in-process use of the example
(its model configs, ``static_llama``, the ``llm_wrappers`` the staged flow calls) goes through
here, so the stand-in is installed first, once.
"""
from __future__ import annotations

from types import ModuleType

from pytest_qnn_genai.compat import torchtune


def package() -> ModuleType:
    """``executorch.examples.qualcomm.oss_scripts.llama`` (``SUPPORTED_LLM_MODELS``, ...)."""
    torchtune.install()
    import executorch.examples.qualcomm.oss_scripts.llama as llama_pkg

    module: ModuleType = llama_pkg
    return module


def static_llama() -> ModuleType:
    """The example's ``model.static_llama`` (``ModelArgs``, ``LlamaModel``)."""
    torchtune.install()
    from executorch.examples.qualcomm.oss_scripts.llama.model import static_llama

    module: ModuleType = static_llama
    return module


def llm_wrappers() -> ModuleType:
    """The example's ``wrappers.llm_wrappers`` (``TextDecoder``, ``HybridTextDecoder``)."""
    torchtune.install()
    from executorch.examples.qualcomm.oss_scripts.llama.wrappers import llm_wrappers

    module: ModuleType = llm_wrappers
    return module


def llama_script() -> ModuleType:
    """The example's ``llama`` script module (``_build_parser``: the options ``llama.py`` parses
    its argv with)."""
    torchtune.install()
    from executorch.examples.qualcomm.oss_scripts.llama import llama

    module: ModuleType = llama
    return module
