"""stages.compile_alone: the compile runs in a fresh process, and what it raises there is raised
here as the same exception (a QNN refusal stays a refusal, a missing directory a missing file)."""
from __future__ import annotations

from pathlib import Path
from typing import cast

import pytest

from pytest_qnn_genai.stages.compile_alone import compile_alone
from pytest_qnn_genai.stages.quantize import QdqArtifacts, QdqData
from pytest_qnn_genai.targets import Target, soc


def test_the_childs_error_is_raised_here_as_itself(tmp_path: Path) -> None:
    gone = QdqArtifacts(tmp_path / "no-such-quantize-dir", cast(QdqData, {}))
    with pytest.raises(FileNotFoundError, match="no-such-quantize-dir"):
        compile_alone(gone, Target(soc("SM8650")), tmp_path / "out", timeout_s=300)
    assert not (tmp_path / "out").exists()
