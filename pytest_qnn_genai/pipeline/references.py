"""The references a session judges its builds by, as cached products: the fp32 model's greedy
continuation, the CPU QDQ graph's and the fp32 graph's teacher-forced logits, transformers' fp32
logits (an implementation the project did not write).

Contract: a mixin of :class:`~.core.Pipeline` (it builds through the Pipeline's ``entry`` and
reads its prepared model and QDQ graphs); each method's cache key holds what shapes the
reference: the case's build fingerprint (or, for the QDQ graph's logits, the quantize entry's
digest), the tokens, and transformers' version for its logits. Hazard: a reference shares a
prompt's encoding with the runs it judges (:meth:`References.eval_prompt_tokens`), so the two
must never encode it apart.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from pytest_qnn_genai.hybrid import CALIBRATION
from pytest_qnn_genai.pipeline import products
from pytest_qnn_genai.stages.reference import Reference

if TYPE_CHECKING:
    from transformers import PreTrainedModel

    from pytest_qnn_genai.cache import CacheEntry
    from pytest_qnn_genai.models.registry import ModelCase
    from pytest_qnn_genai.stages.prepare import PreparedModel
    from pytest_qnn_genai.stages.quantize import QdqArtifacts
    from pytest_qnn_genai.targets import Target

CASE_FILE = "case.json"  # a case folder's spec (models/case.py reads it)


def folder_sha256(case: ModelCase) -> dict[str, str]:
    """The sha256 of each file of the case's folder but its ``case.json``, whose build settings
    are the case's fingerprint already (its run and judge settings build nothing): a key input
    of what reads the folder's model files beside the fingerprint (a GGUF case's import is in the
    fingerprint)."""
    from pytest_qnn_genai.files import file_sha256

    return {p.name: file_sha256(p) for p in sorted(case.folder.iterdir())
            if p.is_file() and p.name != CASE_FILE}


class References:
    """The reference products; the Pipeline provides the builds they read."""

    _transformers: dict[str, PreTrainedModel]  # case name -> transformers' model, loaded once

    if TYPE_CHECKING:  # what the Pipeline provides
        def entry(self, product: str, inputs: dict[str, object],
                  build: Callable[[Path], object], upstream: Sequence[str] = (),
                  label: str = "") -> CacheEntry: ...

        def prepared(self, case: ModelCase) -> PreparedModel: ...

        def qdq_entry(self, case: ModelCase, target: Target) -> CacheEntry: ...

        def qdq(self, case: ModelCase, target: Target) -> QdqArtifacts: ...

    def eval_prompt_tokens(self, case: ModelCase) -> list[int]:
        """The case's eval prompt as every run encodes it (BOS and EOS from its tokenizer)."""
        from pytest_qnn_genai.runtime.tokenizer import encode, load_tokenizer

        return encode(load_tokenizer(case.path("tokenizer_model")), case.eval_prompt)

    def eval_reference(self, case: ModelCase) -> Reference:
        """The fp32 model's greedy continuation of the case's eval prompt."""
        return self.fp32_reference(case, self.eval_prompt_tokens(case))

    def fp32_reference(self, case: ModelCase, prompt_tokens: list[int]) -> Reference:
        """The fp32 model's greedy continuation of ``prompt_tokens`` and its logits."""
        from pytest_qnn_genai.stages.reference import fp32_reference

        n = case.max_new_tokens
        entry = self.entry(
            products.FP32_REFERENCE, {"case": case.build_fingerprint(),
                               "prompt_tokens": list(prompt_tokens), "max_new_tokens": n},
            lambda out: fp32_reference(self.prepared(case), prompt_tokens, n).save(out),
            label=case.name)
        return Reference.load(entry.path)

    def qdq_logits(self, case: ModelCase, target: Target, prompt_tokens: list[int],
                   tokens: list[int]) -> np.ndarray:
        """QDQ logits (CPU, teacher-forced) for each of ``tokens`` after ``prompt_tokens``."""
        from pytest_qnn_genai.stages.reference import teacher_forced

        def build(out: Path) -> None:
            graph = self.qdq(case, target).graph(CALIBRATION)
            teacher_forced(graph, self.prepared(case), prompt_tokens, tokens).save(out)

        qdq_entry = self.qdq_entry(case, target)
        entry = self.entry(
            products.QDQ_LOGITS, {"prompt_tokens": list(prompt_tokens), "tokens": list(tokens)}, build,
            upstream=(qdq_entry.digest,), label=f"{case.name} {target.soc.name}-{target.backend}")
        return Reference.load(entry.path).logits

    def fp32_logits(self, case: ModelCase, prompt_tokens: list[int],
                    tokens: list[int]) -> np.ndarray:
        """fp32 logits (the calibration graph unquantized, teacher-forced) for each of
        ``tokens`` after ``prompt_tokens``, as :meth:`qdq_logits` has the QDQ graph's."""
        from pytest_qnn_genai.stages.reference import teacher_forced

        def build(out: Path) -> None:
            prepared = self.prepared(case)
            teacher_forced(prepared.graphs[CALIBRATION], prepared, prompt_tokens,
                           tokens).save(out)

        entry = self.entry(
            products.FP32_LOGITS, {"case": case.build_fingerprint(),
                            "prompt_tokens": list(prompt_tokens), "tokens": list(tokens)},
            build, label=case.name)
        return Reference.load(entry.path).logits

    def transformers_logits(self, case: ModelCase, tokens: Sequence[int]) -> np.ndarray:
        """transformers' fp32 logits of one causal pass over ``tokens`` (the independent
        reference, :mod:`pytest_qnn_genai.models.hf`), cached: loading transformers' model costs
        seconds. The key holds every file of the case's folder (the llama3 cases' HF copy too)
        but its ``case.json``, whose build settings are the case's fingerprint (a perf or judge
        setting rebuilds nothing), and transformers' version."""
        from pytest_qnn_genai.models import hf
        from pytest_qnn_genai.sdk.versions import dist_version

        def build(out: Path) -> None:
            if case.name not in self._transformers:
                self._transformers[case.name] = hf.reference_model(case)
            np.save(out / "logits.npy", hf.logits(self._transformers[case.name], list(tokens)))

        files = folder_sha256(case)
        entry = self.entry(
            products.TRANSFORMERS_LOGITS, {"case": case.build_fingerprint(), "folder_sha256": files,
                                    "transformers": dist_version("transformers"),
                                    "tokens": list(tokens)}, build, label=case.name)
        logits: np.ndarray = np.load(entry.file("logits.npy"))
        return logits
