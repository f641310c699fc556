"""The ABI adapter checks a QNN provider before patching it, and says so in one line.

The adapter is compiled exactly as provisioning compiles it (for QAIRT 2.51.0's API versions) and
loaded in a fresh Python process against a fake "real" libQnnHtp.so built here, whose provider
reports a chosen backend id and API versions and keeps its interface table on the heap, in
RELRO memory (read-only, but mprotect can lift that) or in a read-only shared file mapping (where
mprotect(PROT_WRITE) fails).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_qnn_genai.sdk import SdkError, adapter, emulator, resolve_sdk

EXPECTED = adapter.KNOWN_GOOD["2.51.0"]  # core API 2.40, HTP API 5.51

FAKE_PROVIDER_C = r"""
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* QnnInterface_t as in QnnInterface.h: backendId, providerName, apiVersion, function table */
typedef struct { uint32_t major, minor, patch; } ver_t;
typedef struct {
  uint32_t backend_id; const char *name; ver_t core; ver_t backend; void *table[48];
} iface_t;
typedef struct { uint32_t option; void *custom; } cfg_t;   /* QnnDevice_Config_t */

static uint32_t g_seen[4];
static int g_calls;

static uint64_t fake_device_create(void *logger, const cfg_t **cfg, void **dev) {
  (void)logger;
  g_calls++;
  if (cfg && cfg[0] && cfg[0]->option == 0 && cfg[0]->custom) memcpy(g_seen, cfg[0]->custom, 16);
  if (dev) *dev = (void *)0x1;
  return 0;
}
static uint64_t fake_device_set_config(void *dev, const cfg_t **cfg) { (void)dev; (void)cfg; return 0; }

#define FAKE_INIT { BACKEND_ID, "FAKE_HTP", {CORE_MAJOR, CORE_MINOR, 7}, {HTP_MAJOR, HTP_MINOR, 9}, \
                    { [40] = (void *)fake_device_create, [41] = (void *)fake_device_set_config } }
#if PLACEMENT_RELRO
static const iface_t g_static = FAKE_INIT;  /* .data.rel.ro: read-only after relocation */
#endif
static const iface_t *g_provider;
static const iface_t *g_list[1];

