"""Stage 1, prepare: a model case → eager fp32 static-LLaMA graphs, tokenizer and example inputs.

This builds what the legacy flow's ``TextDecoder._prepare_model`` builds (executorch's
``static_llama.LlamaModel`` loaded with the state dict the case's family reads, wq/wk rows
permuted for half-split RoPE where the model config says ``transform_weight``, masked softmax
where it says ``masked_softmax`` and the QNN SDK is 2.35 or newer, attention/feed-forward/linear
layers rewritten as 1x1 convs), once per graph:

- ``prefill_forward``: AR = ``case.prefill_ar_len``, a KV cache of ``max_context_len - AR`` slots
  (not in kv mode: llama.py builds no prefill graph there, the prompt goes through ``kv_forward``);
- ``kv_forward``: AR = 1 (the decode graph), or in lookahead mode
  :attr:`~pytest_qnn_genai.models.case.ModelCase.decode_ar_len` (llama.py's
  next_power_of_two((window + gcap) * (ngram - 1))): the same model, only the decode graph's AR
  length differs (``process_model_args``), and its encodings are the calibration graph's as ever;
- ``calibration``: AR = ``max_context_len`` with an empty KV cache, never lowered — the legacy
  flow calibrates this graph and copies its encodings to the other two.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import torch

from pytest_qnn_genai.compat import llama_example
from pytest_qnn_genai.hybrid import CALIBRATION, DECODE, PREFILL
from pytest_qnn_genai.models import layouts
from pytest_qnn_genai.models.registry import ModelCase
from pytest_qnn_genai.sdk import require_active

if TYPE_CHECKING:
    from pytest_qnn_genai.models.params import ModelParams
    from pytest_qnn_genai.untyped import Json, Tokenizer, Upstream

Inputs = tuple[torch.Tensor, ...]  # a graph's positional inputs: tokens, *masks, pos, *k, *v

MASKED_SOFTMAX_MIN_QNN = "2.35"  # process_model_args: older SDKs get the feature turned off


class UnsupportedCaseError(ValueError):
    """A model case needs a legacy-flow feature the staged flow does not implement."""


# llama.py model-config features this flow does not build: (attribute, the value it can build,
# what the feature is). Each is one line naming the feature (README: "What llama.py builds and
# the staged flow does not").
UNBUILT_CONFIG = (
    ("num_sharding", 1, "graph sharding (llama.py's SplitGraph pass)"),
    ("r1", False, "SpinQuant R1"), ("r2", False, "SpinQuant R2"),
)


BUILT_MODES = ("kv", "hybrid", "lookahead")  # every --model_mode llama.py builds


def check_case(case: ModelCase) -> None:
    """Refuse cases whose legacy config needs more than this flow does (plain LlamaModel,
    kv, hybrid or lookahead mode, one shard, no SpinQuant R1/R2, no partial rotary with transformed
    weights): one line naming each feature."""
    llama_pkg = llama_example.package()
    config = llama_pkg.SUPPORTED_LLM_MODELS.get(case.decoder_model)
    problems = [] if config else [f"decoder_model {case.decoder_model!r} is unknown to executorch"]
    if config:
        problems += [f"{what} ({attr}={getattr(config, attr)!r})"
                     for attr, ok, what in UNBUILT_CONFIG if getattr(config, attr) != ok]
        if case.decoder_model in llama_pkg.LLM_VARIANT_ARCHS:
            arch = llama_pkg.LLM_VARIANT_ARCHS[case.decoder_model].__name__
            problems.append(f"a LlamaModel variant architecture ({arch})")
        if config.transform_weight and case.params_dict.get("partial_rotary_factor", 1.0) != 1.0:
            problems.append("transform_weight with partial_rotary_factor < 1")
    if case.model_mode not in BUILT_MODES:
        problems.append(f"model_mode {case.model_mode!r} (it builds {', '.join(BUILT_MODES)})")
    if problems:
        raise UnsupportedCaseError(f"{case.name}: the staged flow does not support "
                                   f"{', '.join(problems)}")


def graph_ar_len(case: ModelCase, graph: str) -> int:
    """Tokens per call of ``graph``."""
    return {PREFILL: case.prefill_ar_len, DECODE: case.decode_ar_len,
            CALIBRATION: case.max_context_len}[graph]


def masked_softmax(case: ModelCase) -> bool:
    """Whether llama.py builds ``case`` with masked softmax: its model config asks for it and
    the QNN SDK (``QNN_SDK_ROOT``, as executorch reads it) is 2.35 or newer. Without an
    active SDK llama.py would decide "older"; here that is an error, not a silent difference."""
    if not llama_example.package().SUPPORTED_LLM_MODELS[case.decoder_model].masked_softmax:
        return False
    require_active(f"{case.name}: deciding masked softmax as llama.py does (by the SDK version)")
    from executorch.backends.qualcomm.utils.check_qnn_version import is_qnn_sdk_version_less_than

    return not is_qnn_sdk_version_less_than(MASKED_SOFTMAX_MIN_QNN)


def _model_args(case: ModelCase, graph: str) -> Upstream:
    """``ModelArgs`` as the legacy ``process_model_args`` sets them for this graph (batch 1)."""
    args = llama_example.static_llama().ModelArgs(**case.params_dict)
    ar_len = graph_ar_len(case, graph)
    args.max_batch_size = 1
    args.max_seq_len = case.max_seq_len
    args.max_context_len = case.max_context_len
    args.use_kv_cache = case.max_context_len != ar_len or graph == CALIBRATION
    # SpinQuant R3 (smollm2_135m, qwen2_5-*): static_llama rotates q and k by a Hadamard matrix
    # in the graph itself, as llama.py's process_model_args asks it to (enable_r3 = config.r3)
    args.enable_r3 = bool(llama_example.package().SUPPORTED_LLM_MODELS[case.decoder_model].r3)
    args.ar_len = ar_len
    args.kv_io_bit_width = case.kv_io_bit_width
    if llama_example.package().SUPPORTED_LLM_MODELS[case.decoder_model].masked_softmax:
        args.enable_masked_softmax = masked_softmax(case)
    return args


def _build_graph(case: ModelCase, graph: str,
                 state_dict: dict[str, torch.Tensor]) -> torch.nn.Module:
    from executorch.backends.qualcomm.utils.utils import convert_linear_to_conv2d

    args = _model_args(case, graph)
    model = llama_example.static_llama().LlamaModel(args, ar_len=args.ar_len, output_new_cache_only=True,
                                       output_cache=True, use_i64_token=False)
    model.load_state_dict({k: v.clone() for k, v in state_dict.items()}, strict=True)
    for layer in model.layers:
        if getattr(layer.attention, "prepare_attention_conv", None):
            layer.attention.prepare_attention_conv()
        if getattr(layer.feed_forward, "prepare_feedforward_conv", None):
            layer.feed_forward.prepare_feedforward_conv()
    converted: torch.nn.Module = convert_linear_to_conv2d(model).to(torch.float32).eval()
    return converted


def flat_inputs(example: Sequence[Upstream]) -> Inputs:
    """``get_example_inputs()`` → the positional export inputs (tokens, *masks, pos, *k, *v)."""
    tokens, masks, *rest = example
    out = [tokens, *masks]
    if rest:
        pos, k_caches, v_caches = rest
        out += [pos, *k_caches, *v_caches]
    return tuple(out)


@dataclass
class PreparedModel:
    """A model case ready for quantization: eager fp32 graphs, tokenizer, example inputs."""

    case: ModelCase
    params: ModelParams
    metadata: dict[str, Json]  # the decode graph's constant methods (before quantization)
    graph_metadata: dict[str, dict[str, Json]]  # get_metadata() of every graph
    graphs: dict[str, torch.nn.Module]
    example_inputs: dict[str, Inputs]
    tokenizer: Tokenizer  # the family's calibration tokenizer (a pytorch_tokenizers object), as llama.py's
    calibration_mask: Upstream = field(repr=False, default=None)  # the calibration graph's AttentionMask

    def encode(self, text: str, bos: bool = True) -> list[int]:
        """Token ids of ``text`` by the calibration tokenizer (``bos`` as it takes it)."""
        return list(self.tokenizer.encode(text, bos=bos, eos=False))

    def calibration_ids(self, prompt: str) -> list[int]:
        """The tokens llama.py calibrates on for one ``--calib_samples`` prompt (the family's
        chat template, if any, then encode with BOS)."""
        return self.case.family.calibration_ids(self.case, self.tokenizer, prompt)

    def calibration_batches(self, prompts: tuple[str, ...] | list[str]) -> list[Inputs]:
        """Calibration-graph inputs per prompt chunk, as legacy calibration builds them."""
        return calibration_batches(self, [self.calibration_ids(p) for p in prompts])

    @torch.no_grad()
    def reference_logits(self, tokens: list[int]) -> np.ndarray:
        """fp32 logits ``[len(tokens), vocab]`` of the calibration graph (one causal pass)."""
        return run_calibration_graph(self.graphs[CALIBRATION], self, tokens)


def calibration_batches(prepared: PreparedModel, sequences: list[list[int]]) -> list[Inputs]:
    """Pad each ``max_context_len`` chunk, mask its padding rows, add positions and empty caches."""
    from executorch.examples.qualcomm.oss_scripts.llama.masking_utils import AttentionMask

    ctx = prepared.case.max_context_len
    _tokens, _mask, pos, *caches = prepared.example_inputs[CALIBRATION]
    batches = []
    for seq in sequences:
        for start in range(0, len(seq), ctx):
            chunk = seq[start:start + ctx]
            mask = AttentionMask.from_input_ids(prepared.calibration_mask, [chunk], ctx)
            tokens = torch.zeros(1, ctx, dtype=torch.int32)
            tokens[0, :len(chunk)] = torch.tensor(chunk, dtype=torch.int32)
            positions = torch.arange(ctx, dtype=torch.int32).unsqueeze(0)
            batches.append((tokens, *(m.mask for m in mask.masks), positions, *caches))
    return batches


def run_calibration_graph(module: torch.nn.Module, prepared: PreparedModel, tokens: list[int]) -> np.ndarray:
    """Logits ``[len(tokens), vocab]`` of a calibration-shaped graph (eager or QDQ)."""
    ctx = prepared.case.max_context_len
    if not 0 < len(tokens) <= ctx:
        raise ValueError(f"need 1..{ctx} tokens, got {len(tokens)}")
    (inputs,) = calibration_batches(prepared, [list(tokens)])
    with torch.no_grad():
        logits = module(*inputs)[0]
    return np.asarray(logits[0, :len(tokens)].detach().float().numpy())


def prepare(case: ModelCase) -> PreparedModel:
    """Load ``case``'s checkpoint and tokenizer and build its static-LLaMA graphs (fp32, eager)."""
    check_case(case)
    params = case.params_dict
    state_dict = case.family.load_checkpoint(case)
    if llama_example.package().SUPPORTED_LLM_MODELS[case.decoder_model].transform_weight:
        state_dict = layouts.transform_weight(state_dict, params)
    graphs, examples, graph_meta, cal_mask = {}, {}, {}, None
    torch.manual_seed(0)  # get_example_inputs draws random tokens; keep them reproducible
    for name in (*case.lowered_graphs, CALIBRATION):  # llama.py's order: decode, prefill, calibration
        model: Upstream = _build_graph(case, name, state_dict)  # a static_llama.LlamaModel
        example = model.get_example_inputs()
        graphs[name], examples[name] = model, flat_inputs(example)
        graph_meta[name] = model.get_metadata()
        if name == CALIBRATION:
            cal_mask = example[1]
    return PreparedModel(case=case, params=params, metadata=dict(graph_meta[DECODE]),
                         graph_metadata=graph_meta, graphs=graphs, example_inputs=examples,
                         tokenizer=case.family.calibration_tokenizer(case),
                         calibration_mask=cal_mask)
