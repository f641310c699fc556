"""Fixture ``qnn_accepted``: a gate test's figures held to the last accepted measurement.

A test judges its figures against the case's floors first (the outer wall), then calls
``qnn_accepted.hold(checks, *extra)``: every numeric figure of ``checks`` (and ``extra``, e.g. a
greedy path's tokens) is compared with ``golden/accepted/<case>.json`` for this target's key
(:mod:`pytest_qnn_genai.golden.accepted`, one record for every x86-64 machine); the comparison
goes into the run report and a change fails naming old and new. A case, target key (a SoC, a
phone) or figure with no record fails in one line with the command that records it
(:mod:`pytest_qnn_genai.golden.no_record`): its figures would otherwise be held to the floors
alone.

Under ``--qnn-update-golden`` it writes instead and judges nothing: the figures are recorded as
``info`` and the test returns without judging: the write is journalled
(:mod:`pytest_qnn_genai.golden.updates`), so the run reports the test *updated*, never passed,
and no run judges what it just wrote.
"""
from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_qnn_genai import figures
from pytest_qnn_genai.golden import accepted as record
from pytest_qnn_genai.golden import accepted_judge as judge
from pytest_qnn_genai.golden import no_record
from pytest_qnn_genai.golden.updates import GoldenWriteRefused
from pytest_qnn_genai.models.registry import ModelCase
from pytest_qnn_genai.pipeline import Pipeline
from pytest_qnn_genai.settings import Settings
from pytest_qnn_genai.targets import Target

if TYPE_CHECKING:
    from pytest_qnn_genai.cache import CacheEntry
    from pytest_qnn_genai.checks.parity import Check
    from pytest_qnn_genai.plugin.fixtures import Recorder

__all__ = ["qnn_accepted"]


_PROVENANCE = pytest.StashKey[record.Provenance]()


def provenance(config: pytest.Config) -> record.Provenance:
    """This run's commit (``+dirty`` when the tree has changes) and command line (the xdist
    controller's, on a worker). Read once a process: the run's own first write to a record makes
    the tree dirty, and every later figure of the same run would otherwise say ``+dirty``."""
    if _PROVENANCE not in config.stash:
        config.stash[_PROVENANCE] = _read_provenance(config)
    return config.stash[_PROVENANCE]


def _read_provenance(config: pytest.Config) -> record.Provenance:
    from pytest_qnn_genai.report.fingerprint import git_state

    state = git_state(config.rootpath)
    commit = str(state.get("commit") or "unknown commit")
    if state.get("dirty"):
        commit += "+dirty"
    argv = (getattr(config, "workerinput", None) or {}).get("mainargv")
    args = list(argv[1:]) if argv else list(config.invocation_params.args)
    return record.Provenance(commit, shlex.join(["pytest", *args]))


def _program(entry: CacheEntry) -> record.Program:
    """A compile entry as a record names it: stage, key, files digest and the stamp-free
    sha256 of its ``.pte``."""
    from pytest_qnn_genai.sdk.context_binary import program_sha256
    from pytest_qnn_genai.stages.compile import PteArtifacts

    return record.Program(str(entry.manifest["stage"]), entry.key, entry.digest,
                          program_sha256(PteArtifacts.load(entry.path).pte))


class AcceptedGate:
    """One test's view of its case's accepted record (see the module docstring)."""

    def __init__(self, golden_dir: Path, root: Path, case: str, key: str,
                 update: bool, config: pytest.Config, recorder: Recorder) -> None:
        self.golden_dir, self.case, self.key = golden_dir, case, key
        self.path = record.path_for(golden_dir, case)
        self.source = str(self.path.relative_to(root) if self.path.is_relative_to(root)
                          else self.path)
        self.update, self._config, self._record = update, config, recorder

    def _load(self) -> record.AcceptedRecord:
        """The case's record (empty when there is no file); fails the test in one line when the
        record is damaged."""
        try:
            return record.load(self.path, self.case)
        except record.AcceptedRecordError as e:
            pytest.fail(str(e), pytrace=False)

    def hold(self, rows: Sequence[Check], *extra: record.Measured,
             program: CacheEntry | None = None) -> None:
        """Compare ``rows``' numeric figures and ``extra`` with the accepted ones (or, under the
        update flag, accept them, and ``program`` as the build they were measured on): record
        the comparison, fail on a change."""
        measured = [*judge.measured_of(rows), *extra]
        if self.update:
            built = None if program is None else _program(program)
            try:
                diff = record.update(self.path, self.case, self.key, measured,
                                     provenance(self._config), allow_write=True, program=built)
            except (record.AcceptedRecordError, GoldenWriteRefused) as e:
                pytest.fail(str(e), pytrace=False)
            self._record("gate", [figures.info(f"{m.name}_vs_accepted", judge.scalar(m.value),
                                               better=m.better, context={"updated": self.source})
                                  for m in measured])
            if diff:
                print(diff)  # the change, beside the summary's one line per figure
            return  # judged nothing: the journalled write reports the test updated
        accepted = self._load()
        run = provenance(self._config).command
        compared = judge.compare(accepted, self.key, measured, self.source, run)
        if program is not None:
            compared.append(judge.same_program(accepted, self.key, program.digest,
                                                self.source))
        self._record("gate", [c.figure for c in compared])
        problems = [c.problem for c in compared if c.problem]
        if self.key not in accepted.targets:  # one line for the whole hole, not one a figure
            what = (f"{self.case} for {self.key}" if self.path.exists()
                    else f"{self.case} (no file)")
            problems = [no_record.line(self.source, what, no_record.by_update(run))]
        if problems:
            pytest.fail("\n".join(problems), pytrace=False)

    def program(self) -> record.AcceptedProgram:
        """The program accepted for this target (fails the test when the record has none, in one
        line naming the file and the flag that records one)."""
        accepted = self._load().programs.get(self.key)
        if accepted is None:
            pytest.fail(no_record.line(self.source, f"{self.case}'s program for {self.key}",
                                       no_record.by_update(provenance(self._config).command)),
                        pytrace=False)
        return accepted


@pytest.fixture
def qnn_accepted(request: pytest.FixtureRequest, qnn_settings: Settings, qnn_case: ModelCase,
                 qnn_target: Target, qnn_pipeline: Pipeline,
                 qnn_record: Recorder) -> AcceptedGate:
    """``qnn_accepted.hold(checks, *extra)``: the test's figures held to the case's accepted
    record for this target (module docstring)."""
    key = record.key_for(qnn_target, qnn_pipeline.build_target(qnn_target))
    return AcceptedGate(qnn_case.golden_dir or qnn_settings.golden_dir,
                        request.config.rootpath, qnn_case.name, key,
                        qnn_settings.update_golden, request.config, qnn_record)
