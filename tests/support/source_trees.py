"""A stand-in ExecuTorch source tree for the runners' key tests: every file the runners' build
compiles, as a stub, plus a few headers to reach (or not)."""
from __future__ import annotations

from pathlib import Path

from pytest_qnn_genai.runners.sources import ALL_SOURCES

RUNNER_DIR = "examples/qualcomm/oss_scripts/llama/runner"


def synthetic_tree(root: Path) -> Path:
    """Every compiled source, each a stub; the first reaches two headers (one through a quoted
    include, behind an ``#if 0``) and a header the wheel also ships; ``unrelated.h`` is reached by
    nothing."""
    for rel in ALL_SOURCES:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("int x;\n")
    (root / ALL_SOURCES[0]).write_text(
        f"#include <executorch/{RUNNER_DIR}/utils.h>\n#include <executorch/runtime/platform/log.h>\n"
        "#include <vector>\n")
    (root / RUNNER_DIR / "utils.h").write_text('#if 0\n#include "cache_utils.h"\n#endif\n')
    (root / RUNNER_DIR / "cache_utils.h").write_text("// reached\n")
    (root / RUNNER_DIR / "unrelated.h").write_text("// not included by anything\n")
    (root / "runtime/platform").mkdir(parents=True)
    (root / "runtime/platform/log.h").write_text("// shadowed by the wheel's copy\n")
    return root
