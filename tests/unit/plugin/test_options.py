"""Options: CLI, environment and ini forms, precedence, usage errors, help and the header."""
from __future__ import annotations

import pytest

from pytest_qnn_genai.sdk import adapter

pytestmark = pytest.mark.usefixtures("qnn_env")

TARGET_TEST = """
def test_target(qnn_target):
    print("TARGET", qnn_target.id, qnn_target.soc.htp_arch)
"""


def _ids(result: pytest.RunResult) -> list[str]:
    return sorted(line.split("[", 1)[1].split("]")[0]
                  for line in result.outlines if "::test_target[" in line)


def test_default_target_is_sm8650_on_the_emulator(pytester: pytest.Pytester) -> None:
    """Both ways of running the emulator: the host runner here, and upstream's runners, which
    without a source tree or a prebuilt runner are skipped naming what to pass (never silent)."""
    pytester.makepyfile(TARGET_TEST)
    result = pytester.runpytest("-v", "-rs")
    result.assert_outcomes(passed=1, skipped=1)
    assert _ids(result) == ["SM8650-htp-emulator", "SM8650-htp-x86-runner"]
    result.stdout.fnmatch_lines(["SKIPPED [[]1[]] *: SM8650-htp-x86-runner: needs ExecuTorch's own "
                                 "runners for x86: pass --executorch-src DIR *"])


def test_repeatable_soc_case_insensitive(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(TARGET_TEST)
    result = pytester.runpytest("-v", "--soc", "SM8650", "--soc", "sm8750", "-s")
    result.assert_outcomes(passed=2, skipped=2)
    assert _ids(result) == ["SM8650-htp-emulator", "SM8650-htp-x86-runner",
                            "SM8750-htp-emulator", "SM8750-htp-x86-runner"]
    result.stdout.fnmatch_lines(["*TARGET SM8750-htp-emulator v79*"])


def test_env_var_form(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QNN_GENAI_SOC", "SM8550,SM8850")
    pytester.makepyfile(TARGET_TEST)
    result = pytester.runpytest("-v")
    assert _ids(result) == ["SM8550-htp-emulator", "SM8550-htp-x86-runner",
                            "SM8850-htp-emulator", "SM8850-htp-x86-runner"]


def test_ini_form_and_precedence(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makeini("[pytest]\nqnn_soc = SM8450\n")
    pytester.makepyfile(TARGET_TEST)
    assert _ids(pytester.runpytest("-v")) == ["SM8450-htp-emulator", "SM8450-htp-x86-runner"]
    monkeypatch.setenv("QNN_GENAI_SOC", "SM8550")
    assert _ids(pytester.runpytest("-v")) == ["SM8550-htp-emulator", "SM8550-htp-x86-runner"]  # env beats ini
    cli = pytester.runpytest("-v", "--soc", "SM8350")
    assert _ids(cli) == ["SM8350-htp-emulator", "SM8350-htp-x86-runner"]  # CLI wins


def test_unknown_soc_is_one_usage_error_line(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--soc", "SM9999")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.errlines if line.strip()]
    assert errors == [errors[0]] and errors[0].startswith("ERROR: --soc: unknown SoC 'SM9999'")
    for name in ("SM8350", "SM8450", "SM8550", "SM8650", "SM8750", "SM8850"):
        assert name in errors[0]
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


@pytest.mark.parametrize("args,env,needle", [
    (["--backend", "npu"], {}, "--backend: invalid choice 'npu'"),
    ([], {"QNN_GENAI_BACKEND": "dsp"}, "--backend: invalid choice 'dsp'"),
    (["--models", "nosuchmodel"], {}, "--models: unknown model case(s) nosuchmodel"),
    (["--qnn-sdk", "/nonexistent/sdk"], {}, "QNN SDK at /nonexistent/sdk is missing"),
    (["--qnn-remote-cache", "cache.example.com/qnn"], {},
     "--qnn-remote-cache: 'cache.example.com/qnn': expected http(s)://HOST/PATH or an fsspec URL"),
    ([], {"QNN_GENAI_REMOTE_CACHE": "https://ci:s3cret@cache.example.com/qnn"},
     "--qnn-remote-cache: https://cache.example.com/qnn: credentials do not go in the URL"),
    (["--qnn-cases", "/nonexistent/cases"], {},
     "--models/--qnn-cases: model case folder /nonexistent/cases does not exist"),
])
def test_other_usage_errors(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                            args: list[str], env: dict[str, str], needle: str) -> None:
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    result = pytester.runpytest_subprocess(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert needle in result.stderr.str()
    assert "Traceback" not in result.stderr.str() and "s3cret" not in result.stderr.str()


def test_help_lists_every_option_with_env_var(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    text = result.stdout.str()
    for flag, env in [("--soc=NAME", "QNN_GENAI_SOC"), ("--backend=NAME", "QNN_GENAI_BACKEND"),
                      ("--device=SERIAL", "QNN_GENAI_DEVICE"), ("--qnn-sdk=PATH", "QNN_GENAI_SDK"),
                      ("--qnn-cache-dir=PATH", "QNN_GENAI_CACHE_DIR"),
                      ("--qnn-rebuild", "QNN_GENAI_REBUILD"), ("--nightly", "QNN_GENAI_NIGHTLY")]:
        assert flag in text
        assert env in text


def test_header_names_the_whole_stack(pytester: pytest.Pytester, qnn_env) -> None:
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest("--soc", "SM8750", "--device", "R5CX1234")
    header = [line for line in result.outlines if line.startswith("qnn-genai:")]
    assert len(header) == 1
    line = header[0]
    for part in ("soc=SM8750", "backend=htp", "device=R5CX1234",
                 f"qairt={adapter.DEFAULT.qairt} (emulator sdk)", "executorch=1.5.1",
                 "torch=2.13.0", f"cache={qnn_env}"):
        assert part in line


def test_header_says_x86_emulator_without_device(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest()
    result.stdout.fnmatch_lines(["qnn-genai: soc=SM8650 backend=htp device=x86-emulator *"])


def test_a_bad_outside_case_is_one_usage_error_line(pytester: pytest.Pytester) -> None:
    import json
    import shutil

    from pytest_qnn_genai.models import registry

    mine = pytester.path / "cases" / "mine"
    shutil.copytree(registry.MODELS_DIR / "stories260k", mine)
    spec = json.loads((mine / "case.json").read_text())
    (mine / "case.json").write_text(json.dumps({**spec, "name": "mine"}))
    params = json.loads((mine / "params.json").read_text())
    (mine / "params.json").write_text(json.dumps({**params, "dim": 32}))
    result = pytester.runpytest_subprocess("--qnn-cases", "cases")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.errlines if line.strip()]
    assert len(errors) == 1 and "Traceback" not in result.stderr.str()
    assert errors[0].startswith("ERROR: --models/--qnn-cases: model case mine (")
    assert "wrong checkpoint shape for tok_embeddings.weight" in errors[0]
