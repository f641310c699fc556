"""``qnn_llama_runner``'s chat templates: what ``--decoder_model_version`` wraps a ``--prompt`` in
(qnn_llama_runner.cpp ``get_formatted_prompt``; the system block only with ``--system_prompt``)
and the extra EOS pieces it stops at (runner.cpp ``Runner::load``), at ExecuTorch 1.5.1.
A ``--tokenized_prompt`` is never wrapped."""
from __future__ import annotations

from typing import Any

# version -> (template, system block used only with --system_prompt, extra EOS pieces):
# qnn_llama_runner.cpp:get_formatted_prompt and runner.cpp:Runner::load
_GEMMA = "<start_of_turn>user\n{P}<end_of_turn>\n<start_of_turn>model\n"
VERSIONS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "llama2": ("{P}", "", ()), "qwen2_5": ("{P}", "", ()),
    "codegen": ("{P}", "", ("<|endoftext|>",)),
    "llama3": ("{S}<|start_header_id|>user<|end_header_id|>\n\n{P}<|eot_id|>"
               "<|start_header_id|>assistant<|end_header_id|>\n\n",
               "<|start_header_id|>system<|end_header_id|>\n\n{sys}<|eot_id|>", ("<|eot_id|>",)),
    "gemma": (_GEMMA + "{S}", "{sys}<end_of_turn>\n", ("<end_of_turn>",)),
    "gemma2": (_GEMMA, "", ("<end_of_turn>",)),
    "gemma3": (_GEMMA + "{S}", "{sys}<end_of_turn>\n", ("<end_of_turn>",)),
    "gemma4": ("<bos>{S}<|turn>user\n{P}<turn|>\n<|turn>model\n", "<|turn>system\n{sys}<turn|>\n",
               ("<turn|>",)),
    "granite": ("{S}<|start_of_role|>user<|end_of_role|>{P}<|end_of_text|>\n"
                "<|start_of_role|>assistant<|end_of_role|>",
                "<|start_of_role|>system<|end_of_role|>{sys}<|end_of_text|>\n", ()),
    "phi_4_mini": ("{S}<|user|>{P}<|end|><|assistant|>", "<|system|>{sys}<|end|>", ("<|end|>",)),
    "qwen3": ("<|im_start|>user\n{P}<|im_end|>\n{S}<|im_start|>assistant",
              "<|im_start|>system\n{sys}<|im_end|>\n", ("<|im_end|>",)),
    "smollm2_135m": ("{S}<|im_start|>user\n{P}<|im_end|>\n<|im_start|>assistant\n\n",
                     "<|im_start|>system\n{sys}<|im_end|>\n", ("<|im_end|>",)),
    "smollm3": ("{S}<|im_start|>user\n{P}<|im_end|>\n<|im_start|>assistant\n",
                "<|im_start|>system\n{sys}\n\n", ("<|im_end|>",)),
    "glm": ("<|user|>\n{P}{S}<|assistant|>\n", "<|system|>\n{sys}", ("<|user|>",))}


def format_prompt(flags: dict[str, Any], prompt: str) -> str:
    """qnn_llama_runner.cpp:get_formatted_prompt."""
    template, system, _ = VERSIONS[flags["decoder_model_version"]]
    block = system.replace("{sys}", flags["system_prompt"]) if flags["system_prompt"] else ""
    return template.replace("{S}", block).replace("{P}", prompt)
