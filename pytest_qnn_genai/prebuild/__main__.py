"""``python -m pytest_qnn_genai.prebuild PLAN``: the session's prebuild process."""
from pytest_qnn_genai.prebuild.process import main

raise SystemExit(main())