static const iface_t *make_provider(void) {
#if PLACEMENT_RELRO
  return &g_static;
#elif PLACEMENT_SHARED_RO
  iface_t tmp = FAKE_INIT;
  const char *path = getenv("FAKE_TABLE_FILE");
  int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
  if (fd < 0 || write(fd, &tmp, sizeof(tmp)) != (ssize_t)sizeof(tmp)) return NULL;
  close(fd);
  fd = open(path, O_RDONLY);
  void *p = mmap(NULL, sizeof(tmp), PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  return p == MAP_FAILED ? NULL : (const iface_t *)p;
#else
  iface_t *p = malloc(sizeof(iface_t));
  iface_t tmp = FAKE_INIT;
  memcpy(p, &tmp, sizeof(tmp));
  return p;
#endif
}

uint64_t QnnInterface_getProviders(const iface_t ***list, uint32_t *n) {
  if (!g_provider) g_provider = make_provider();
  if (!g_provider) return 1;
  g_list[0] = g_provider;
  *list = g_list;
  *n = 1;
  return 0;
}
int fake_is_patched(void) { return g_provider->table[40] != (void *)fake_device_create; }
void *fake_slot_address(void) { return (void *)&g_provider->table[40]; }
uint32_t fake_seen(int i) { return g_seen[i]; }
int fake_calls(void) { return g_calls; }
"""

# Runs in a fresh process (the adapter keeps process-wide state and is never unloaded).
HARNESS = r"""
import ctypes, json, sys
from pathlib import Path
from pytest_qnn_genai.sdk import adapter

adapter_path, fake_path = sys.argv[1], sys.argv[2]
fake = ctypes.CDLL(fake_path)  # the same handle the adapter dlopens via QNN_GENAI_REAL_HTP

def prot(addr):
    for line in Path("/proc/self/maps").read_text().splitlines():
        lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
        if lo <= addr < hi:
            return line.split()[1]

lib = ctypes.CDLL(adapter_path)
out = {"before_call": list(adapter.adapter_status(lib))}
fake.fake_slot_address.restype = ctypes.c_void_p
lst, n = ctypes.c_void_p(), ctypes.c_uint32()
fake.QnnInterface_getProviders(ctypes.byref(lst), ctypes.byref(n))  # create the fake's table
out["table_prot_before"] = prot(fake.fake_slot_address())
try:
    out["message"] = adapter.check_loaded(Path(adapter_path))
except adapter.AdapterError as e:
    out["error"], out["error_type"] = str(e), type(e).__name__
slot = fake.fake_slot_address()
out["status"] = list(adapter.adapter_status(lib))
out["patched"] = bool(fake.fake_is_patched())
out["table_prot"] = prot(slot)
if out["patched"]:  # executorch's old layout: {option 0 (SoC), socModel 57 at byte 4}
    words = (ctypes.c_uint32 * 4)(0, 57, 0, 0)
    class Cfg(ctypes.Structure):
        _fields_ = [("option", ctypes.c_uint32), ("custom", ctypes.c_void_p)]
    cfg = Cfg(0, ctypes.addressof(words))
    cfgs = (ctypes.POINTER(Cfg) * 2)(ctypes.pointer(cfg), None)
    create = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_void_p, ctypes.c_void_p,
                              ctypes.POINTER(ctypes.c_void_p))(
        ctypes.c_void_p.from_address(slot).value)
    dev = ctypes.c_void_p()
    out["create_rc"] = create(None, ctypes.cast(cfgs, ctypes.c_void_p), ctypes.byref(dev))
    fake.fake_seen.restype = ctypes.c_uint32
    out["seen"] = [fake.fake_seen(i) for i in range(4)]
    # a second getProviders (executorch reloads the library) leaves the patch and status alone
    adapter.check_loaded(Path(adapter_path))
    out["status_again"] = list(adapter.adapter_status(lib))
