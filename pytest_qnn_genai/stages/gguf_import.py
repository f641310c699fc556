"""The GGUF import as a cached product: a GGUF file -> its Hugging Face folder, built once.

Stage ``gguf-import``: key inputs the GGUF file's sha256 and the digest of the builder's code
(:data:`CODE`, :func:`pytest_qnn_genai.models.gguf.import_gguf`); the cache adds the tool
versions (transformers and the ``gguf`` package among them). The entry's files are
:data:`pytest_qnn_genai.models.gguf.FILES`. A bad or unsupported file raises
:class:`~pytest_qnn_genai.models.sources.GgufImportError`, which the cache does not remember:
nothing is cached, the next run tries again (the file may be replaced).

The models room cannot reach the cache (they are siblings), so a model case asks for its import
through the importer :func:`install` gives it (``models.case.use_gguf_importer``); the session
installs one over its own cache. Hazard: a cache hit re-hashes the entry's files (half a
gigabyte at 135M parameters): a case memoizes its imported folder for the process.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pytest_qnn_genai.cache import ArtifactCache, CacheEntry, code_digest
from pytest_qnn_genai.files import file_sha256
from pytest_qnn_genai.models import case as model_case
from pytest_qnn_genai.models.gguf import import_gguf
from pytest_qnn_genai.models.sources import GgufImportError

STAGE = "gguf-import"
CODE = ("pytest_qnn_genai.models.gguf",)


def inputs(gguf: Path, package_root: Path | None = None) -> dict[str, object]:
    """The product's key inputs (the cache adds the versions)."""
    return {"gguf_sha256": file_sha256(Path(gguf)),
            "code": code_digest(CODE, package_root=package_root)}


def imported_entry(cache: ArtifactCache, gguf: Path,
                   package_root: Path | None = None) -> CacheEntry:
    """The cache entry holding ``gguf``'s import, built if it is not there."""
    gguf = Path(gguf)
    if not gguf.is_file():  # before its digest: one line, not a traceback
        raise GgufImportError(f"{gguf}: no such GGUF file")
    return cache.get_or_build(STAGE, inputs(gguf, package_root),
                              lambda out: import_gguf(gguf, out), label=gguf.name)


def install(cache: Callable[[], ArtifactCache]) -> None:
    """Make model cases import their GGUF files through the cache ``cache()`` returns (called
    on a case's first import only: the session's cache is made lazily)."""
    model_case.use_gguf_importer(lambda gguf: imported_entry(cache(), gguf).path)
