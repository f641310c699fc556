"""The plugin's default settings with some fields changed, for tests that start a piece of the
plugin (the prebuild process) without a pytest session: resolved by the real knob table."""
from __future__ import annotations

import dataclasses
from pathlib import Path

from pytest_qnn_genai.plugin.options import resolve
from pytest_qnn_genai.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


def settings_with(**changes: object) -> Settings:
    """Every knob at its default (no command line, environment or ini), then ``changes``."""
    defaults = resolve(lambda name: None, lambda name: None, ROOT, environ={})
    return dataclasses.replace(defaults, **changes)  # type: ignore[arg-type]