print("RESULT " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The adapter (as provisioning builds it) and fake providers, compiled once."""
    d = tmp_path_factory.mktemp("adapter-checks")
    cc = emulator.find_c_compiler()
    out = {"adapter": d / "libQnnHtp.so"}
    emulator.compile_adapter(cc, adapter.compile_defines(EXPECTED), out["adapter"])
    src = d / "fake_provider.c"
    src.write_text(FAKE_PROVIDER_C)
    good = {"BACKEND_ID": 6, "CORE_MAJOR": 2, "CORE_MINOR": 40, "HTP_MAJOR": 5, "HTP_MINOR": 51}
    variants = {
        "good": {},
        "wrong_core_api": {"CORE_MINOR": 41},
        "wrong_htp_api": {"HTP_MINOR": 50},
        "wrong_backend": {"BACKEND_ID": 4},  # the GPU backend's id
        "relro": {"PLACEMENT_RELRO": 1},
        "shared_ro": {"PLACEMENT_SHARED_RO": 1},
    }
    for name, changes in variants.items():
        defines = [f"-D{k}={v}" for k, v in {**good, **changes}.items()]
        lib = d / f"libfake_{name}.so"
        subprocess.run([cc, "-O1", "-shared", "-fPIC", *defines, "-Wl,-z,relro,-z,now", "-o",
                        str(lib), str(src)], check=True, capture_output=True, timeout=60)
        out[name] = lib
    return out


def _run(built: dict[str, Path], variant: str, tmp_path: Path) -> tuple[dict, str]:
    env = {**os.environ, "QNN_GENAI_REAL_HTP": str(built[variant]),
           "FAKE_TABLE_FILE": str(tmp_path / "table.bin")}
    proc = subprocess.run([sys.executable, "-c", HARNESS, str(built["adapter"]),
                           str(built[variant])], capture_output=True, text=True, env=env,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT "))
    return json.loads(line[len("RESULT "):]), proc.stderr


def test_good_provider_is_patched_and_relaid(built: dict[str, Path], tmp_path: Path) -> None:
    result, stderr = _run(built, "good", tmp_path)
    assert result["before_call"][0] == 1  # not called yet
    assert "error" not in result, result
    assert result["status"][0] == adapter.STATUS_OK and result["patched"]
    assert "core API 2.40.7, HTP API 5.51.9" in result["message"]
    # the socModel executorch wrote at byte 4 reaches the real deviceCreate at byte 8
    assert result["create_rc"] == 0 and result["seen"] == [0, 0, 57, 0]
    assert result["status_again"][0] == adapter.STATUS_OK
    assert "[qnn-genai adapter]" not in stderr  # nothing printed when all is well


@pytest.mark.parametrize(("variant", "code", "words"), [
    ("wrong_core_api", 5, "core API 2.41.7 / HTP API 5.51.9, the adapter was written for core "
                          "API 2.40 / HTP API 5.51 (QAIRT 2.51.0)"),
    ("wrong_htp_api", 5, "core API 2.40.7 / HTP API 5.50.9"),
    ("wrong_backend", 4, "backend id 4, the adapter is for HTP (6)"),
])
def test_unexpected_provider_is_left_alone(built: dict[str, Path], tmp_path: Path, variant: str,
                                           code: int, words: str) -> None:
    result, stderr = _run(built, variant, tmp_path)
    assert not result["patched"]  # returned unpatched: device creation fails loudly, not subtly
    assert result["status"][0] == code and words in result["status"][1]
    error = result["error"]
    assert result["error_type"] == "AdapterStatusError"
    assert "\n" not in error and "--qnn-sdk" in error and words in error
    assert stderr.count("[qnn-genai adapter]") == 1  # printed once, not per call


def test_read_only_relro_table_is_patched_and_protection_restored(built: dict[str, Path],
                                                                   tmp_path: Path) -> None:
    result, _ = _run(built, "relro", tmp_path)
    assert result["status"][0] == adapter.STATUS_OK and result["patched"], result
    assert result["seen"] == [0, 0, 57, 0]
    assert result["table_prot_before"].startswith("r-")  # RELRO: read-only after loading
    assert result["table_prot"].startswith("r-")  # made writable for the patch, then restored


def test_table_that_cannot_be_made_writable_is_reported(built: dict[str, Path],
                                                        tmp_path: Path) -> None:
    result, stderr = _run(built, "shared_ro", tmp_path)
    assert not result["patched"] and result["table_prot_before"] == "r--s"
    assert result["status"][0] == 6  # mprotect failed
    assert "mprotect(PROT_WRITE) failed: Permission denied" in result["error"]
    assert "\n" not in result["error"] and "--qnn-sdk" in result["error"]
    assert stderr.count("[qnn-genai adapter]") == 1


def test_missing_real_library_is_reported(built: dict[str, Path], tmp_path: Path) -> None:
    env = {**os.environ, "QNN_GENAI_REAL_HTP": str(tmp_path / "nope.so")}
    code = ("import sys; from pathlib import Path; from pytest_qnn_genai.sdk import adapter\n"
            "try: adapter.check_loaded(Path(sys.argv[1]))\n"
            "except adapter.AdapterStatusError as e: print('ERR', e)")
    proc = subprocess.run([sys.executable, "-c", code, str(built["adapter"])],
                          capture_output=True, text=True, env=env, timeout=60)
    assert "ERR QNN ABI adapter" in proc.stdout and "(no real library)" in proc.stdout
    assert "cannot load the real QNN HTP library" in proc.stdout and "nope.so" in proc.stdout


# -- the known-good table ------------------------------------------------------------------------

def test_known_good_entries_are_consistent() -> None:
    for qairt, build in adapter.KNOWN_GOOD.items():
        assert build.qairt == qairt and qairt not in adapter.KNOWN_BAD
        assert build.core_api[0] == 2 and build.htp_api[0] == 5
    # every known build reports distinct API versions, so an adapter built for one refuses others
    assert len({(b.core_api, b.htp_api) for b in adapter.KNOWN_GOOD.values()}) == len(
        adapter.KNOWN_GOOD)


@pytest.mark.parametrize("qairt", ["2.52.0", "2.49.40"])
def test_unknown_qairt_is_one_line_naming_qnn_sdk(qairt: str) -> None:
    with pytest.raises(adapter.UnsupportedQairtError) as err:
        adapter.require_known_good(qairt, "9.9.9")
    text = str(err.value)
    assert "\n" not in text and "--qnn-sdk" in text and f"QAIRT {qairt}" in text
    assert f"onnxruntime-qnn=={adapter.DEFAULT.wheel}" in text  # the pinned one
    if qairt in adapter.KNOWN_BAD:
        assert "known not to work" in text


def _fake_wheel(tmp_path: Path, qairt: str, wheel: str) -> emulator.WheelLibs:
    pkg = tmp_path / "site" / "onnxruntime_qnn"
    pkg.mkdir(parents=True)
    for name in ("libQnnHtp.so", "libQnnSystem.so"):
        (pkg / name).write_bytes(b"\x7fELF")
    (tmp_path / "site" / "onnxruntime_qnn.libs").mkdir()
    return emulator.WheelLibs(pkg, pkg.parent / "onnxruntime_qnn.libs", qairt, wheel)


def test_provisioning_an_unknown_qairt_is_a_usage_line(monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
    monkeypatch.delenv("QNN_SDK_ROOT", raising=False)
    monkeypatch.setattr(emulator, "find_wheel_libs",
                        lambda: _fake_wheel(tmp_path, "2.52.0", "2.8.0"))
    with pytest.raises(SdkError) as err:  # the plugin turns SdkError into pytest.UsageError
        resolve_sdk(None, tmp_path / "cache")
    assert "onnxruntime-qnn 2.8.0 ships QAIRT 2.52.0" in str(err.value)
    assert "--qnn-sdk" in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "cache" / "qnn-sdk").exists()  # nothing built


def test_sdk_folder_from_another_wheel_is_refused(monkeypatch: pytest.MonkeyPatch,
                                                  tmp_path: Path) -> None:
    libs = _fake_wheel(tmp_path, "2.51.0", "2.7.0")
    root = emulator.provision(tmp_path / "cache", libs=libs)
    record = emulator.manifest(root)
    assert (record["onnxruntime_qnn"], record["core_api"], record["htp_api"]) == (
        "2.7.0", "2.40", "5.51")
    assert "ort-2.7.0" in root.name
    monkeypatch.setattr(emulator, "installed_wheel_version", lambda: "2.7.0")
    assert resolve_sdk(str(root), tmp_path / "unused").kind == "emulator"
    monkeypatch.setattr(emulator, "installed_wheel_version", lambda: "2.6.0")
    with pytest.raises(SdkError) as err:
        resolve_sdk(str(root), tmp_path / "unused")
    text = str(err.value)
    assert "provisioned from onnxruntime-qnn 2.7.0, but 2.6.0 is installed" in text
    assert "--qnn-sdk" in text and "\n" not in text
    monkeypatch.setattr(emulator, "installed_wheel_version", lambda: None)  # no wheel: folder ok
    assert resolve_sdk(str(root), tmp_path / "unused").qairt_version == "2.51.0"


def test_adapter_without_status_function_is_outdated(built: dict[str, Path]) -> None:
    """An SDK folder made before the adapter reported its status: one line, re-provision."""
    with pytest.raises(adapter.AdapterStatusError) as err:
        adapter.check_loaded(built["good"])  # a provider library with no status function
    text = str(err.value)
    assert "predates status reporting" in text and "provision a fresh emulator SDK" in text
    assert "--qnn-sdk" in text and "\n" not in text
