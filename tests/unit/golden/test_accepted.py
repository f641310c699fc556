"""Accepted records: a figure held to its last accepted value at its printed resolution (a 1 dB
QDQ SQNR drop, a .pte 3 % larger, one changed greedy token, one printed step each way fail naming
old and new; the committed figures themselves pass), refused and merged updates, strict one-line
errors naming the file and the field, and target keys."""
from __future__ import annotations

import json
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_qnn_genai import figures
from pytest_qnn_genai.golden import accepted as acc
from pytest_qnn_genai.golden import accepted_judge as judge
from pytest_qnn_genai.golden.accepted import Measured, Provenance
from pytest_qnn_genai.golden.updates import GoldenWriteRefused
from pytest_qnn_genai.models.registry import available
from pytest_qnn_genai.targets import X86_RUNNER, Target, soc

REPO = Path(__file__).resolve().parents[3]
EMULATOR_KEY = "SM8650-htp-emulator"
PROV = Provenance("0123456789abcdef", "pytest suites/gate --models tiny --qnn-update-golden")
# what the gate holds on the emulator (suites/gate: test_gate, test_heldout_perplexity,
# test_transformers_reference): a shipped case's record must hold each of them
HELD = ("qdq_sqnr_db", "qdq_greedy_agreement", "qdq_greedy_tokens", "pte_bytes",
        "target_min_row_cosine", "target_sqnr_db", "fp32_word_perplexity", "qdq_word_perplexity",
        "target_word_perplexity", "target_fp32_perplexity_ratio", "qdq_kl_vs_fp32",
        "qdq_top1_vs_fp32", "target_kl_vs_fp32", "target_top1_vs_fp32",
        "fp32_vs_transformers_max_abs", "fp32_vs_transformers_greedy_agreement",
        "target_vs_transformers_sqnr_db", "target_vs_transformers_greedy_agreement")
BETTER = {"pte_bytes": figures.LOWER, "fp32_vs_transformers_max_abs": figures.LOWER}


def _better(name: str) -> str | None:
    if name in BETTER:
        return BETTER[name]
    if "perplexity" in name or "_kl_" in name:
        return figures.LOWER
    return None if name.endswith("_tokens") else figures.HIGHER


def _committed(case: str) -> acc.AcceptedRecord:
    return acc.load(acc.path_for(REPO / "golden", case), case)


def _as_measured(record: acc.AcceptedRecord, key: str) -> list[Measured]:
    return [Measured(name, a.value, _better(name)) for name, a in record.targets[key].items()]


def _problems(record: acc.AcceptedRecord, measured: list[Measured]) -> list[str]:
    return [c.problem for c in judge.compare(record, EMULATOR_KEY, measured, "accepted.json",
                                             PROV.command) if c.problem]


def _changed(measured: list[Measured], name: str, value: acc.Value) -> list[Measured]:
    return [replace(m, value=value) if m.name == name else m for m in measured]


@pytest.fixture(params=sorted(available()))  # every tier: the nightly's case too
def committed(request: pytest.FixtureRequest) -> tuple[acc.AcceptedRecord, list[Measured]]:
    """A shipped case's committed record (one for every machine) and its emulator figures as a
    run would measure them."""
    record = _committed(request.param)
    return record, _as_measured(record, EMULATOR_KEY)


def test_every_shipped_case_holds_the_gates_figures_on_the_emulator(committed) -> None:
    record, _ = committed
    missing = [n for n in HELD if record.figure(EMULATOR_KEY, n) is None]
    assert not missing, f"{record.case}: no accepted {missing} for {EMULATOR_KEY}"
    program = record.programs[EMULATOR_KEY]  # the build they were measured on, for speed
    assert len(program.program.digest) == 64 and program.program.stage == "compile"
    for name, a in record.targets[EMULATOR_KEY].items():
        assert len(a.provenance.commit) >= 40 and not a.provenance.commit.endswith("+dirty"), name
        assert "--qnn-update-golden" in a.provenance.command, name


