"""CPU seconds of a process tree by role, sampled from ``/proc`` (Linux; a diagnostic, not a test).

:class:`RoleSampler` reads ``/proc/*/stat`` every ``interval_s`` while a command runs and keeps,
for each process of the tree under ``root``, its parent, its role (from its command line at
first sight) and its own CPU seconds (``utime + stime``) at its last sample; a role's CPU is the
sum over its processes.

Measured hazards: a process is seen at its last sample, up to ``interval_s`` before it exits,
and a process that lives less than ``interval_s`` may never be seen (short compiler processes):
the role totals are shown beside the tree's exact total (``getrusage`` of the waited-for
children, with this process the tree's subreaper, :func:`become_subreaper`), so the gap is
visible. A child's own time plus its reaped children's (``cutime``) is *not* used: a process
whose last sample comes before it reaps a child that was seen counts that child twice in its
parent's ``cutime`` arithmetic (it summed to more CPU than two cores can give in the run's
wall time).
A child seen between ``fork`` and ``exec`` takes its parent's role.
"""
from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")
# first match wins, on the command line joined with spaces
ROLES = (("prebuild", ("pytest_qnn_genai.prebuild",)),
         ("llama.py build", ("oss_scripts.llama", "llama.py")),
         ("runner build", ("cmake", "/make", "make ", "cc1plus", "c++", "g++", "ld")),
         ("upstream runners", ("qnn_llama_runner", "qnn_executor_runner")),
         ("xdist worker", ("execnet", "exec(eval(")),
         )


def role_of(cmdline: str, is_root: bool) -> str:
    if is_root:
        return "pytest (main process)"
    for role, marks in ROLES:
        if any(m in cmdline for m in marks):
            return role
    return "other"


@dataclass
class Seen:
    ppid: int
    role: str
    own_s: float  # utime + stime, at the last sample


def _read(pid: int) -> tuple[int, float] | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2:].split()
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / TICK  # utime + stime


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(
            errors="replace")
    except OSError:
        return ""


class RoleSampler:
    """Sample the tree under ``root`` until :meth:`stop`; :meth:`by_role` sums it up."""

    def __init__(self, root: int, interval_s: float = 0.5) -> None:
        self.root = root
        self.interval_s = interval_s
        self.seen: dict[int, Seen] = {}
        self.timeline: list[tuple[float, float]] = []  # (monotonic s, own CPU s of all seen)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> RoleSampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval_s)

    def sample(self) -> None:
        stats = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                got = _read(int(entry.name))
                if got is not None:
                    stats[int(entry.name)] = got
        # the tree: the root and every process whose parent is in it (known earlier or now)
        tree = {self.root} | set(self.seen)
        grew = True
        while grew:
            grew = False
            for pid, (ppid, _) in stats.items():
                if pid not in tree and ppid in tree:
                    tree.add(pid)
                    grew = True
        for pid in tree:
            if pid not in stats:
                continue
            ppid, own = stats[pid]
            known = self.seen.get(pid)
            if known is None:
                self.seen[pid] = Seen(ppid, role_of(_cmdline(pid), pid == self.root), own)
            else:
                known.own_s = own
        self.timeline.append((time.monotonic(), sum(s.own_s for s in self.seen.values())))

    def idle_core_s(self, cores: int, edge_s: float = 60.0) -> dict[str, float]:
        """Core-seconds the tree left idle (``cores`` x time less its CPU seconds) in its first
        and last ``edge_s`` seconds and in between, from the timeline."""
        if len(self.timeline) < 2:
            return {}
        start, end = self.timeline[0][0], self.timeline[-1][0]
        spans = {"first": (start, start + edge_s), "middle": (start + edge_s, end - edge_s),
                 "last": (end - edge_s, end)}
        idle = {}
        for name, (lo, hi) in spans.items():
            points = [(t, c) for t, c in self.timeline if lo <= t <= hi]
            if len(points) >= 2:
                (t0, c0), (t1, c1) = points[0], points[-1]
                idle[name] = max(0.0, cores * (t1 - t0) - (c1 - c0))
        return idle

    def by_role(self) -> dict[str, float]:
        """Own CPU seconds per role, summed over the processes seen (see the module docstring)."""
        totals: dict[str, float] = {}
        for s in self.seen.values():
            totals[s.role] = totals.get(s.role, 0.0) + s.own_s
        return dict(sorted(totals.items(), key=lambda kv: -kv[1]))


def become_subreaper() -> None:
    """Make this process the subreaper of its descendants (Linux ``PR_SET_CHILD_SUBREAPER``): a
    process orphaned in the tree (its parent exited without waiting for it) is re-parented here
    instead of to init, so :func:`reap_orphans` can wait for it and ``getrusage(RUSAGE_CHILDREN)``
    counts it: without this, what a process that does not wait for its children leaves running
    is missing from the tree's total."""
    import ctypes

    pr_set_child_subreaper = 36
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_child_subreaper, 1, 0, 0, 0)


def reap_orphans() -> int:
    """Wait for every exited child (orphans re-parented here included); how many."""
    reaped = 0
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return reaped
        if pid == 0:
            return reaped
        reaped += 1
