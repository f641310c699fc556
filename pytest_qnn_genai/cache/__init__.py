"""Content-addressed, process-safe artifact cache."""
from pytest_qnn_genai.cache.code import CodeDigestError, code_digest
from pytest_qnn_genai.cache.store import ArtifactCache, CacheEntry, CacheStats, CacheWarning

__all__ = ["ArtifactCache", "CacheEntry", "CacheStats", "CacheWarning", "CodeDigestError",
           "code_digest"]