def test_the_committed_figures_pass(committed) -> None:
    record, measured = committed
    compared = judge.compare(record, EMULATOR_KEY, measured, "accepted.json", PROV.command)
    assert [c.figure.verdict for c in compared] == [figures.PASS] * len(measured)
    assert all(c.problem is None for c in compared)
    sqnr = next(c.figure for c in compared if c.figure.name == "qdq_sqnr_db_vs_accepted")
    assert sqnr.rule == figures.EQUAL and sqnr.judge.startswith("= accepted ")
    assert "accepted.json [SM8650-htp-emulator]" in sqnr.judge


def test_a_one_db_qdq_sqnr_drop_fails_naming_old_and_new(committed) -> None:
    record, measured = committed
    old = record.figure(EMULATOR_KEY, "qdq_sqnr_db").value
    new = round(old - 1.0, 3)
    problems = _problems(record, _changed(measured, "qdq_sqnr_db", new))
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"qdq_sqnr_db = {new!r}, accepted {old!r}: -1 (")
    assert ", worse; judged against accepted.json [SM8650-htp-emulator], measured at " \
        in problems[0]
    assert "--qnn-update-golden" in problems[0]  # the command that measured it


def test_one_printed_step_is_a_change_and_a_better_value_fails_too(committed) -> None:
    """The resolution is the printed value (the figures are bit-identical run to run): one
    step of 0.001 dB either way is a change; an improvement names the flag that accepts it."""
    record, measured = committed
    old = record.figure(EMULATOR_KEY, "qdq_sqnr_db").value
    worse = _problems(record, _changed(measured, "qdq_sqnr_db", round(old - 0.001, 3)))
    better = _problems(record, _changed(measured, "qdq_sqnr_db", round(old + 0.001, 3)))
    assert len(worse) == len(better) == 1
    assert ", worse;" in worse[0] and "accept it" not in worse[0]
    assert ", better (accept it with --qnn-update-golden);" in better[0]


def test_a_pte_three_percent_larger_fails(committed) -> None:
    record, measured = committed
    old = record.figure(EMULATOR_KEY, "pte_bytes").value
    new = round(old * 1.03)
    problems = _problems(record, _changed(measured, "pte_bytes", new))
    assert len(problems) == 1 and problems[0].startswith(
        f"pte_bytes = {new}, accepted {old}: +{new - old} (+3.00 %), worse;"), problems


def test_one_changed_greedy_token_fails_naming_it(committed) -> None:
    record, measured = committed
    old = record.figure(EMULATOR_KEY, "qdq_greedy_tokens").value
    new = (*old[:5], old[5] + 1, *old[6:])
    problems = _problems(record, _changed(measured, "qdq_greedy_tokens", new))
    assert len(problems) == 1
    assert problems[0].startswith(f"qdq_greedy_tokens: token 5 is {old[5] + 1}, accepted "
                                  f"{old[5]} ("), problems
    shorter = _problems(record, _changed(measured, "qdq_greedy_tokens", old[:-1]))
    assert shorter[0].startswith(f"qdq_greedy_tokens: {len(old) - 1} tokens, accepted {len(old)}")


def test_a_perplexity_rise_fails_with_its_share(committed) -> None:
    record, measured = committed
    old = record.figure(EMULATOR_KEY, "qdq_word_perplexity").value
    new = round(old * 1.005, 4)
    problems = _problems(record, _changed(measured, "qdq_word_perplexity", new))
    assert len(problems) == 1 and "%), worse;" in problems[0], problems


def test_a_figure_without_an_accepted_value_fails_as_no_record(tmp_path: Path) -> None:
    """Never info, never a pass: the floors alone would let a regression through."""
    record = acc.AcceptedRecord("tiny")
    [c] = judge.compare(record, EMULATOR_KEY, [Measured("qdq_sqnr_db", 20.0)], "x.json",
                        "pytest suites/gate --models tiny")
    assert c.figure.verdict == figures.FAIL and c.figure.rule == figures.NO_RECORD
    assert figures.no_records([c.figure]) == 1
    assert c.problem == (
        "x.json: no record of qdq_sqnr_db for SM8650-htp-emulator: record it with `pytest "
        "suites/gate --models tiny --qnn-update-golden` (an update run outside CI; judge the "
        "figures it writes before committing them)")
    assert acc.load(tmp_path / "absent.json", "tiny") == record


