"""Import-time stand-in for torchtune, for executorch's ``examples.qualcomm.oss_scripts.llama``.

That package's ``__init__`` imports two torchtune names (``models.convert_weights.get_mapped_key``
and ``training.FullModelHFCheckpointer``) for models this project does not build; PyPI's only
torchtune (0.6.1) fails to import against torchao 0.18. When no working torchtune is importable,
:func:`install` registers modules that provide exactly those names and raise if they are called.
"""
from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable

STUB_VERSION = "0.0.0+pytest-qnn-genai-stub"


class TorchtuneUnavailable(RuntimeError):
    """A torchtune function was called, but only the import-time stand-in is installed."""


def _unavailable(name: str) -> Callable[..., None]:
    def call(*_args: object, **_kwargs: object) -> None:
        raise TorchtuneUnavailable(
            f"torchtune.{name} was called, but torchtune is not installed (only pytest-qnn-genai's "
            "import-time stand-in is); install a torchtune that works with your torchao")
    call.__name__ = name.rsplit(".", 1)[-1]
    return call


def _working_torchtune() -> bool:
    if "torchtune" in sys.modules:
        return True
    try:
        importlib.import_module("torchtune.models.convert_weights")
        importlib.import_module("torchtune.training")
    except Exception:  # noqa: BLE001 - any import failure means "not usable"
        for name in [m for m in sys.modules if m == "torchtune" or m.startswith("torchtune.")]:
            del sys.modules[name]
        return False
    return True


def install() -> bool:
    """Make ``import torchtune...`` work for executorch's llama package; True if the stub was used."""
    if _working_torchtune():
        return getattr(sys.modules["torchtune"], "__version__", "") == STUB_VERSION
    root = types.ModuleType("torchtune")
    root.__version__ = STUB_VERSION  # type: ignore[attr-defined]
    root.__path__ = []
    models = types.ModuleType("torchtune.models")
    models.__path__ = []
    convert = types.ModuleType("torchtune.models.convert_weights")
    convert.get_mapped_key = _unavailable("models.convert_weights.get_mapped_key")  # type: ignore[attr-defined]
    training = types.ModuleType("torchtune.training")

    class FullModelHFCheckpointer:
        def __init__(self, *args: object, **kwargs: object) -> None:
            _unavailable("training.FullModelHFCheckpointer")()

    training.FullModelHFCheckpointer = FullModelHFCheckpointer  # type: ignore[attr-defined]
    root.models, models.convert_weights, root.training = models, convert, training  # type: ignore[attr-defined]
    sys.modules.update({"torchtune": root, "torchtune.models": models,
                        "torchtune.models.convert_weights": convert, "torchtune.training": training})
    return True
