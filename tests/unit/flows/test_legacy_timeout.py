"""llama.py's build gets time by the size of what it builds: a toy the base (a hang is found
soon), a real-size checkpoint its share per MB on top (a fixed 20 minutes killed a 135M build
that was still working)."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from pytest_qnn_genai.flows.legacy import BASE_TIMEOUT_S, TIMEOUT_S_PER_CHECKPOINT_MB, build_timeout_s
from pytest_qnn_genai.models.registry import select


def test_a_toy_gets_the_base_and_a_real_checkpoint_its_share(tmp_path: Path) -> None:
    (toy,) = select(["stories260k"])
    assert BASE_TIMEOUT_S <= build_timeout_s(toy) < BASE_TIMEOUT_S + 60
    checkpoint = tmp_path / "model.safetensors"
    with checkpoint.open("wb") as f:  # sparse: the size of SmolLM2-135M's weights, no disk
        f.truncate(538_000_000)
    big = SimpleNamespace(path=lambda attr: checkpoint)
    assert build_timeout_s(big) == BASE_TIMEOUT_S + 538 * TIMEOUT_S_PER_CHECKPOINT_MB
    assert build_timeout_s(big) > 3 * BASE_TIMEOUT_S