def test_update_merges_and_is_the_only_writer(tmp_path: Path) -> None:
    path = acc.path_for(tmp_path, "tiny")
    with pytest.raises(GoldenWriteRefused, match="--qnn-update-golden"):
        acc.update(path, "tiny", EMULATOR_KEY, [Measured("a", 1.0)], PROV, allow_write=False)
    assert not path.exists()
    diff = acc.update(path, "tiny", EMULATOR_KEY, [Measured("a", 1.0), Measured("t", (3, 4))],
                      PROV, allow_write=True)
    assert "+" in diff and path.is_file()
    later = Provenance("fedcba9876543210", "pytest again --qnn-update-golden")
    acc.update(path, "tiny", EMULATOR_KEY, [Measured("b", 2)], later, allow_write=True)
    acc.update(path, "tiny", "SM8750-htp-phone", [Measured("a", 5.5)], later, allow_write=True)
    record = acc.load(path, "tiny")
    assert record.targets == {
        EMULATOR_KEY: {"a": acc.Accepted(1.0, PROV), "t": acc.Accepted((3, 4), PROV),
                       "b": acc.Accepted(2, later)},
        "SM8750-htp-phone": {"a": acc.Accepted(5.5, later)}}
    text = path.read_text()
    assert text == record.to_json()
    assert '"t": {"value": [3, 4], "commit": "0123456789abcdef"' in text  # one line a figure
    assert acc.update(path, "tiny", "SM8750-htp-phone", [Measured("a", 5.5)], later,
                      allow_write=True) == ""  # unchanged: no diff, no write


def test_the_program_is_kept_beside_the_figures(tmp_path: Path) -> None:
    path = acc.path_for(tmp_path, "tiny")
    program = acc.Program("compile", "0" * 32, "1" * 64)
    acc.update(path, "tiny", EMULATOR_KEY, [Measured("a", 1.0)], PROV, allow_write=True,
               program=program)
    acc.update(path, "tiny", EMULATOR_KEY, [Measured("b", 2.0)], PROV, allow_write=True)
    record = acc.load(path, "tiny")
    assert record.programs == {EMULATOR_KEY: acc.AcceptedProgram(program, PROV)}
    assert sorted(record.targets[EMULATOR_KEY]) == ["a", "b"]
    same = judge.same_program(record, EMULATOR_KEY, "1" * 64, "x.json").figure
    other = judge.same_program(record, EMULATOR_KEY, "2" * 64, "x.json").figure
    assert (same.value, same.verdict) == ("the accepted program", figures.INFO)
    assert other.value == "another program than the accepted 0123456789's"


