"""Every knob in its three forms (CLI, env, ini), the --no- form of every switch, and SDK
provisioning only when a selected test needs QNN.

The expected names are written out here, not derived from the plugin's knob table: a knob whose
ini key or environment variable drifts from the README's rule fails this test.
"""
from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from pytest_qnn_genai.models import registry
from pytest_qnn_genai.settings import Settings

pytestmark = pytest.mark.usefixtures("qnn_env")

PRINT_SETTINGS = """
import dataclasses, json
def test_print(qnn_settings):
    values = {f.name: getattr(qnn_settings, f.name) for f in dataclasses.fields(qnn_settings)}
    print("SETTINGS=" + json.dumps(values, default=str))
"""

# flag, ini key, environment variable, raw value, Settings field, expected (as JSON shows it)
VALUE_KNOBS = [
    ("--soc", "qnn_soc", "QNN_GENAI_SOC", "SM8750", "socs", None),
    ("--backend", "qnn_backend", "QNN_GENAI_BACKEND", "gpu", "backend", "gpu"),
    ("--device", "qnn_device", "QNN_GENAI_DEVICE", "R5CX1", "devices", ["R5CX1"]),
    ("--qnn-cache-max-gb", "qnn_cache_max_gb", "QNN_GENAI_CACHE_MAX_GB", "2.5", "cache_max_gb", 2.5),
    ("--qnn-remote-cache", "qnn_remote_cache", "QNN_GENAI_REMOTE_CACHE", "http://127.0.0.1:9/c",
     "remote_cache", "http://127.0.0.1:9/c"),
    ("--models", "qnn_models", "QNN_GENAI_MODELS", "stories260k", "models", ["stories260k"]),
    # shard 1: the one test below has no model case x target, so it runs on shard 1 only
    ("--qnn-shard", "qnn_shard", "QNN_GENAI_SHARD", "1/3", "shard", "1/3"),
    ("--qnn-golden-dir", "qnn_golden_dir", "QNN_GENAI_GOLDEN_DIR", "g2", "golden_dir", "g2"),
    ("--qnn-perf-noise", "qnn_perf_noise", "QNN_GENAI_PERF_NOISE", "0.2", "perf_noise", 0.2),
    ("--qnn-perf-min-tokens", "qnn_perf_min_tokens", "QNN_GENAI_PERF_MIN_TOKENS", "7",
     "perf_min_tokens", 7),
    ("--qnn-perf-min-seconds", "qnn_perf_min_seconds", "QNN_GENAI_PERF_MIN_SECONDS", "0.5",
     "perf_min_seconds", 0.5),
    ("--qnn-perf-ratio-floor", "qnn_perf_ratio_floor", "QNN_GENAI_PERF_RATIO_FLOOR", "0.8",
     "perf_ratio_floor", 0.8),
    ("--qnn-perf-accepted-floor", "qnn_perf_accepted_floor", "QNN_GENAI_PERF_ACCEPTED_FLOOR",
     "0.95", "perf_accepted_floor", 0.95),
    ("--qnn-perf-rounds", "qnn_perf_rounds", "QNN_GENAI_PERF_ROUNDS", "3", "perf_rounds", 3),
    ("--qnn-ab", "qnn_ab", "QNN_GENAI_AB", "ar8:new", "ab_pairs", [["ar8", "new"]]),
    ("--adb-host", "qnn_adb_host", "QNN_GENAI_ADB_HOST", "127.0.0.1:5999", "adb_host",
     "127.0.0.1:5999"),
    ("--adb-path", "qnn_adb_path", "QNN_GENAI_ADB_PATH", "/opt/adb", "adb_path", "/opt/adb"),
    ("--runner", "qnn_runner", "QNN_GENAI_RUNNER", "/opt/qnn_llama_runner", "runner",
     "/opt/qnn_llama_runner"),
    ("--qnn-device-libs", "qnn_device_libs", "QNN_GENAI_DEVICE_LIBS", "/opt/libs",
     "qnn_device_libs", "/opt/libs"),
]
PATH_KNOBS = [  # values are paths made by the test
    ("--qnn-sdk", "qnn_sdk", "QNN_GENAI_SDK", "qnn_sdk"),
    ("--qnn-cache-dir", "qnn_cache_dir", "QNN_GENAI_CACHE_DIR", "cache_dir"),
    ("--qnn-report", "qnn_report", "QNN_GENAI_REPORT", "report_dir"),
    ("--executorch-src", "qnn_executorch_src", "QNN_GENAI_EXECUTORCH_SRC", "executorch_src"),
    ("--qnn-cases", "qnn_cases", "QNN_GENAI_CASES", "case_dirs"),
]
SWITCHES = [  # flag, ini key, environment variable, Settings field
    ("--qnn-rebuild", "qnn_rebuild", "QNN_GENAI_REBUILD", "rebuild"),
    ("--nightly", "qnn_nightly", "QNN_GENAI_NIGHTLY", "nightly"),
    ("--qnn-update-golden", "qnn_update_golden", "QNN_GENAI_UPDATE_GOLDEN", "update_golden"),
    ("--qnn-force-update", "qnn_force_update", "QNN_GENAI_FORCE_UPDATE", "force_update"),
    ("--qnn-prebuild", "qnn_prebuild", "QNN_GENAI_PREBUILD", "prebuild"),  # on by default: below
]
OTHER = {"compare_to"}  # needs a results.json: tests/unit/report and the perf suite cover it


