"""``python -m pytest_qnn_genai.report merge`` (see :mod:`.commands`)."""
from __future__ import annotations

from pytest_qnn_genai.report.commands import main

raise SystemExit(main())
