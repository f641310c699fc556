"""What licenses keeping upstream's x86 runner's judged runs (``pipeline/outputs.py``): the
runner on QNN's x86 HTP simulator is deterministic, and a real run survives being kept.

The default case's staged program: two runs of one request (hybrid + kv mode, with the logits
dump) are bit-identical in ids, text, the hybrid run's text and both logits dumps; through the
pipeline a judged run of the x86-runner target is made once and the kept copy is that run, whole
(``tests/unit/pipeline/test_kept_runner_runs.py`` holds which changes get a run of their own)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from pytest_qnn_genai.cache import ArtifactCache
from pytest_qnn_genai.devices.session import DeviceSessions
from pytest_qnn_genai.pipeline import Pipeline
from pytest_qnn_genai.targets import X86_RUNNER, Target, soc

TARGET = Target(soc("SM8650"), "htp", X86_RUNNER)


def _same(a, b) -> None:  # noqa: ANN001 - two RunResults
    assert (a.prompt_tokens, a.tokens, a.text) == (b.prompt_tokens, b.tokens, b.text)
    assert a.extra["hybrid_text"] == b.extra["hybrid_text"]
    assert a.logits is not None and b.logits is not None
    assert a.logits.tobytes() == b.logits.tobytes()
    assert a.prompt_logits is not None and b.prompt_logits is not None
    assert a.prompt_logits.tobytes() == b.prompt_logits.tobytes()


def test_two_runs_of_one_request_are_bit_identical(qnn_pipeline, sm8650_emulator, case,
                                                   x86_runner_session) -> None:
    pte = qnn_pipeline.pte(case, sm8650_emulator).pte
    version = qnn_pipeline.decoder_model_version(case)
    a, b = (x86_runner_session.generate(pte, case.path("tokenizer_model"),
                                        case.path("tokenizer_bin"), case.eval_prompt,
                                        case.max_new_tokens, TARGET, logits=True,
                                        decoder_model_version=version) for _ in range(2))
    assert len(a.tokens) > 1
    _same(a, b)


def test_a_judged_run_is_made_once_and_kept_whole(qnn_pipeline, qnn_settings, sm8650_emulator,
                                                  case, x86_runners, emulator_sdk_root,
                                                  tmp_path: Path) -> None:
    pte = qnn_pipeline.pte(case, sm8650_emulator).pte
    sessions = DeviceSessions(qnn_settings, tmp_path / "devices",
                              x86=lambda: (x86_runners.llama_runner, emulator_sdk_root))
    pipeline = Pipeline(ArtifactCache(tmp_path / "cache", qnn_pipeline.cache.versions),
                        devices=sessions)
    pipeline.decoder_model_version(case)  # an entry of its own in this cache
    builds = pipeline.cache.stats.builds
    try:
        first = pipeline.run_pte(case, TARGET, pte, logits=True, judged=True)
        again = pipeline.run_pte(case, TARGET, pte, logits=True, judged=True)
        assert sessions.session(TARGET).runs == 1 and pipeline.cache.stats.builds == builds + 1
        assert again.extra["outputs_from"].startswith("runner-run ")
        _same(first, again)
        assert np.array_equal(first.logits, again.logits)
    finally:
        sessions.close()
