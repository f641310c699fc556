"""Speed across commits on the emulator: today's build paired against the accepted build's program.

The accepted record (:mod:`pytest_qnn_genai.golden.accepted`) names the cache entry of the program
its figures were measured on (stage, key, and the digest of its files). :func:`accepted_pte`
finds that entry in the local cache or the remote one (``--qnn-remote-cache``) and checks its
digest; :func:`against_accepted` runs it and today's program in lockstep
(:mod:`pytest_qnn_genai.perf.lockstep`) through the A/B gate's statistics
(:func:`~pytest_qnn_genai.perf.gate.ab_gate`): today's prefill and decode rates over the accepted
one's must stay at or above the floor (``--qnn-perf-accepted-floor``, 0.97) with 95 % confidence.
Lockstep pairs single calls milliseconds apart (measured round ratios of one program against
itself 0.998..1.003 decode, 0.979..1.017 prefill), which is what resolves a 3-5 % slowdown
between commits where whole generations (0.78..1.08) cannot.

Today's program whose stamp-free sha256 is the record's is the accepted program (a rebuild of
an unchanged tree on any machine: two builds of one program differ only in the QNN blobs' build
stamps, :func:`pytest_qnn_genai.sdk.context_binary.program_sha256`); the suite passes it by
identity without pairing.

Hazard: another program's accepted counterpart lives only in a cache. A machine whose caches
hold neither it nor a remote copy cannot judge the speed; that is a failure naming the entry (a
gate that cannot tell is never a pass), not a skip. The entry found must have the recorded files
digest, so a rebuild under the same key at another commit is never taken for it.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pytest_qnn_genai.perf.gate import ABOutcome, ab_gate
from pytest_qnn_genai.perf.lockstep import Lockstep

if TYPE_CHECKING:
    from pytest_qnn_genai.cache import ArtifactCache
    from pytest_qnn_genai.golden.accepted import AcceptedProgram
    from pytest_qnn_genai.perf.benchmark import Minimum, Workload
    from pytest_qnn_genai.runtime.host_runner import HybridRunner

ACCEPTED, TODAY = "accepted", "today"  # the pair's names: A, B


class AcceptedProgramMissing(LookupError):
    """The accepted program is in no cache, or the entry found is another program (one line)."""


def accepted_pte(cache: ArtifactCache, accepted: AcceptedProgram) -> Path:
    """The accepted program's ``.pte``, from the local or the remote cache, its entry's digest
    checked against the record's."""
    from pytest_qnn_genai.stages.compile import PteArtifacts

    p, where = accepted.program, f"{accepted.program.stage}/{accepted.program.key}"
    entry = cache.lookup(p.stage, p.key, label=f"accepted program {accepted.provenance.short}")
    if entry is None:
        raise AcceptedProgramMissing(
            f"the accepted program ({where}, built at {accepted.provenance.short}) is in neither "
            "the local nor the remote cache: fetch it with --qnn-remote-cache URL, or rebuild it "
            f"at that commit (`{accepted.provenance.command}`)")
    if entry.digest != p.digest:
        raise AcceptedProgramMissing(
            f"the cache entry {where} holds another program (files digest {entry.digest[:16]}) "
            f"than the accepted one ({p.digest[:16]})")
    return PteArtifacts.load(entry.path).pte


def against_accepted(accepted: Path, today: Path, tokenizer_model: Path, workload: Workload,
                     rounds: int, floor: float, minimum: Minimum,
                     today_runner: type[HybridRunner] | None = None) -> ABOutcome:
    """Today's program (B) against the accepted one (A), in lockstep on the emulator
    (``today_runner``: the runner class of today's side, the tests' way to slow it)."""
    pairing = Lockstep(ACCEPTED, accepted, TODAY, today, tokenizer_model, workload,
                       b_runner_class=today_runner)
    return ab_gate(pairing, rounds=rounds, floor=floor, minimum=minimum)
