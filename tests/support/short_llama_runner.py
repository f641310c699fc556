"""A ``qnn_llama_runner`` stand-in with one classic defect: its decode loop stops one step early
(``while pos < seq_len - 2``), so a P-token prompt yields S - P - 1 new tokens instead of
upstream's S - P. Everything else is :mod:`tests.support.llama_runner_standin`. A gate that holds
the runner to upstream's count must fail on it."""
from __future__ import annotations

import sys
from pathlib import Path

from tests.support import llama_runner_standin as upstream
from tests.support import standin_plumbing as common


class ShortRunner(upstream.Runner):
    """Decodes up to position ``seq_len - 2``: one token short."""

    def _decode(self, cur: int, seq_len: int, ctx: int, out: list[bytes]) -> int:
        return super()._decode(cur, seq_len - 1, ctx, out)


def write_launcher(path: Path, backend: str = "tests.support.standin_backends:toy_backend",
                   env: dict[str, str] | None = None, python: str = sys.executable) -> Path:
    """An executable ``qnn_llama_runner`` running this defective stand-in."""
    return common.write_launcher(path, "tests.support.short_llama_runner",
                                 {upstream.BACKEND_ENV: backend, **(env or {})}, python)


if __name__ == "__main__":
    upstream.Runner = ShortRunner  # type: ignore[misc]  # run() builds its Runner by this name
    common.exit_like_upstream(upstream.run(sys.argv[1:]))
