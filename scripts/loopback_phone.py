#!/usr/bin/env python3
"""Serve one loopback "phone" until killed: try the phone path by hand, without a phone.

    python scripts/loopback_phone.py --serial LOOP1 --port 5039 --executorch-src DIR \
        [--runner PATH] [--soc SM8650] [--dir DIR] [--qnn-sdk SDK] [--qnn-cache-dir DIR]

An adb server on 127.0.0.1:PORT (the project's loopback server, ``tests/support/adb_server.py``)
with one device SERIAL whose ``ro.soc.model`` is the SoC and whose ``ro.product.cpu.abi`` is
``x86_64``: shell commands run on this machine in a sandbox folder (``DIR/devices/SERIAL``,
remote ``/data/local/tmp`` mapped into it), and every file pushed lands there. What the plugin
pushes is what runs: ExecuTorch's own ``qnn_llama_runner`` and ``qnn_executor_runner`` built for
x86_64 from ``--executorch-src`` (the harness's cached build, ``$ORIGIN`` runpath: a library the
plugin does not push is a library the runner cannot load), or a prebuilt ``--runner``; the x86
QNN libraries of the emulator SDK (``--qnn-sdk``/``$QNN_SDK_ROOT``, else provisioned in the cache
dir), i.e. QNN's x86 HTP simulator. Being x86_64, the phone gets the emulator's builds
(``Pipeline.build_target``).

Prints ``runner PATH``, ``device-libs PATH``, one line ``pytest-args ...`` with every option that
drives this phone (copy it after ``pytest suites``), then ``ready`` once the server listens;
stops on SIGTERM/SIGINT.
"""
from __future__ import annotations

import argparse
import os
import shlex
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_qnn_genai.sdk import QnnSdk

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serial", required=True, help="the phone's adb serial")
    parser.add_argument("--port", required=True, type=int, help="adb server port on 127.0.0.1")
    parser.add_argument("--soc", default="SM8650", help="the SoC it reports (default SM8650)")
    parser.add_argument("--dir", type=Path, help="sandbox and launchers (default: "
                        "/tmp/loopback-phone-<serial>)")
    parser.add_argument("--qnn-sdk", default=None, help="QNN SDK for the emulator behind it "
                        "(default: $QNN_SDK_ROOT, else the emulator SDK in the cache dir)")
    parser.add_argument("--qnn-cache-dir", type=Path, default=None, help="the plugin's cache dir "
                        "(default: $QNN_GENAI_CACHE_DIR, else ~/.cache/pytest-qnn-genai)")
    parser.add_argument("--executorch-src", type=Path,
                        default=os.environ.get("QNN_GENAI_EXECUTORCH_SRC") or None,
                        help="ExecuTorch source tree to build the x86 runners from (cached; "
                        "default: $QNN_GENAI_EXECUTORCH_SRC)")
    parser.add_argument("--runner", type=Path, default=None, help="a prebuilt x86 "
                        "qnn_llama_runner instead (qnn_executor_runner beside it)")
    return parser.parse_args(argv)


def _runner(args: argparse.Namespace, cache: Path, sdk: QnnSdk) -> Path:
    """The x86 qnn_llama_runner: --runner, else the harness's cached build of --executorch-src."""
    if args.runner is not None:
        return Path(args.runner).expanduser().resolve()
    if args.executorch_src is None:
        raise SystemExit("loopback_phone: pass --executorch-src DIR (an ExecuTorch source tree "
                         "to build the x86 runners from) or --runner PATH")
    from pytest_qnn_genai.cache import ArtifactCache
    from pytest_qnn_genai.pipeline import Pipeline
    from pytest_qnn_genai.runners import RunnerBuildError
    from pytest_qnn_genai.sdk.versions import stack

    try:
        pipeline = Pipeline(ArtifactCache(cache / "artifacts", stack(sdk)))
        return pipeline.runners(args.executorch_src).llama_runner
    except RunnerBuildError as e:
        raise SystemExit(f"loopback_phone: --executorch-src: {e}") from None


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    from pytest_qnn_genai.devices.adb import SOC_BY_BOARD_PLATFORM
    from pytest_qnn_genai.sdk import SdkError, resolve_sdk
    from pytest_qnn_genai.settings import default_cache_dir
    from pytest_qnn_genai.targets import UnknownSocError, soc
    from tests.support.adb_server import LoopbackAdbServer
    from tests.support.fake_device import loopback_props

    try:
        spec = soc(args.soc)
    except UnknownSocError as e:
        print(f"loopback_phone: --soc: {e}", file=sys.stderr)
        return 2
    cache = (args.qnn_cache_dir or default_cache_dir()).expanduser().resolve()
    try:
        sdk = resolve_sdk(args.qnn_sdk, cache)
    except SdkError as e:
        print(f"loopback_phone: {e}", file=sys.stderr)
        return 2
    if sdk is None:
        print("loopback_phone: no QNN SDK for the emulator", file=sys.stderr)
        return 2
    root = (args.dir or Path(f"/tmp/loopback-phone-{args.serial}")).resolve()
    runner, libs = _runner(args, cache, sdk), sdk.host_lib_dir
    platform = next((p for p, s in SOC_BY_BOARD_PLATFORM.items() if s == spec.name), "")
    props = loopback_props(spec.name, platform)
    try:
        server = LoopbackAdbServer(root / "devices", port=args.port)
    except OSError as e:
        print(f"loopback_phone: --port {args.port}: {e.strerror}", file=sys.stderr)
        return 2
    server.add_device(args.serial, props)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    server.start()
    options = ["--device", args.serial, "--adb-host", f"127.0.0.1:{server.port}", "--soc",
               spec.name, "--runner", str(runner), "--qnn-device-libs", str(libs),
               "--qnn-cache-dir", str(cache)]
    print(f"runner {runner}\ndevice-libs {libs}\npytest-args {shlex.join(options)}\nready",
          flush=True)
    try:
        stop.wait()
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
