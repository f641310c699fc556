"""What differs between two runs' fingerprints: versions, harness, settings, each artifact's key
inputs (build settings, compile options), rebuilt content."""
from __future__ import annotations

import copy

from pytest_qnn_genai.report.fingerprint import Difference, artifact, collect, differences

SPEC = {"soc": "SM8650", "htp_arch": "v75", "shared_buffer": False,
        "backend_options": {"performance_mode": "kHtpBurst", "use_weight_sharing": False}}


def _fp(spec: dict = SPEC, executorch: str = "1.5.1", digest: str = "d" * 64,
        extra: tuple = ()) -> dict:
    arts = [artifact("quantize", "stories260k SM8650-htp", "q" * 32, "a" * 64,
                     {"case": {"quant_recipe": "16a4w"}, "code": "c1"}),
            artifact("compile", "stories260k SM8650-htp", "k" * 32 if spec == SPEC else "m" * 32,
                     digest, {"spec": spec, "code": "c2"}, upstream=["a" * 64]), *extra]
    return collect({"executorch": executorch, "torch": "2.13.0+cpu"},
                   {"commit": "abc", "dirty": False}, {"perf_noise": 0.1},
                   {"stories260k": {"max_new_tokens": 48}}, arts)


def test_no_difference_between_equal_runs_or_against_an_old_run() -> None:
    assert differences(_fp(), _fp()) == []
    assert differences({}, _fp()) == []  # a run written before fingerprints


def test_one_compile_option_is_named_leaf_by_leaf() -> None:
    faster: dict = copy.deepcopy(SPEC)
    faster["backend_options"]["performance_mode"] = "kHtpHighPerformance"
    assert differences(_fp(), _fp(faster)) == [Difference(
        "compile stories260k SM8650-htp · spec.backend_options.performance_mode",
        "kHtpBurst", "kHtpHighPerformance")]


def test_versions_settings_and_a_rebuild_with_the_same_key() -> None:
    diffs = differences(_fp(), _fp(executorch="1.6.0", digest="e" * 64))
    assert Difference("executorch", "1.5.1", "1.6.0") in diffs
    assert Difference(f"compile stories260k SM8650-htp rebuilt (same key {'k' * 12})",
                      f"digest {'d' * 12}", f"digest {'e' * 12}") in diffs


def test_artifacts_sharing_a_label_pair_by_least_difference() -> None:
    """Two qdq-logits entries of one label (two token sequences): each is paired with its own
    previous entry, so only the one that changed is reported."""
    one = artifact("qdq-logits", "stories260k", "1" * 32, "x" * 64, {"tokens": [1, 2]})
    two = artifact("qdq-logits", "stories260k", "2" * 32, "y" * 64, {"tokens": [3, 4]})
    changed = artifact("qdq-logits", "stories260k", "3" * 32, "z" * 64, {"tokens": [3, 5]})
    diffs = differences(_fp(extra=(one, two)), _fp(extra=(changed, one)))
    assert diffs == [Difference("qdq-logits stories260k · tokens", "[3, 4]", "[3, 5]")]


def test_new_and_unused_artifacts() -> None:
    extra = artifact("smoke-lower", "attention-16a8w SM8650-htp-emulator", "s" * 32, "t" * 64, {})
    assert differences(_fp(), _fp(extra=(extra,))) == [
        Difference("smoke-lower attention-16a8w SM8650-htp-emulator", None,
                   f"key {'s' * 12} (new)")]
    assert differences(_fp(extra=(extra,)), _fp()) == [
        Difference("smoke-lower attention-16a8w SM8650-htp-emulator", f"key {'s' * 12}", None)]
