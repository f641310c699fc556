"""The harness's products' ``make`` functions (named in :mod:`.products`' table).

Each gets every cache entry one need names through the pipeline's methods, the same calls the
fixtures make, so an entry built ahead is the entry a test then finds: the logits products derive
their tokens from the case here (the eval prompt's fp32 continuation, the held-out windows) as the
fixtures derive them from the same functions.
"""
from __future__ import annotations

from pathlib import Path

from pytest_qnn_genai.flows import registry as flows
from pytest_qnn_genai.pipeline.core import Pipeline
from pytest_qnn_genai.pipeline.products import HELDOUT, Build


def quantize(pipeline: Pipeline, build: Build) -> object:
    return pipeline.qdq_entry(build.require_case(), build.require_target())


def flow(pipeline: Pipeline, build: Build) -> object:
    """A flow's product is named after the flow."""
    return pipeline.flow_entry(flows.get(build.need.product), build.require_case(),
                               build.require_target())


def smoke(pipeline: Pipeline, build: Build) -> object:
    return pipeline.smoke_block(build.require_target(), build.need.arg)


def llm_config(pipeline: Pipeline, build: Build) -> object:
    return pipeline.decoder_model_version(build.require_case())


def eval_reference(pipeline: Pipeline, build: Build) -> object:
    return pipeline.eval_reference(build.require_case())


def _windows(build: Build) -> list[tuple[list[int], list[int]]]:
    """Every held-out window's (context, continuation), cut as the suites' fixtures cut them."""
    from pytest_qnn_genai.checks.perplexity import all_windows, heldout_documents

    return [(list(w.context), list(w.continuation))
            for w in all_windows(heldout_documents(build.require_case()))]


def qdq_logits(pipeline: Pipeline, build: Build) -> object:
    case, target = build.require_case(), build.require_target()
    if build.need.arg == HELDOUT:
        return [pipeline.qdq_logits(case, target, c, t) for c, t in _windows(build)]
    ref = pipeline.eval_reference(case)
    return pipeline.qdq_logits(case, target, ref.prompt_tokens, ref.tokens)


def fp32_logits(pipeline: Pipeline, build: Build) -> object:
    return [pipeline.fp32_logits(build.require_case(), c, t) for c, t in _windows(build)]


def transformers_eval_logits(pipeline: Pipeline, build: Build) -> object:
    case = build.require_case()
    ref = pipeline.eval_reference(case)
    return pipeline.transformers_logits(case, list(ref.prompt_tokens) + list(ref.tokens[:-1]))


def runners(pipeline: Pipeline, build: Build) -> object:
    return pipeline.runners_entry(Path(build.need.arg))


def qdq_encodings(pipeline: Pipeline, build: Build) -> object:
    """The encodings of the QDQ graph the flow named by the need's argument built."""
    built = pipeline.artifacts(build.need.arg, build.require_case(), build.require_target())
    return pipeline.qdq_encodings(built.qdq_graph)


def genai(pipeline: Pipeline, build: Build) -> object:
    """genai_pipeline's build of the case (its recipe, the case's prompts, compiled); nothing
    for a case genai's Hugging Face loader cannot read (its test says why in one line)."""
    from pytest_qnn_genai.flows.genai_front import not_huggingface_reason
    from pytest_qnn_genai.pipeline.genai import genai_build as entry

    case = build.require_case()
    if not_huggingface_reason(case) is not None:
        return None
    return entry(pipeline, case, build.require_target())


def gguf_import(pipeline: Pipeline, build: Build) -> object:
    """A GGUF case's Hugging Face folder, imported through the cache (nothing for another)."""
    from pytest_qnn_genai.stages.gguf_import import imported_entry

    source = build.require_case().gguf_file
    return None if source is None else imported_entry(pipeline.cache, source,
                                                      pipeline.package_root)