def executorch_tree(root: Path) -> Path:
    """An ExecuTorch source tree as the runners' build checks it: every file it compiles."""
    from pytest_qnn_genai.runners.sources import ALL_SOURCES

    for rel in ALL_SOURCES:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).touch()
    return root


def _settings(result: pytest.RunResult) -> dict:
    line = next(x for x in result.outlines if "SETTINGS=" in x)
    return json.loads(line.split("SETTINGS=", 1)[1].rsplit("}", 1)[0] + "}")


def test_every_settings_field_is_covered_here() -> None:
    covered = ({k[4] for k in VALUE_KNOBS} | {k[3] for k in PATH_KNOBS}
               | {k[3] for k in SWITCHES} | OTHER)
    assert covered == {f.name for f in dataclasses.fields(Settings)}


@pytest.mark.parametrize("form", ["cli", "env", "ini"])
def test_every_knob_in_every_form(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                  emulator_sdk_root: Path, tmp_path: Path, form: str) -> None:
    paths = {"qnn_sdk": str(emulator_sdk_root), "cache_dir": str(tmp_path / f"c-{form}"),
             "report_dir": str(tmp_path / f"r-{form}"),
             "executorch_src": str(executorch_tree(tmp_path / f"et-{form}")),
             "case_dirs": str(tmp_path / "cases")}
    mine = tmp_path / "cases" / "mine"  # an outside case: a copy of a shipped one, renamed
    shutil.copytree(registry.MODELS_DIR / "stories260k", mine)
    spec = json.loads((mine / "case.json").read_text())
    (mine / "case.json").write_text(json.dumps({**spec, "name": "mine"}))
    values = [(f, i, e, v) for f, i, e, v, _, _ in VALUE_KNOBS]
    values += [(f, i, e, paths[field]) for f, i, e, field in PATH_KNOBS]
    monkeypatch.delenv("QNN_GENAI_CACHE_DIR", raising=False)
    pytester.makepyfile(PRINT_SETTINGS)
    args = ["-s", "-p", "no:cacheprovider"]
    if form == "cli":
        for flag, _, _, raw in values:
            args += [flag, raw]
        args += [switch for switch, _, _, _ in SWITCHES]
    elif form == "env":
        for _, _, env, value in values:
            monkeypatch.setenv(env, value)
        for _, _, env, _ in SWITCHES:
            monkeypatch.setenv(env, "1")
    else:
        lines = [f"{ini} = {value}" for _, ini, _, value in values]
        lines += [f"{ini} = true" for _, ini, _, _ in SWITCHES]
        pytester.makeini("[pytest]\n" + "\n".join(lines) + "\n")
    result = pytester.runpytest(*args)
    result.assert_outcomes(passed=1)
    got = _settings(result)
    for flag, _, _, _, field, expected in VALUE_KNOBS:
        if field == "socs":
            assert "SM8750" in got[field][0], (form, flag)
        elif field == "golden_dir":
            assert got[field].endswith("/g2"), (form, flag)
        else:
            assert got[field] == expected, (form, flag, got[field])
    for flag, _, _, field in PATH_KNOBS:
        value = got[field][0] if field == "case_dirs" else got[field]
        assert Path(value) == Path(paths[field]).resolve(), (form, flag)
    for flag, _, _, field in SWITCHES:
        assert got[field] is True, (form, flag)


