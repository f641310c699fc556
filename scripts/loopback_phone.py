#!/usr/bin/env python3
"""Serve one loopback "phone" until killed: try the phone path by hand, without a phone.

    python scripts/loopback_phone.py --serial LOOP1 --port 5039 [--soc SM8650] [--dir DIR]

An adb server on 127.0.0.1:PORT (the project's loopback server, ``tests/support/adb_server.py``)
with one device SERIAL whose ``ro.soc.model`` is the SoC. Shell commands run in a sandbox folder
(``DIR/devices/SERIAL``, remote ``/data/local/tmp`` mapped into it) and every file pushed lands
there. Written into DIR for ``pytest --runner``/``--qnn-device-libs``: ``qnn_llama_runner`` and,
beside it, ``qnn_executor_runner`` (the upstream-rule stand-ins of ``tests/support``, running what
is pushed on the x86 HTP emulator; the emulator SDK comes from ``--qnn-sdk``/``$QNN_SDK_ROOT``
or is provisioned in the cache dir), and ``qnn-libs/`` (placeholder library files with the
SoC's names: the emulator needs no phone libraries). Prints ``runner PATH``, ``device-libs
PATH``, then ``ready`` once the server listens; stops on SIGTERM/SIGINT.

The phone reports ``ro.product.cpu.abi=x86_64`` (what it runs is x86 code on QNN's x86 HTP
simulator), so the plugin gives it the emulator's builds (``Pipeline.build_target``).
"""
from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

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
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    from pytest_qnn_genai.devices.adb import SOC_BY_BOARD_PLATFORM
    from pytest_qnn_genai.devices.setup import lib_names
    from pytest_qnn_genai.sdk import SdkError, resolve_sdk
    from pytest_qnn_genai.settings import default_cache_dir
    from pytest_qnn_genai.targets import UnknownSocError, soc
    from tests.support.adb_server import LoopbackAdbServer
    from tests.support.executor_runner_standin import write_executor_launcher
    from tests.support.fake_device import loopback_props
    from tests.support.llama_runner_standin import write_launcher
    from tests.support.standin_backends import EMULATOR, EXECUTORCH

    try:
        spec = soc(args.soc)
    except UnknownSocError as e:
        print(f"loopback_phone: --soc: {e}", file=sys.stderr)
        return 2
    cache = args.qnn_cache_dir or default_cache_dir()
    try:
        sdk = resolve_sdk(args.qnn_sdk, cache.expanduser().resolve())
    except SdkError as e:
        print(f"loopback_phone: {e}", file=sys.stderr)
        return 2
    if sdk is None:
        print("loopback_phone: no QNN SDK for the emulator", file=sys.stderr)
        return 2
    root = (args.dir or Path(f"/tmp/loopback-phone-{args.serial}")).resolve()
    env = {"QNN_SDK_ROOT": str(sdk.root)}
    llama = write_launcher(root / "qnn_llama_runner", backend=EMULATOR, env=env)
    write_executor_launcher(root / "qnn_executor_runner", backend=EXECUTORCH, env=env)
    libs = root / "qnn-libs"
    libs.mkdir(parents=True, exist_ok=True)
    for name in lib_names(spec)[0]:
        (libs / name).write_bytes(f"loopback placeholder for {name}\n".encode())
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
    print(f"runner {llama}\ndevice-libs {libs}\nready", flush=True)
    try:
        stop.wait()
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