def test_updates_from_several_workers_lose_nothing(tmp_path: Path) -> None:
    path = acc.path_for(tmp_path, "tiny")
    threads = [threading.Thread(target=acc.update, args=(
        path, "tiny", EMULATOR_KEY, [Measured(f"f{i}", float(i))], PROV),
        kwargs={"allow_write": True}) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(acc.load(path, "tiny").targets[EMULATOR_KEY]) == [f"f{i}" for i in range(8)]


def _valid() -> dict:
    return {"case": "tiny", "targets": {EMULATOR_KEY: {"figures": {
        "qdq_sqnr_db": {"value": 20.5, "commit": "abc", "command": "pytest x"}}}}}


def _broken(edit) -> dict:
    data = _valid()
    edit(data)
    return data


FIGURE = ("targets", EMULATOR_KEY, "figures", "qdq_sqnr_db")


def _set(*path_and_value):
    *path, value = path_and_value

    def edit(data: dict) -> None:
        node = data
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = value
    return edit


@pytest.mark.parametrize("data,needle", [
    ("{not json", "not valid JSON ("),
    ([1], "the top level must be an object"),
    (_broken(lambda d: d.pop("targets")), ": targets is missing"),
    (_broken(_set("extra", 1)), ": extra is not a field"),
    (_broken(_set("case", "other")), "case is 'other' but the file is named for 'tiny'"),
    (_broken(_set("targets", "SM9999-htp-emulator", {"figures": {}})),
     "targets.SM9999-htp-emulator is no target key"),
    (_broken(_set("targets", "SM8650-htp-laptop", {"figures": {}})),
     "targets.SM8650-htp-laptop is no target key"),
    (_broken(_set("targets", EMULATOR_KEY, "figures", "qdq_sqnr_db", "value", "20.5")),
     f"targets.{EMULATOR_KEY}.figures.qdq_sqnr_db.value must be a number or a list of token "
     "ids, got \"20.5\""),
    (_broken(_set(*FIGURE, "value", [1, -2])),
     f"targets.{EMULATOR_KEY}.figures.qdq_sqnr_db.value must hold non-negative integers"),
    (_broken(_set(*FIGURE, "value", True)), ".qdq_sqnr_db.value must be a number"),
    (_broken(_set(*FIGURE, "commit", "")),
     f"targets.{EMULATOR_KEY}.figures.qdq_sqnr_db.commit must be a non-empty string"),
    (_broken(lambda d: d["targets"][EMULATOR_KEY]["figures"]["qdq_sqnr_db"].pop("command")),
     f"targets.{EMULATOR_KEY}.figures.qdq_sqnr_db.command is missing"),
    (_broken(_set("targets", EMULATOR_KEY, "program", {"stage": "compile", "key": "k"})),
     f"targets.{EMULATOR_KEY}.program.digest is missing"),
    (_broken(_set("targets", EMULATOR_KEY, "program", {
        "stage": "compile", "key": "k", "digest": 5, "commit": "c", "command": "p"})),
     f"targets.{EMULATOR_KEY}.program.digest must be a non-empty string, got 5"),
    (_broken(_set("targets", EMULATOR_KEY, "programme", {})),
     f"targets.{EMULATOR_KEY}.programme is not a field (the fields: figures, program)"),
    (_broken(_set(*FIGURE, 20.5)),
     f"targets.{EMULATOR_KEY}.figures.qdq_sqnr_db must be an object, got 20.5"),
])
def test_a_malformed_record_is_one_line_naming_the_file_and_field(tmp_path: Path, data,
                                                                   needle: str) -> None:
    path = acc.path_for(tmp_path, "tiny")
    path.parent.mkdir(parents=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    with pytest.raises(acc.AcceptedRecordError) as err:
        acc.load(path, "tiny")
    message = str(err.value)
    assert message.startswith(f"{path}: ") and needle in message and "\n" not in message, message
    with pytest.raises(acc.AcceptedRecordError):  # an update does not overwrite a damaged file
        acc.update(path, "tiny", EMULATOR_KEY, [Measured("a", 1.0)], PROV, allow_write=True)


def test_target_keys() -> None:
    sm8650 = soc("SM8650")
    emulator, runner = Target(sm8650), Target(sm8650, device=X86_RUNNER)
    phone = Target(sm8650, device="R5CW123")
    assert acc.key_for(emulator, emulator) == "SM8650-htp-emulator"
    assert acc.key_for(runner, runner) == "SM8650-htp-x86-runner"
    assert acc.key_for(phone, phone) == "SM8650-htp-phone"
    # a phone that runs the simulator with the emulator's builds (the loopback phone)
    assert acc.key_for(phone, emulator) == "SM8650-htp-x86-runner"


def test_measured_of_takes_the_numeric_judged_rows() -> None:
    from pytest_qnn_genai.checks.parity import Check

    rows = [Check("SQNR", "fp32", 20.5, name="qdq_sqnr_db", better=figures.HIGHER),
            Check("tokens", "", "identical", name="same_tokens"),
            Check("count", "", True, name="flag"), Check("n", "", 3, name="n")]
    assert judge.measured_of(rows) == [Measured("qdq_sqnr_db", 20.5, figures.HIGHER, "SQNR"),
                                     Measured("n", 3, None, "n")]
