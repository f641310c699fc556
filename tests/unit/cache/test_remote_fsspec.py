"""The remote cache through fsspec (a real fsspec filesystem: ``file://``), its URL checks and the
summary line. The HTTP store is held against a real nginx in tests/integration/cache."""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from pytest_qnn_genai.cache import ArtifactCache, CacheStats, CacheWarning
from pytest_qnn_genai.cache.remote import RemoteConfigError, check_url, open_remote, redact
from pytest_qnn_genai.cache.remote.fsspec import FsspecStore

VERSIONS = {"torch": "t", "executorch": "e"}


def quiet(_line: str) -> None:
    pass


def _chain(cache: ArtifactCache, calls: list[str]) -> tuple:
    """Two entries, the second built from the first (its key holds the first's digest)."""
    def first(out: Path) -> None:
        calls.append("quantize")
        (out / "graph.pt2").write_bytes(b"graph" * 1000)
        (out / "qdq.json").write_text('{"soc": "SM8650"}')

    def second(out: Path) -> None:
        calls.append("compile")
        (out / "model.pte").write_bytes(b"pte" * 500)

    a = cache.get_or_build("quantize", {"case": "c"}, first, label="c")
    b = cache.get_or_build("compile", {"soc": "SM8650"}, second, upstream=[a.digest], label="c")
    return a, b


def _machine(tmp_path: Path, name: str, url: str) -> ArtifactCache:
    return ArtifactCache(tmp_path / name, VERSIONS, progress=quiet, remote=open_remote(url))


def test_a_second_machine_downloads_every_entry_through_fsspec(tmp_path: Path) -> None:
    url = (tmp_path / "shared").as_uri()  # file:///...
    built: list[str] = []
    a1, b1 = _chain(_machine(tmp_path, "m1", url), built)
    m2 = _machine(tmp_path, "m2", url)
    again: list[str] = []
    a2, b2 = _chain(m2, again)
    assert built == ["quantize", "compile"] and again == []
    assert (m2.stats.builds, m2.stats.downloaded, m2.stats.rejected) == (0, 2, 0)
    assert (a2.digest, b2.digest) == (a1.digest, b1.digest)  # so downstream keys agree
    assert b2.file("model.pte").read_bytes() == b"pte" * 500
    assert a2.path.parent.parent == tmp_path / "m2"


def test_a_flipped_byte_is_rejected_rebuilt_and_replaced(tmp_path: Path) -> None:
    url = (tmp_path / "shared").as_uri()
    a1, _ = _chain(_machine(tmp_path, "m1", url), [])
    blob = tmp_path / "shared" / "v1" / "cas" / a1.manifest["files"]["graph.pt2"]["sha256"]
    data = bytearray(blob.read_bytes())
    data[10] ^= 0x01
    blob.write_bytes(bytes(data))
    m2, calls = _machine(tmp_path, "m2", url), []
    with pytest.warns(CacheWarning, match=r"remote cache entry quantize/\w+ \(c\) .* is damaged "
                                          r"\(graph.pt2 does not match its sha256"):
        _chain(m2, calls)
    assert calls == ["quantize"]  # rebuilt here; compile's key holds the same digest: downloaded
    assert (m2.stats.rejected, m2.stats.builds, m2.stats.uploaded, m2.stats.downloaded) == (
        1, 1, 1, 1)
    assert blob.read_bytes() == b"graph" * 1000  # the rebuild replaced the damaged blob
    m3 = _machine(tmp_path, "m3", url)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        _chain(m3, [])
    assert (m3.stats.builds, m3.stats.downloaded) == (0, 2)


def test_a_manifest_for_another_key_or_with_a_path_is_damage(tmp_path: Path) -> None:
    url = (tmp_path / "shared").as_uri()
    a1, _ = _chain(_machine(tmp_path, "m1", url), [])
    manifest = tmp_path / "shared" / "v1" / "ac" / "quantize" / f"{a1.key}.json"
    data = json.loads(manifest.read_text())
    data["files"]["../../escape"] = data["files"].pop("qdq.json")
    manifest.write_text(json.dumps(data))
    m2 = _machine(tmp_path, "m2", url)
    with pytest.warns(CacheWarning, match="the manifest lists a file named '../../escape'"):
        _chain(m2, [])
    assert m2.stats.rejected == 1 and not (tmp_path / "m2" / "escape").exists()


@pytest.mark.parametrize("url,needle", [
    ("cache.example.com/x", "expected http(s)://HOST/PATH or an fsspec URL"),
    ("http:///x", "no host"),
    ("https://builder:s3cret@cache.example.com/c", "credentials do not go in the URL; put a "
                                                    "bearer token in $QNN_GENAI_REMOTE_CACHE_TOKEN"),
    ("http://cache.example.com/c?token=s3cret", "no query or fragment"),
    ("nosuchscheme://bucket/x", "nosuchscheme:// is not a scheme fsspec knows"),
])
def test_bad_urls_are_one_line_without_secrets(url: str, needle: str) -> None:
    with pytest.raises(RemoteConfigError) as raised:
        check_url(url)
    assert needle in str(raised.value) and "\n" not in str(raised.value)
    assert "s3cret" not in str(raised.value)


def test_a_scheme_whose_package_is_missing_names_it() -> None:
    """s3:// without s3fs (or, where s3fs is installed, another object store's scheme)."""
    import importlib.util

    from fsspec.registry import known_implementations

    protocol = next(p for p in ("s3", "gcs", "abfs", "oci", "box", "lakefs")
                    if importlib.util.find_spec(known_implementations[p]["class"].split(".")[0])
                    is None)
    with pytest.raises(RemoteConfigError) as raised:
        check_url(f"{protocol}://bucket/prefix")
    assert str(raised.value) == (f"{protocol}:// remote caches need a package that is not "
                                 f"installed: {known_implementations[protocol]['err']}")


def test_good_urls() -> None:
    check_url("http://cache.example.com:8080/qnn")
    check_url("https://cache.example.com/qnn/")
    store = open_remote("memory://qnn-genai-test")
    assert isinstance(store, FsspecStore)
    assert redact("https://u:p@cache.example.com:8443/qnn?x=1#f") == \
        "https://cache.example.com:8443/qnn"


def test_the_summary_line_counts_the_remote_traffic() -> None:
    stats = CacheStats(hits=3, builds=1, downloaded=4, bytes_downloaded=2_500_000, uploaded=1,
                       bytes_uploaded=1_000_000, rejected=1, failures_recalled=2)
    line = stats.summary("/c", "http://127.0.0.1:8080/cache")
    assert line == ("3 hits, 1 builds (0.0s building, 0.00 MB written, 0 damaged entries rebuilt, "
                    "0 evicted) in /c; build failures: 0 remembered, 2 recalled without building; "
                    "remote http://127.0.0.1:8080/cache: 4 downloaded (2.50 MB), 1 uploaded "
                    "(1.00 MB), 1 rejected as damaged")
    assert "remote" not in CacheStats(hits=1).summary("/c")
    merged = CacheStats()
    merged.merge(stats.to_dict())
    merged.merge({"hits": 1, "builds": 0, "rebuilt_damaged": 0, "build_s": 0.0,
                  "bytes_built": 0, "built_keys": []})  # a worker of an older version
    assert (merged.hits, merged.downloaded, merged.rejected) == (4, 4, 1)
