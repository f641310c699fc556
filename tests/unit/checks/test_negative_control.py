"""checks.negative_control: a graph made worse on purpose must fail the bounds real runs are
judged by (what suites/parity ``test_perturbed_genai_calibration_fails_its_gate`` asserts on the
real graphs), here on the figures measured for them."""
from __future__ import annotations

from pathlib import Path

from pytest_qnn_genai.checks import qdq_windows
from pytest_qnn_genai.checks.negative_control import perturbation_problems

# the bounds the measured figures below were set against
GOLDEN_BOUNDS = (Path(__file__).resolve().parents[3] / "golden" / "genai"
                 / "qdq_windows.json")


def _metrics(**kw: float) -> qdq_windows.Metrics:
    base = dict(sqnr_db=20.0, mean_kl=0.002, p99_kl=0.03, top1=0.99, first_divergence=-1,
                word_perplexity=1.25)
    base.update(kw)
    return qdq_windows.Metrics(**base)


def test_a_perturbation_the_bounds_let_pass_is_named() -> None:
    """suites/parity test_perturbed_genai_calibration_fails_its_gate: llama3_2_toy's committed
    genai bounds catch its measured one-prompt calibration (what the suite shows on the real
    graphs); bounds loosened past those figures, or a perturbation that moved nothing, are named."""
    bounds = qdq_windows.load_bounds(GOLDEN_BOUNDS, "llama3_2_toy")
    genai = bounds["genai_vs_legacy"]
    normal = _metrics(sqnr_db=19.221, mean_kl=0.001694, p99_kl=0.019171, top1=0.9950,
                      word_perplexity=1.2477)  # genai's measured figures (the file's notes)
    one = _metrics(sqnr_db=18.170, mean_kl=0.002421, p99_kl=0.035908, top1=0.9917,
                   word_perplexity=1.2500)  # its one-prompt calibration, measured
    assert perturbation_problems(normal, one, genai, "g.json", "one prompt") == []
    loose = {**genai, "min_sqnr_db": 18.0, "max_mean_kl": 0.003, "max_p99_kl": 0.04,
             "min_top1": 0.99, "max_word_perplexity": 1.26}
    [passed] = perturbation_problems(normal, one, loose, "g.json", "one prompt")
    assert passed.startswith("one prompt passed the gate (g.json): one prompt vs unperturbed: "
                             "logits SQNR vs fp32 (dB) 18.17 (≥ 18 (g.json)); ")
    unmoved = perturbation_problems(normal, normal, genai, "g.json", "one prompt")
    assert [p.split(":")[0] for p in unmoved] == ["one prompt",
                                                  "one prompt passed the gate (g.json)"]
    assert "not above the unperturbed graph's 0.001694" in unmoved[0]
