"""The shared remote cache against a real HTTP cache server: Debian's nginx with its DAV module on
loopback (tests/support/dav_server.py). Each "machine" is its own local ArtifactCache; entries are
cheap real builds through ``get_or_build``. No builds of the pipeline here: the suite-level run
is test_remote_cache_suite.py."""
from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from pytest_qnn_genai.cache import ArtifactCache, CacheEntry, CacheWarning, RememberedFailure
from pytest_qnn_genai.cache.remote import mirror as mirror_module
from pytest_qnn_genai.cache.remote import open_remote
from pytest_qnn_genai.cache.remote.base import TOKEN_ENV, blob_path, manifest_path
from pytest_qnn_genai.cache.remote.http import HttpStore
from tests.support.dav_server import NginxDav

pytest_plugins = ["tests.support.dav_fixtures"]

VERSIONS = {"torch": "t", "executorch": "1.5.1"}
FAST = {"timeout_s": 5.0, "retry_delays_s": (0.05, 0.1)}


class UpstreamGap(RememberedFailure, RuntimeError):
    """A build failure that is a property of the key (as flows.genai_front.GenAIStageFailed)."""


def quiet(_line: str) -> None:
    pass


def machine(root: Path, url: str, **store: object) -> ArtifactCache:
    return ArtifactCache(root, VERSIONS, progress=quiet,
                         remote=HttpStore(url, **{**FAST, **store}))


class Builds:
    """Three cheap entries: quantize (two files), compile (from quantize's digest), and a genai
    build that fails upstream (remembered). ``built`` lists what actually ran."""

    def __init__(self) -> None:
        self.built: list[str] = []

    def _write(self, stage: str, files: dict[str, bytes]) -> Callable[[Path], None]:
        def build(out: Path) -> None:
            self.built.append(stage)
            for name, data in files.items():
                (out / name).write_bytes(data)
        return build

    def quantize(self, cache: ArtifactCache) -> CacheEntry:
        return cache.get_or_build("quantize", {"case": "c"}, self._write(
            "quantize", {"graph.pt2": b"graph" * 20000, "qdq.json": b'{"soc": "SM8650"}'}),
            label="c SM8650-htp")

    def compile(self, cache: ArtifactCache, upstream: CacheEntry) -> CacheEntry:
        return cache.get_or_build("compile", {"soc": "SM8650"}, self._write(
            "compile", {"model.pte": b"pte" * 5000}), upstream=[upstream.digest],
            label="c SM8650-htp")

    def genai(self, cache: ArtifactCache) -> None:
        def build(out: Path) -> None:
            self.built.append("genai")
            raise UpstreamGap("genai_pipeline compilation not implemented")
        with pytest.raises(UpstreamGap):
            cache.get_or_build("genai-build", {"case": "c"}, build, label="c SM8650-htp")

    def all(self, cache: ArtifactCache) -> tuple[CacheEntry, CacheEntry]:
        q = self.quantize(cache)
        c = self.compile(cache, q)
        self.genai(cache)
        return q, c


