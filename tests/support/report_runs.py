"""Real report runs for the report's tests: the emulator run of every suite (``pytest suites
--models stories260k --qnn-report``, schema 2), a schema-1 run (its emulator figures carry a false
``pass``), a phone's perf record judged by the committed golden floors, and the real run again a
day later with one compile option changed in its fingerprint."""
from __future__ import annotations

import copy
from datetime import timedelta
from pathlib import Path
from typing import Any

from pytest_qnn_genai import figures
from pytest_qnn_genai.golden.perf import load_golden
from pytest_qnn_genai.report.results import Record, ResultsFile
from pytest_qnn_genai.targets import Target, soc

DATA = Path(__file__).parent / "report_data"
GOLDEN = load_golden(Path(__file__).resolve().parents[2] / "golden" / "perf" / "stories260k.json")
PHONE = Target(soc("SM8650"), "htp", "R5CX1234ABC")
EMU = Target(soc("SM8650"), "htp")


def real_run() -> ResultsFile:
    """The real emulator run (every suite, stories260k)."""
    return ResultsFile.load(DATA / "emulator-run.json")


def phone_record(decode: float, prefill: float = 2400.0) -> Record:
    """A phone's perf record as the perf suite makes it: gated figures by the golden floors."""
    measured = {"prefill_tok_s": prefill, "decode_tok_s": decode, "inference_speed_tok_s": decode,
                "ttft_s": 0.02}
    floored = GOLDEN.judge("SM8650", "htp", measured, 0.1)
    names = {f.name for f in floored}
    return Record.for_target("perf", "stories260k", PHONE, [
        *floored, *(figures.measured(k, v) for k, v in measured.items() if k not in names)],
        test="suites/perf/test_perf.py::test_phone_meets_golden_floors[stories260k-SM8650-htp-"
             "R5CX1234ABC]")


def with_phone(decode: float) -> ResultsFile:
    run = real_run()
    run.add(phone_record(decode))
    return run


def changed_run(option: str = "kHtpHighPerformance", decode_scale: float = 0.8,
                days: int = 1) -> ResultsFile:
    """The real run again, ``days`` later, with one compile option changed in its fingerprint and
    the emulator's decode scaled by ``decode_scale`` (20 % slower by default)."""
    run = real_run()
    data: dict[str, Any] = run.to_dict()
    data["header"]["date"] = (run.header.when + timedelta(days=days)).isoformat()
    (compile_entry,) = [a for a in data["header"]["fingerprint"]["artifacts"]
                        if a["stage"] == "compile"]
    compile_entry["inputs"]["spec"]["backend_options"]["performance_mode"] = option
    compile_entry["key"] = "f" * 32
    for r in data["records"]:
        for f in r["figures"]:
            if r["test"].split("::")[-1].startswith("test_emulator_benchmark") and \
                    f["name"] == "decode_tok_s":
                f["value"] *= decode_scale
    return ResultsFile.from_dict(copy.deepcopy(data))
