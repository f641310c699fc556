"""genai's saved QDQ module loads in a process that has built nothing: its output spec names
transformers' ``CausalLMOutputWithPast``, which torch's pytree knows only once transformers'
outputs are imported (a warm run's worker that takes the product from the cache failed with
"Deserializing transformers.modeling_outputs.CausalLMOutputWithPast in pytree is not
registered")."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

LOAD = """
import sys
from pathlib import Path
from pytest_qnn_genai.flows.genai_front import GenAIQdq
assert "transformers.modeling_outputs" not in sys.modules
module = GenAIQdq(Path(sys.argv[1]), {}).module()
import torch
print(type(module(torch.ones(1, 3))).__name__)
"""


def _save_model_output_program(path: Path) -> None:
    import torch
    from transformers.modeling_outputs import CausalLMOutputWithPast

    class Head(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> CausalLMOutputWithPast:
            return CausalLMOutputWithPast(logits=x * 2)

    torch.export.save(torch.export.export(Head(), (torch.ones(1, 3),)), str(path))


def test_the_module_loads_in_a_fresh_process(tmp_path: Path) -> None:
    graph = tmp_path / "genai_qdq.pt2"
    _save_model_output_program(graph)
    done = subprocess.run([sys.executable, "-c", LOAD, str(graph)], capture_output=True,
                          text=True, timeout=300)
    if done.returncode:
        pytest.fail(done.stderr.strip().splitlines()[-1])
    assert done.stdout.split()[-1] == "CausalLMOutputWithPast"
