"""Build failures the cache remembers: a RememberedFailure is kept under its key like an artifact,
raised again without building until the key changes; no other exception is remembered."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from pytest_qnn_genai.cache import ArtifactCache, RememberedFailure
from pytest_qnn_genai.cache.housekeeping import entries

VERSIONS = {"torch": "t", "executorch": "1.5.1"}


class UpstreamGap(RememberedFailure, RuntimeError):
    """Stands for flows.genai_front.GenAIStageFailed: a failure that is a property of the inputs."""


def quiet(_line: str) -> None:
    pass


def _failing(calls: list[int], exc: BaseException):
    def build(out: Path) -> None:
        calls.append(1)
        (out / "partial.bin").write_bytes(b"half")  # left by the failed build: must not be kept
        raise exc
    return build


def test_a_remembered_failure_is_raised_again_without_building(tmp_path: Path) -> None:
    calls: list[int] = []
    build = _failing(calls, UpstreamGap("compiler has no body yet\nsecond line"))
    first = ArtifactCache(tmp_path, VERSIONS, progress=quiet)
    with pytest.raises(UpstreamGap, match="compiler has no body yet") as raised:
        first.get_or_build("genai-build", {"case": "x"}, build, label="x SM8650-htp")
    assert raised.value.remembered is None  # the builder's own exception, its traceback intact
    with pytest.raises(UpstreamGap) as again:  # same process
        first.get_or_build("genai-build", {"case": "x"}, build, label="x SM8650-htp")
    later = ArtifactCache(tmp_path, VERSIONS, progress=quiet)  # a later run
    with pytest.raises(UpstreamGap) as warm:
        later.get_or_build("genai-build", {"case": "x"}, build, label="x SM8650-htp")
    assert len(calls) == 1
    for exc in (again.value, warm.value):
        assert isinstance(exc, RuntimeError) and exc.remembered
        assert str(exc).startswith("compiler has no body yet [remembered by the artifact cache: "
                                   "genai-build x SM8650-htp failed so on ")
        assert "\n" not in str(exc)
    assert (first.stats.builds, first.stats.failures_remembered, first.stats.failures_recalled,
            first.stats.hits) == (1, 1, 1, 0)
    assert (later.stats.builds, later.stats.failures_recalled) == (0, 1)
    [info] = entries(tmp_path)
    manifest = json.loads((info.path / "manifest.json").read_text())
    assert manifest["files"] == {} and sorted(p.name for p in info.path.iterdir()) == [
        "manifest.json"]
    assert manifest["failure"] == {"type": f"{__name__}.UpstreamGap",
                                   "reason": "compiler has no body yet"}


def test_a_new_key_retries_the_build(tmp_path: Path) -> None:
    calls: list[int] = []
    build = _failing(calls, UpstreamGap("no compiler in 1.5.1"))
    with pytest.raises(UpstreamGap):
        ArtifactCache(tmp_path, VERSIONS, progress=quiet).get_or_build("genai-build", {}, build)
    newer = ArtifactCache(tmp_path, {**VERSIONS, "executorch": "1.6.0"}, progress=quiet)
    with pytest.raises(UpstreamGap) as raised:
        newer.get_or_build("genai-build", {}, build)
    assert len(calls) == 2 and raised.value.remembered is None


def test_a_rebuild_request_retries_the_build(tmp_path: Path) -> None:
    calls: list[int] = []
    build = _failing(calls, UpstreamGap("no compiler"))
    with pytest.raises(UpstreamGap):
        ArtifactCache(tmp_path, VERSIONS, progress=quiet).get_or_build("genai-build", {}, build)
    rebuild = ArtifactCache(tmp_path, VERSIONS, rebuild_before=time.time() + 1, progress=quiet)
    with pytest.raises(UpstreamGap):
        rebuild.get_or_build("genai-build", {}, build)
    assert len(calls) == 2


@pytest.mark.parametrize("exc", [RuntimeError("flaky"), ValueError("bad input"),
                                 KeyboardInterrupt()])
def test_other_exceptions_are_never_remembered(tmp_path: Path, exc: BaseException) -> None:
    calls: list[int] = []
    cache = ArtifactCache(tmp_path, VERSIONS, progress=quiet)
    for _ in range(2):
        with pytest.raises(type(exc)):
            cache.get_or_build("s", {}, _failing(calls, exc))
    assert len(calls) == 2 and entries(tmp_path) == []
    assert cache.stats.failures_remembered == 0


def test_a_failure_of_an_unknown_class_is_rebuilt_not_converted(tmp_path: Path) -> None:
    """A failed entry naming a class this process does not define (renamed since, or its module
    not imported) is treated as absent: the builder runs again and decides."""
    calls: list[int] = []
    cache = ArtifactCache(tmp_path, VERSIONS, progress=quiet)
    with pytest.raises(UpstreamGap):
        cache.get_or_build("s", {}, _failing(calls, UpstreamGap("gap")))
    [info] = entries(tmp_path)
    manifest = json.loads((info.path / "manifest.json").read_text())
    manifest["failure"]["type"] = "somewhere.else.GoneError"
    (info.path / "manifest.json").write_text(json.dumps(manifest))

    def works(out: Path) -> None:
        calls.append(1)
        (out / "a.bin").write_bytes(b"built")

    entry = ArtifactCache(tmp_path, VERSIONS, progress=quiet).get_or_build("s", {}, works)
    assert len(calls) == 2 and entry.file("a.bin").read_bytes() == b"built"


def test_lookup_raises_a_remembered_failure(tmp_path: Path) -> None:
    cache = ArtifactCache(tmp_path, VERSIONS, progress=quiet)
    with pytest.raises(UpstreamGap):
        cache.get_or_build("s", {}, _failing([], UpstreamGap("gap")))
    with pytest.raises(UpstreamGap, match="remembered"):
        cache.lookup("s", cache.key("s", {}))


def test_a_genai_stage_failure_is_remembered() -> None:
    """upstream's StageError is a property of the build key (executorch's version and the
    harness's code are in it): remembered; an API change is never remembered."""
    from pytest_qnn_genai.flows.genai_front import GenAIApiError, GenAIStageFailed

    assert issubclass(GenAIStageFailed, RememberedFailure)
    assert issubclass(GenAIStageFailed, RuntimeError)
    assert not issubclass(GenAIApiError, RememberedFailure)
