"""Content-addressed, process-safe artifact cache."""
from pytest_qnn_genai.cache.store import ArtifactCache, CacheEntry, CacheStats

__all__ = ["ArtifactCache", "CacheEntry", "CacheStats"]
