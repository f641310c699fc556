"""The session's artifact cache as its settings configure it: one home for opening it, so the
tests' processes and the prebuild process open the same cache (folder, size bound, remote store,
rebuild time, session start) and agree on every key."""
from __future__ import annotations

from collections.abc import Mapping

from pytest_qnn_genai.cache.remote import open_remote
from pytest_qnn_genai.cache.store import ArtifactCache
from pytest_qnn_genai.progress import Writer, stderr_writer
from pytest_qnn_genai.settings import Settings


def open_cache(settings: Settings, versions: Mapping[str, str], *, session_start: float,
               rebuild_before: float | None = None, progress: Writer = stderr_writer,
               cache_class: type[ArtifactCache] = ArtifactCache) -> ArtifactCache:
    """The artifact cache under ``settings.artifacts_dir`` for the tool ``versions``."""
    gb, url = settings.cache_max_gb, settings.remote_cache
    return cache_class(settings.artifacts_dir, versions, rebuild_before=rebuild_before,
                       progress=progress, max_bytes=None if gb is None else int(gb * 1e9),
                       session_start=session_start,
                       remote=None if url is None else open_remote(url))
