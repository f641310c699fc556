"""The configuration agreement on real builds: stories260k's llama.py build (its recorded argv,
parsed by the installed llama.py's own parser) and the staged build read back out of its .pte
and its quantize record agree; the same argv with one flag changed (what llama.py would have been
told for another build) disagrees, naming that setting and where each side was read."""
from __future__ import annotations

from pytest_qnn_genai.flows import config
from pytest_qnn_genai.hybrid import CALIBRATION
from pytest_qnn_genai.runtime.pte_info import compile_options, inspect_pte


def _with(argv: tuple[str, ...], flag: str, value: str) -> list[str]:
    out = list(argv)
    out[out.index(flag) + 1] = value
    return out


def test_the_staged_build_carries_what_llama_py_was_told_and_a_change_shows(
        qnn_pipeline, qnn_sdk, case, sm8650_emulator, legacy) -> None:
    qdq = qnn_pipeline.qdq(case, sm8650_emulator)
    pte = qnn_pipeline.artifacts("new", case, sm8650_emulator).pte
    assert qdq.path(CALIBRATION) == qnn_pipeline.artifacts("new", case, sm8650_emulator).qdq_graph
    built = config.staged_settings(inspect_pte(pte), compile_options(pte), qdq.data)

    def told(argv) -> dict:  # noqa: ANN001
        args = config.parse_legacy_argv(argv)
        return config.legacy_settings(args, legacy.pte.parent,
                                      config.llama_recipe(args.decoder_model))

    assert config.disagreements(config.agreement_of(built, told(legacy.argv))) == []
    bad = config.disagreements(config.agreement_of(
        built, told(_with(legacy.argv, "--prefill_ar_len", "16"))))
    assert bad == ["prefill_ar_len: the staged build carries 32 (.pte prefill_forward input 0 "
                   "shape) but llama.py was given 16 (--prefill_ar_len)"]
    other = config.disagreements(config.agreement_of(
        built, told([a for a in legacy.argv if a != "--enable_x86_64"])))
    assert [b.split(":")[0] for b in other] == ["x86_64"]