def test_no_flags_turn_switches_off_over_env_and_ini(pytester: pytest.Pytester,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(PRINT_SETTINGS)
    pytester.makeini("[pytest]\nqnn_nightly = true\nqnn_update_golden = true\n")
    monkeypatch.setenv("QNN_GENAI_REBUILD", "1")
    monkeypatch.delenv("CI", raising=False)  # an update under CI needs --qnn-force-update
    on = _settings(pytester.runpytest("-s"))
    assert (on["rebuild"], on["nightly"], on["update_golden"]) == (True, True, True)
    off = _settings(pytester.runpytest("-s", "--no-qnn-rebuild", "--no-nightly",
                                       "--no-qnn-update-golden"))
    assert (off["rebuild"], off["nightly"], off["update_golden"]) == (False, False, False)


def test_prebuild_is_on_by_default_and_each_form_turns_it_off(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(PRINT_SETTINGS)
    assert _settings(pytester.runpytest("-s"))["prebuild"] is True
    assert _settings(pytester.runpytest("-s", "--no-qnn-prebuild"))["prebuild"] is False
    pytester.makeini("[pytest]\nqnn_prebuild = false\n")
    assert _settings(pytester.runpytest("-s"))["prebuild"] is False
    monkeypatch.setenv("QNN_GENAI_PREBUILD", "0")
    pytester.makeini("[pytest]\n")
    assert _settings(pytester.runpytest("-s"))["prebuild"] is False
    assert _settings(pytester.runpytest("-s", "--qnn-prebuild"))["prebuild"] is True


def test_defaults(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(PRINT_SETTINGS)
    got = _settings(pytester.runpytest("-s"))
    assert (got["backend"], got["devices"], got["cache_max_gb"], got["rebuild"]) == (
        "htp", [], None, False)
    assert (got["perf_noise"], got["perf_min_tokens"], got["perf_min_seconds"],
            got["perf_ratio_floor"], got["perf_rounds"]) == (0.1, 64, 2.0, 0.97, 5)
    assert got["perf_accepted_floor"] == 0.97


NEEDS_QNN = """
def test_plain():
    assert 1 + 1 == 2

def test_with_qnn(qnn_sdk):
    pass
"""


def test_no_provisioning_unless_a_selected_test_needs_qnn(pytester: pytest.Pytester,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          tmp_path: Path) -> None:
    """A machine without a C compiler runs tests that do not use QNN; one that does gets one line."""
    monkeypatch.delenv("QNN_SDK_ROOT", raising=False)
    monkeypatch.setenv("QNN_GENAI_CACHE_DIR", str(tmp_path / "fresh-cache"))  # nothing provisioned
    monkeypatch.setenv("CC", "/nonexistent/cc")
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))  # no gcc, no cc
    pytester.makepyfile(NEEDS_QNN)
    plain = pytester.runpytest_subprocess("-k", "plain", "-p", "no:cacheprovider")
    plain.assert_outcomes(passed=1, deselected=1)
    assert not (tmp_path / "fresh-cache" / "qnn-sdk").exists()
    qnn = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert qnn.ret == pytest.ExitCode.USAGE_ERROR
    errors = [x for x in qnn.errlines if x.strip()]
    assert len(errors) == 1 and errors[0].startswith("ERROR: no C compiler found"), errors
