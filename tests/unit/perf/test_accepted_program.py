"""The accepted program is found by its cache entry (stage/key) and must have the recorded
digest: found, it is the entry's .pte; absent from every cache, or another program under the key,
it is one line naming the entry, never a silent skip."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_qnn_genai.cache import ArtifactCache
from pytest_qnn_genai.golden.accepted import AcceptedProgram, Program, Provenance
from pytest_qnn_genai.perf.accepted import AcceptedProgramMissing, accepted_pte
from pytest_qnn_genai.stages.compile import ARTIFACTS_JSON, COMPILE_SPEC_JSON

PROV = Provenance("0123456789abcdef0123", "pytest suites/gate --qnn-update-golden")


def _program(out: Path) -> None:
    (out / "hybrid_llama_qnn.pte").write_bytes(b"program")
    (out / ARTIFACTS_JSON).write_text(json.dumps({"text_decoder": "hybrid_llama_qnn.pte"}))
    (out / COMPILE_SPEC_JSON).write_text("{}")


@pytest.fixture
def cache(tmp_path: Path) -> ArtifactCache:
    return ArtifactCache(tmp_path / "artifacts", {"torch": "t"}, progress=lambda line: None)


def test_the_accepted_entry_is_found_and_checked(cache: ArtifactCache) -> None:
    entry = cache.get_or_build("compile", {"case": "tiny"}, _program)
    found = accepted_pte(cache, AcceptedProgram(Program("compile", entry.key, entry.digest),
                                                PROV))
    assert found == entry.path / "hybrid_llama_qnn.pte" and found.read_bytes() == b"program"
    with pytest.raises(AcceptedProgramMissing) as other:
        accepted_pte(cache, AcceptedProgram(Program("compile", entry.key, "f" * 64), PROV))
    assert str(other.value) == (f"the cache entry compile/{entry.key} holds another program "
                                f"(files digest {entry.digest[:16]}) than the accepted one "
                                "(ffffffffffffffff)")


def test_an_accepted_program_in_no_cache_is_one_line(cache: ArtifactCache) -> None:
    with pytest.raises(AcceptedProgramMissing) as missing:
        accepted_pte(cache, AcceptedProgram(Program("compile", "0" * 32, "1" * 64), PROV))
    message = str(missing.value)
    assert message.startswith(f"the accepted program (compile/{'0' * 32}, built at 0123456789) "
                              "is in neither the local nor the remote cache: fetch it with "
                              "--qnn-remote-cache URL") and "\n" not in message
