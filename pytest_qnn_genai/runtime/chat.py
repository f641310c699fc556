"""What ``qnn_llama_runner`` wraps a ``--prompt`` in: its chat template by
``--decoder_model_version`` (qnn_llama_runner.cpp ``get_formatted_prompt``, ExecuTorch
1.5.1). A ``--tokenized_prompt`` is never wrapped.

The runner encodes the formatted text with its tokenizer (special-token text parsed as specials)
after its BOS; :func:`runner_prompt_ids` gives the ids the harness expects it to read, which the
gate holds to the runner's own count (``prompt_tokens`` of its observer line) and echo.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_qnn_genai.runtime.tokenizer import CaseTokenizer

_GEMMA = "<start_of_turn>user\n{P}<end_of_turn>\n<start_of_turn>model\n"
# version -> (template of the prompt {P}, system block {S} when --system_prompt is given)
TEMPLATES: dict[str, tuple[str, str]] = {
    "llama2": ("{P}", ""), "qwen2_5": ("{P}", ""), "codegen": ("{P}", ""),
    "llama3": ("{S}<|start_header_id|>user<|end_header_id|>\n\n{P}<|eot_id|>"
               "<|start_header_id|>assistant<|end_header_id|>\n\n",
               "<|start_header_id|>system<|end_header_id|>\n\n{sys}<|eot_id|>"),
    "gemma": (_GEMMA + "{S}", "{sys}<end_of_turn>\n"),
    "gemma2": (_GEMMA, ""),
    "gemma3": (_GEMMA + "{S}", "{sys}<end_of_turn>\n"),
    "gemma4": ("<bos>{S}<|turn>user\n{P}<turn|>\n<|turn>model\n", "<|turn>system\n{sys}<turn|>\n"),
    "granite": ("{S}<|start_of_role|>user<|end_of_role|>{P}<|end_of_text|>\n"
                "<|start_of_role|>assistant<|end_of_role|>",
                "<|start_of_role|>system<|end_of_role|>{sys}<|end_of_text|>\n"),
    "phi_4_mini": ("{S}<|user|>{P}<|end|><|assistant|>", "<|system|>{sys}<|end|>"),
    "qwen3": ("<|im_start|>user\n{P}<|im_end|>\n{S}<|im_start|>assistant",
              "<|im_start|>system\n{sys}<|im_end|>\n"),
    "smollm2_135m": ("{S}<|im_start|>user\n{P}<|im_end|>\n<|im_start|>assistant\n\n",
                     "<|im_start|>system\n{sys}<|im_end|>\n"),
    "smollm3": ("{S}<|im_start|>user\n{P}<|im_end|>\n<|im_start|>assistant\n",
                "<|im_start|>system\n{sys}\n\n"),
    "glm": ("<|user|>\n{P}{S}<|assistant|>\n", "<|system|>\n{sys}"),
}


def format_prompt(version: str | None, prompt: str, system_prompt: str = "") -> str:
    """The text ``qnn_llama_runner --decoder_model_version version --prompt prompt`` encodes
    (None: the flag's default, llama2)."""
    template, system = TEMPLATES[version or "llama2"]
    block = system.replace("{sys}", system_prompt) if system_prompt else ""
    return template.replace("{S}", block).replace("{P}", prompt)


def runner_prompt_ids(tokenizer: CaseTokenizer, version: str | None, prompt: str) -> list[int]:
    """The ids the runner reads for ``--prompt prompt``: BOS, then the formatted text with its
    special tokens parsed."""
    bos = tokenizer.bos_id
    return ([bos] if bos >= 0 else []) + tokenizer.encode(format_prompt(version, prompt),
                                                          specials=True)
