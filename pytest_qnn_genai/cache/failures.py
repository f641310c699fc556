"""Build failures the cache remembers under their key, like any artifact.

A builder raises a subclass of :class:`RememberedFailure` when its failure is a property of its
inputs (the key: tool versions, harness code, model case), not of this run: executorch's
genai_pipeline that has no compiler yet fails the same way on every run of the same executorch.
:meth:`pytest_qnn_genai.cache.store.ArtifactCache.get_or_build` then stores a *failed entry*: a
manifest without files whose ``failure`` field holds the exception's class and one-line reason,
and re-raises the builder's exception. Later lookups of the key (this process, other xdist
workers, later runs, other machines through a remote cache) raise the same class with the same
reason, marked as remembered, without running the builder. A changed key (another executorch, an
edit to the builder's code) or a rebuild request retries the build.

Contract: only :class:`RememberedFailure` subclasses are remembered; any other exception from a
builder propagates and leaves nothing behind. A failed entry whose class is not defined in this
process (its module not imported yet, or renamed since) is treated as absent and rebuilt, never
turned into another exception type.

Hazard: the class is found by its qualified name among the subclasses imported so far; callers
import the builder's module before calling ``get_or_build`` (they name the builder), so the class
is known whenever its failure can be met.
"""
from __future__ import annotations

import time
from collections.abc import Mapping
from typing import ClassVar, Final

from pytest_qnn_genai.cache.layout import FailureRecord, Manifest

FAILURE: Final = "failure"  # the manifest field of a failed entry
MAX_REASON_CHARS = 500


class RememberedFailure(Exception):  # noqa: N818 - a failure, remembered; not an "...Error"
    """Raise a subclass from a cache builder: the failure is remembered under the build's key.

    The message's first line is the remembered reason. ``remembered`` is set on an instance the
    cache raised from a failed entry (None on the builder's own exception).
    """

    _by_name: ClassVar[dict[str, type[RememberedFailure]]] = {}
    remembered: str | None = None

    def __init_subclass__(cls, **kwargs: object) -> None:  # forwarded to object as given
        super().__init_subclass__(**kwargs)
        RememberedFailure._by_name[qualified_name(cls)] = cls


def qualified_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def one_line(exc: BaseException) -> str:
    """The exception's first line, bounded (what a failed entry keeps)."""
    text = str(exc).strip().splitlines()
    line = text[0] if text else type(exc).__name__
    return line if len(line) <= MAX_REASON_CHARS else line[:MAX_REASON_CHARS - 1] + "…"


def failure_record(exc: RememberedFailure) -> FailureRecord:
    """The manifest's ``failure`` field for ``exc``."""
    return {"type": qualified_name(type(exc)), "reason": one_line(exc)}


def failure_of(manifest: Manifest) -> FailureRecord | None:
    """The ``failure`` field of a failed entry's manifest; None for an entry with artifacts."""
    record = manifest.get(FAILURE)
    return record if isinstance(record, Mapping) else None


def known(manifest: Manifest) -> bool:
    """False for a failed entry whose class this process does not define (rebuild it)."""
    record = failure_of(manifest)
    return record is None or str(record.get("type")) in RememberedFailure._by_name


def recalled(manifest: Manifest, stage: str, label: str) -> RememberedFailure:
    """The exception a failed entry stands for, its message saying it was remembered."""
    record = failure_of(manifest)
    if record is None or not known(manifest):
        raise ValueError(f"{stage} {label}: not a failed entry of a known failure class")
    cls = RememberedFailure._by_name[str(record["type"])]
    created = manifest.get("created")
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(created)) \
        if isinstance(created, (int, float)) else "an earlier run"
    note = (f"remembered by the artifact cache: {stage} {label} failed so on {when}; "
            "retried when its key changes (tool versions, harness code) or on a rebuild")
    exc = cls(f"{record.get('reason', '')} [{note}]")
    exc.remembered = note
    return exc