@contextmanager
def cache_warnings() -> Iterator[list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        messages: list[str] = []
        yield messages
    messages += [str(w.message) for w in caught if issubclass(w.category, CacheWarning)]


def out_of_order(server: NginxDav) -> list[str]:
    """Manifests the server stored before one of their files: such an entry was visible as
    whole while half uploaded (requests in the order the client made them)."""
    import json

    stored: set[str] = set()
    bad = []
    for method, path, status in server.requests():
        if method != "PUT" or status not in (200, 201, 204):
            continue
        rel = path.removeprefix("/cache/")
        if rel.startswith("v1/ac/"):
            manifest = json.loads((server.files / rel).read_text())
            bad += [f"{rel}: {name}" for name, meta in manifest["files"].items()
                    if blob_path(meta["sha256"]) not in stored]
        stored.add(rel)
    return bad


def flip_one_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def test_the_second_machine_builds_nothing_and_downloads_every_entry(dav: NginxDav,
                                                                     tmp_path: Path) -> None:
    first, builds1 = machine(tmp_path / "m1", dav.url), Builds()
    q1, c1 = builds1.all(first)
    assert builds1.built == ["quantize", "compile", "genai"]
    assert (first.stats.builds, first.stats.uploaded, first.stats.failures_remembered) == (3, 3, 1)
    assert out_of_order(dav) == []
    puts_before = sum(1 for m, _, _ in dav.requests() if m == "PUT")

    second, builds2 = machine(tmp_path / "m2", dav.url), Builds()
    with cache_warnings() as said:
        q2, c2 = builds2.all(second)
    assert builds2.built == [] and said == []
    assert (second.stats.builds, second.stats.downloaded, second.stats.rejected,
            second.stats.failures_recalled) == (0, 3, 0, 0)
    assert (q2.digest, c2.digest) == (q1.digest, c1.digest)
    assert c2.file("model.pte").read_bytes() == c1.file("model.pte").read_bytes()
    assert sum(1 for m, _, _ in dav.requests() if m == "PUT") == puts_before  # nothing uploaded
    # the summary line names the traffic
    assert "3 downloaded (0.12 MB), 0 uploaded (0.00 MB), 0 rejected as damaged" in \
        second.stats.summary("m2", dav.url)


def test_the_order_check_catches_a_manifest_stored_before_its_files(dav: NginxDav,
                                                                    tmp_path: Path) -> None:
    """What out_of_order() guards: an uploader that put the manifest first is reported."""
    entry = Builds().quantize(ArtifactCache(tmp_path / "m1", VERSIONS, progress=quiet))
    store = HttpStore(dav.url, **FAST)
    store.put(manifest_path("quantize", entry.key), entry.path / "manifest.json")
    for name, meta in entry.manifest["files"].items():
        store.put(blob_path(meta["sha256"]), entry.path / name)
    assert len(out_of_order(dav)) == 2


def test_a_flipped_byte_on_the_server_is_caught_rebuilt_and_reuploaded(dav: NginxDav,
                                                                       tmp_path: Path) -> None:
    q1, _ = Builds().all(machine(tmp_path / "m1", dav.url))
    blob = dav.files / blob_path(q1.manifest["files"]["graph.pt2"]["sha256"])
    flip_one_byte(blob)

    second, builds2 = machine(tmp_path / "m2", dav.url), Builds()
    with cache_warnings() as said:
        q2, _ = builds2.all(second)
    assert builds2.built == ["quantize"]
    assert len(said) == 1 and said[0].startswith(f"remote cache entry quantize/{q1.key} "
                                                 f"(c SM8650-htp) in {dav.url} is damaged "
                                                 "(graph.pt2 does not match its sha256")
    assert (second.stats.rejected, second.stats.builds, second.stats.uploaded,
            second.stats.downloaded) == (1, 1, 1, 2)
    assert q2.file("graph.pt2").read_bytes() == b"graph" * 20000
    assert blob.read_bytes() == b"graph" * 20000  # the re-upload replaced the damaged file

    third, builds3 = machine(tmp_path / "m3", dav.url), Builds()
    builds3.all(third)
    assert (builds3.built, third.stats.downloaded) == ([], 3)


def test_without_the_sha256_check_the_flipped_byte_would_be_used(
        dav: NginxDav, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check above fails when the verification is broken: the damaged file is used."""
    q1, _ = Builds().all(machine(tmp_path / "m1", dav.url))
    flip_one_byte(dav.files / blob_path(q1.manifest["files"]["graph.pt2"]["sha256"]))
    monkeypatch.setattr(mirror_module, "_check_file", lambda path, meta: None)
    second, builds2 = machine(tmp_path / "m2", dav.url), Builds()
    q2, _ = builds2.all(second)
    assert builds2.built == [] and second.stats.rejected == 0
    assert q2.file("graph.pt2").read_bytes() != b"graph" * 20000


def test_a_half_uploaded_or_unreadable_manifest_is_never_used(dav: NginxDav,
                                                              tmp_path: Path) -> None:
    q1, c1 = Builds().all(machine(tmp_path / "m1", dav.url))
    (dav.files / blob_path(c1.manifest["files"]["model.pte"]["sha256"])).unlink()  # half upload
    manifest = dav.files / manifest_path("quantize", q1.key)
    manifest.write_bytes(manifest.read_bytes()[:40])  # a torn write
    second, builds2 = machine(tmp_path / "m2", dav.url), Builds()
    with cache_warnings() as said:
        builds2.all(second)
    assert builds2.built == ["quantize", "compile"]
    assert len(said) == 2 and second.stats.rejected == 2
    assert said[0].startswith(f"remote cache entry quantize/{q1.key} (c SM8650-htp) in {dav.url} "
                              "is damaged (unreadable manifest (")
    assert said[1].startswith(f"remote cache entry compile/{c1.key} (c SM8650-htp) in {dav.url} "
                              "is damaged (model.pte is missing)")


def test_the_server_stopped_mid_run_is_one_warning_and_local_builds(dav: NginxDav,
                                                                    tmp_path: Path) -> None:
    cache, builds = machine(tmp_path / "m1", dav.url), Builds()
    with cache_warnings() as said:
        q = builds.quantize(cache)  # built and uploaded
        dav.stop()
        builds.compile(cache, q)  # the fetch before building finds no server
        builds.genai(cache)  # the remote is not asked again
        cache.get_or_build("other", {}, lambda out: (out / "a").write_bytes(b"a"))
    assert builds.built == ["quantize", "compile", "genai"]
    assert (cache.stats.builds, cache.stats.uploaded) == (4, 1)
    assert len(said) == 1 and said[0].startswith(f"remote cache {dav.url} is unavailable (GET: ")
    assert "ConnectionRefusedError" in said[0] and "(after 3 tries)" in said[0] and said[0].endswith(
        "building locally for the rest of this run")

    fresh, builds2 = machine(tmp_path / "m2", dav.url), Builds()  # a run that starts without it
    with cache_warnings() as said2:
        builds2.all(fresh)
    assert builds2.built == ["quantize", "compile", "genai"] and len(said2) == 1
    assert said2[0] == said[0]  # no request in it: every process says the same line


def test_the_server_lost_during_a_build_costs_only_the_upload(dav: NginxDav,
                                                            tmp_path: Path) -> None:
    cache = machine(tmp_path / "m1", dav.url)

    def build(out: Path) -> None:
        dav.stop()  # after the fetch found nothing, before the upload
        (out / "a.bin").write_bytes(b"built here")

    with cache_warnings() as said:
        entry = cache.get_or_build("s", {}, build)
    assert entry.file("a.bin").read_bytes() == b"built here"
    assert (cache.stats.builds, cache.stats.uploaded) == (1, 0)
    assert len(said) == 1 and said[0].startswith(f"remote cache {dav.url} is unavailable (PUT: ")


@pytest.mark.parametrize("writes", ["405", "403"])
def test_a_read_only_remote_is_one_warning_and_still_serves(dav_factory, tmp_path: Path,
                                                            writes: str) -> None:
    writable = dav_factory()
    filler = machine(tmp_path / "m1", writable.url)
    Builds().quantize(filler)
    filler.get_or_build("extra", {}, lambda out: (out / "x").write_bytes(b"x"))
    writable.stop()
    read_only = dav_factory(root=writable.root, writes=writes)

    cache, builds = machine(tmp_path / "m2", read_only.url), Builds()
    with cache_warnings() as said:
        q = builds.quantize(cache)  # downloaded
        builds.compile(cache, q)  # built; its upload is refused
        extra = cache.get_or_build("extra", {}, lambda out: (out / "x").write_bytes(b"y"))
        builds.genai(cache)  # built; no second warning
    assert builds.built == ["compile", "genai"]
    assert extra.file("x").read_bytes() == b"x"  # downloads go on after the refusal
    assert (cache.stats.downloaded, cache.stats.uploaded, cache.stats.builds) == (2, 0, 2)
    hint = " (no token: is $QNN_GENAI_REMOTE_CACHE_TOKEN set?)" if writes == "403" else ""
    assert said == [f"remote cache {read_only.url} refuses uploads (PUT answered HTTP {writes}"
                    f"{hint}): entries built here are not shared in this run"]


def test_a_bearer_token_from_the_environment_is_sent_and_never_printed(dav_factory,
                                                                       tmp_path: Path) -> None:
    token = "tok-9c1e-secret"
    server = dav_factory(token=token)
    without, builds = machine(tmp_path / "m0", server.url), Builds()
    with cache_warnings() as said:
        builds.quantize(without)
    assert builds.built == ["quantize"] and len(said) == 1
    assert "answered HTTP 401 (no token: is $QNN_GENAI_REMOTE_CACHE_TOKEN set?)" in said[0]

    with_token = ArtifactCache(tmp_path / "m1", VERSIONS, progress=quiet,
                               remote=open_remote(server.url, {TOKEN_ENV: token}))
    Builds().all(with_token)
    assert with_token.stats.uploaded == 3
    other = ArtifactCache(tmp_path / "m2", VERSIONS, progress=quiet,
                          remote=open_remote(server.url, {TOKEN_ENV: token}))
    builds2 = Builds()
    builds2.all(other)
    assert builds2.built == [] and other.stats.downloaded == 3
    assert token not in "".join(said) + other.stats.summary("m2", server.url)
    assert token not in os.environ.get(TOKEN_ENV, "")


def test_lookup_fetches_from_the_remote_without_building(dav: NginxDav, tmp_path: Path) -> None:
    """``lookup`` (the pipeline's "use the legacy build if there is one") asks the remote too."""
    q1 = Builds().quantize(machine(tmp_path / "m1", dav.url))
    second = machine(tmp_path / "m2", dav.url)
    found = second.lookup("quantize", q1.key)
    assert found is not None and found.digest == q1.digest and second.stats.downloaded == 1
    assert second.lookup("quantize", "0" * 32) is None
    gets = sum(1 for m, _, _ in dav.requests() if m == "GET")
    assert second.lookup("quantize", "0" * 32) is None  # a known miss is not asked again
    assert sum(1 for m, _, _ in dav.requests() if m == "GET") == gets
