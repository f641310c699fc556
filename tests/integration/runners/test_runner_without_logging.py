"""An early EOS judged from what every runner build writes: upstream's qnn_llama_runner built with
its log compiled out (``ET_LOG_ENABLED=0``, a release or Android build's silence) passes the
runner contract exactly as the logging build does, and agrees with the host runner.

The prompt ends a story, so both models emit EOS well inside the context (measured: stories260k
after 55 tokens, llama3_2_toy after 39, with the host runner)."""
from __future__ import annotations

from pathlib import Path

import pytest

from pytest_qnn_genai.devices.local import LocalTransport
from pytest_qnn_genai.devices.session import DeviceSession
from pytest_qnn_genai.runtime.host_runner import HybridRunner
from pytest_qnn_genai.runtime.tokenizer import encode, load_tokenizer, stop_ids
from pytest_qnn_genai.targets import X86_RUNNER, Target, soc
from tests.support.cases import default_cases as available

PROMPT = "Tom was happy. The end"
TARGET = Target(soc("SM8650"), "htp", X86_RUNNER)
ET_LOG_EOS = "Reached to the end of generation"  # token_generator.cpp's ET_LOG line


@pytest.mark.parametrize("logging", [True, False], ids=["logging", "no-logging"])
@pytest.mark.parametrize("name", sorted(available()))
def test_an_early_eos_passes_whatever_the_runner_logs(qnn_pipeline, qnn_settings, x86_runners,
                                                      emulator_sdk_root: Path, sm8650_emulator,
                                                      tmp_path, name, logging) -> None:
    case = available()[name]
    runners = qnn_pipeline.runners(qnn_settings.executorch_src, logging=logging)
    session = DeviceSession.for_runner(LocalTransport(tmp_path / "device"), TARGET.soc,
                                       runners.llama_runner, emulator_sdk_root, tmp_path,
                                       qnn_option="--qnn-sdk")
    pte = qnn_pipeline.pte(case, sm8650_emulator).pte
    version = qnn_pipeline.decoder_model_version(case)
    tokenizer = load_tokenizer(case.path("tokenizer_model"))
    host = HybridRunner(pte)
    ids = encode(tokenizer, PROMPT)
    n = host.context_len - len(ids)
    result = session.generate(pte, case.path("tokenizer_model"), case.path("tokenizer_bin"),
                              PROMPT, n, TARGET, logits=True, decoder_model_version=version)
    assert result.extra["eos_piece"] is not None and len(result.tokens) < n
    assert result.tokens == host.generate(ids, n, eos_ids=stop_ids(tokenizer, version)).tokens
    log = Path(result.extra["run_log"]).read_text(errors="replace")
    assert (ET_LOG_EOS in log) is logging  # the no-logging build said nothing about its EOS
