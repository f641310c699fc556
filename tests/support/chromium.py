"""Headless Chromium (Debian's ``chromium``, ``make chromium``) for the report page's browser test.

Every call runs the real browser on a file from disk with a fresh profile, no network services
and a timeout: ``--dump-dom`` prints the DOM after the page's scripts ran, ``--screenshot``
writes what was rendered.
"""
from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync")
TIMEOUT_S = 120


class ChromiumMissing(RuntimeError):
    """No chromium on PATH."""


def executable() -> str:
    """Chromium's path; :class:`ChromiumMissing` says how to install it."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        raise ChromiumMissing("chromium is not installed: `make chromium` (Debian's package)")
    return found


def _run(page: Path, *args: str) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        done = subprocess.run([executable(), *FLAGS, f"--user-data-dir={profile}", *args,
                               page.resolve().as_uri()], capture_output=True, text=True,
                              timeout=TIMEOUT_S)
    if done.returncode != 0:
        raise RuntimeError(f"chromium exited {done.returncode}: {done.stderr[-2000:]}")
    return done


def dump_dom(page: Path) -> str:
    """The page's DOM as the browser holds it after loading (its scripts have run)."""
    return _run(page, "--dump-dom").stdout


def screenshot(page: Path, out: Path, width: int = 1400, height: int = 2400) -> Path:
    """A PNG of the rendered page's first ``width`` x ``height`` pixels."""
    _run(page, f"--screenshot={out}", f"--window-size={width},{height}")
    if not out.is_file():
        raise RuntimeError(f"chromium wrote no screenshot to {out}")
    return out
