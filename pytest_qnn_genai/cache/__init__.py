"""Content-addressed, process-safe artifact cache, optionally shared through a remote store."""
from pytest_qnn_genai.cache.code import CodeDigestError, code_digest
from pytest_qnn_genai.cache.failures import RememberedFailure
from pytest_qnn_genai.cache.stats import CacheStats
from pytest_qnn_genai.cache.store import ArtifactCache, CacheEntry, CacheWarning

__all__ = ["ArtifactCache", "CacheEntry", "CacheStats", "CacheWarning", "CodeDigestError",
           "RememberedFailure", "code_digest"]
