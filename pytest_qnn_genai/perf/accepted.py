"""Speed across commits on the emulator: today's build held to the accepted build's program.

The accepted record (:mod:`pytest_qnn_genai.golden.accepted`) names the cache entry of the program
its figures were measured on (stage, key, and the digest of its files). :func:`accepted_pte`
finds that entry in the local cache or the remote one (``--qnn-remote-cache``) and checks its
digest; the suite counts its work and today's on one workload and holds them equal
(:mod:`pytest_qnn_genai.perf.work`, exact). Today's program whose stamp-free sha256 is the
record's is the accepted program (a rebuild of an unchanged tree on any machine: two builds of
one program differ only in the QNN blobs' build stamps,
:func:`pytest_qnn_genai.sdk.context_binary.program_sha256`); the suite passes it by identity
without counting.

Hazard: another program's accepted counterpart lives only in a cache. A machine whose caches
hold neither it nor a remote copy cannot judge the speed; that is a failure naming the entry (a
gate that cannot tell is never a pass), not a skip. The entry found must have the recorded files
digest, so a rebuild under the same key at another commit is never taken for it.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_qnn_genai.cache import ArtifactCache
    from pytest_qnn_genai.golden.accepted import AcceptedProgram

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
