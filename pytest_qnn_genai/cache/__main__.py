"""``python -m pytest_qnn_genai.cache ls | prune | rm`` (see :mod:`.commands`)."""
from __future__ import annotations

from pytest_qnn_genai.cache.commands import main

raise SystemExit(main())
