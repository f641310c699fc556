"""The counted-work judge (``perf/work.py``) and the callgrind dump reader (``runtime/work.py``)
on made-up counts: 1 % more instructions fails and names the kernel that grew, equal counts pass,
counts of two workloads are not compared, and a dump's waiting functions, other libraries and
callees' inclusive costs are left out of the emulator's own count."""
from __future__ import annotations

from pathlib import Path

import pytest

from pytest_qnn_genai.perf import work
from pytest_qnn_genai.runtime.work import MethodWork, ProgramWork, read_dump

IDS = [1, 2, 3]


def _program(prefill: int, decode: int, matmul: int = 900, sigmoids: int = 5) -> ProgramWork:
    nodes = {"aten_mul_tensor": 20, "aten_sigmoid_default": sigmoids}
    return ProgramWork(IDS, MethodWork([prefill], {"matmul": prefill}, nodes),
                       MethodWork([decode, decode], {"matmul": matmul, "softmax": 100}, nodes))


def test_one_percent_more_decode_work_fails_naming_the_kernel_that_grew() -> None:
    a, b = _program(5000, 1000), _program(5000, 1010, matmul=920, sigmoids=10)
    prefill, decode = work.judge("legacy", a, "new", b)
    assert prefill.passed and prefill.row().verdict == "pass"
    assert not decode.passed and decode.ratio == pytest.approx(1000 / 1010)
    row = decode.row()  # the two decode steps together
    assert (row.name, row.verdict, row.value) == ("decode_work_ratio", "fail", 0.990099)
    assert row.context["legacy"] == 2000 and row.context["new"] == 2020
    assert "FAIL: op kinds with more nodes in new: aten_sigmoid_default 5 -> 10; " in str(decode)
    assert "matmul 900 -> 920 (+20)" in str(decode)


def test_equal_or_less_work_passes() -> None:
    verdicts = work.judge("kv16", _program(5000, 1000), "new", _program(4000, 1000))
    assert [v.passed for v in verdicts] == [True, True]
    assert verdicts[0].ratio == 1.25 and str(verdicts[1]).endswith("pass")


def test_counts_of_two_workloads_are_not_compared() -> None:
    other = ProgramWork([9], MethodWork([1]), MethodWork([1, 1]))
    with pytest.raises(ValueError, match="different workloads"):
        work.judge("a", _program(1, 1), "b", other)


DUMP = """\
version: 1
creator: callgrind-3.19.0
cmd: python -m pytest_qnn_genai.runtime.work_probe
desc: Trigger: Client Request: kv_forward:2
positions: line
events: Ir
ob=(1) /opt/sdk/lib/libQnnHtpReal.so
fl=(1) ???
fn=(1) 0x0000000000a79240
0 500
+3 20
cob=(2) /usr/lib/x86_64-linux-gnu/libm.so.6
cfn=(2) expf
calls=4 0
0 999999
fn=(3) Graph::sync_bkgrnd_workers(HexagonNNEnv&)
0 42
fn=(4) continue_execution_fast
0 7000
ob=(2)
fn=(2)
0 80
ob=(3) /usr/lib/x86_64-linux-gnu/libc.so.6
fn=(5) _int_malloc
0 1000
totals: 9642
"""


def test_a_dump_counts_the_emulators_own_instructions(tmp_path: Path) -> None:
    path = tmp_path / "callgrind.1.3"
    path.write_text(DUMP)
    tag, cost = read_dump(path)
    assert tag == "kv_forward:2"
    assert dict(cost) == {"0x0000000000a79240": 520, "expf": 80}


def test_no_valgrind_is_one_line_saying_how_to_install_it(monkeypatch) -> None:
    from pytest_qnn_genai.runtime import work as counting

    monkeypatch.setattr("shutil.which", lambda name: None)
    with pytest.raises(counting.WorkError, match=r"^valgrind is not installed: .*apt-get install "
                                                 r"valgrind") as e:
        counting.valgrind()
    assert "\n" not in str(e.value)
