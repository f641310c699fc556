"""Per-session objects stored on the pytest config (settings, SDK), with typed accessors."""
from __future__ import annotations

import pytest

from pytest_qnn_genai.cache import ArtifactCache
from pytest_qnn_genai.options import Settings
from pytest_qnn_genai.sdk import QnnSdk

SETTINGS = pytest.StashKey[Settings]()
SDK = pytest.StashKey[QnnSdk]()


def configured(config: pytest.Config) -> bool:
    """True once the plugin has resolved this session's settings."""
    return SETTINGS in config.stash


def settings_of(config: pytest.Config) -> Settings:
    """The session's resolved settings."""
    return config.stash[SETTINGS]


def sdk_of(config: pytest.Config) -> QnnSdk:
    """The session's QNN SDK (not necessarily loaded into the process yet)."""
    return config.stash[SDK]

CACHE = pytest.StashKey[ArtifactCache]()
REBUILD_BEFORE = pytest.StashKey[float]()
