"""A run's fingerprint, and what differs between two runs' fingerprints.

The fingerprint (:func:`collect`, kept in ``results.json``'s header) holds what shapes a run's
figures: the tool versions (torch, executorch, QAIRT/SDK, ...), the harness's git commit and
whether its tree was dirty, the session's plain settings, each model case's run-time settings,
and every cache entry the session used: its stage, label, key, content digest, upstream digests
and **key inputs**, which are the case's build settings and, for ``compile``, the QNN compile
options. :func:`differences` lists what changed, leaf by leaf, so a summary can say
"compile stories260k SM8650-htp · spec.backend_options.performance_mode: kHtpBurst →
kHtpHighPerformance" beside the figures that moved (upstream issue #18933: "prefill fell from
~4000 to 862 tok/s and I can't tell what changed").

Artifacts are matched by stage and label; one label may name several entries in a run (the
emulator's and a phone's compile of one case), so each entry is paired with the previous entry of
its label whose inputs differ least. Plain data in, plain data out: nothing here calls the plugin,
the cache or the settings class (an artifact has the shape of the cache's
:class:`~pytest_qnn_genai.cache.stats.UsedEntry`).
"""
from __future__ import annotations

import json
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_qnn_genai.untyped import Json

if TYPE_CHECKING:
    from pytest_qnn_genai.cache.stats import UsedEntry

ARTIFACT_FIELDS = ("stage", "label", "key", "digest", "upstream", "inputs")
_SHORT = 12  # characters of a key or digest shown


@dataclass(frozen=True)
class Difference:
    """One thing that differs between two runs (``previous``/``current``: None when absent)."""

    what: str
    previous: str | None
    current: str | None


def git_state(cwd: Path | str | None) -> dict[str, str | bool | None]:
    """The harness checkout at ``cwd``: ``{"commit", "dirty"}`` (None values when unknown)."""
    def run(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                                 timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout if out.returncode == 0 else None

    head = run("rev-parse", "HEAD")
    status = run("status", "--porcelain", "--untracked-files=no")
    return {"commit": head.strip() or None if head else None,
            "dirty": None if status is None else bool(status.strip())}


def artifact(stage: str, label: str, key: str, digest: str, inputs: Mapping[str, object],
             upstream: Sequence[str] = ()) -> UsedEntry:
    """One used cache entry as the fingerprint holds it."""
    return {"stage": stage, "label": label, "key": key, "digest": digest,
            "upstream": list(upstream), "inputs": json.loads(json.dumps(inputs, default=str))}


def collect(versions: Mapping[str, str], harness: Mapping[str, object],
            settings: Mapping[str, object], cases: Mapping[str, Mapping[str, object]],
            artifacts: Iterable[UsedEntry]) -> dict[str, Json]:
    """The fingerprint of a run from plain values (the plugin gathers them)."""
    def plain(obj: object) -> object:
        return json.loads(json.dumps(obj, default=str, sort_keys=True))

    used = sorted((dict(a) for a in artifacts), key=lambda a: (a["stage"], a["label"], a["key"]))
    return {"versions": dict(versions), "harness": plain(harness), "settings": plain(settings),
            "cases": plain(cases), "artifacts": plain(used)}


def _leaves(value: object, prefix: str = "") -> dict[str, object]:
    if isinstance(value, dict) and value:
        out: dict[str, object] = {}
        for k, v in value.items():
            out.update(_leaves(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: value}


def _show(value: object) -> str | None:
    if value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def _leaf_differences(prefix: str, previous: object, current: object) -> list[Difference]:
    a, b = _leaves(previous or {}), _leaves(current or {})
    return [Difference(f"{prefix}{k}", _show(a.get(k)), _show(b.get(k)))
            for k in sorted(a.keys() | b.keys()) if a.get(k) != b.get(k)]


def _by_label(artifacts: Iterable[UsedEntry]) -> dict[str, list[UsedEntry]]:
    out: dict[str, list[UsedEntry]] = {}
    for a in artifacts:
        out.setdefault(f"{a['stage']} {a['label']}".strip(), []).append(a)
    return out


def _artifact_differences(name: str, previous: Sequence[UsedEntry],
                          current: Sequence[UsedEntry]) -> list[Difference]:
    out: list[Difference] = []
    left = list(previous)
    for cur in current:
        same = next((p for p in left if p["key"] == cur["key"]), None)
        if same is not None:
            left.remove(same)
            if same["digest"] != cur["digest"]:
                out.append(Difference(f"{name} rebuilt (same key {cur['key'][:_SHORT]})",
                                      f"digest {same['digest'][:_SHORT]}",
                                      f"digest {cur['digest'][:_SHORT]}"))
            continue
        if not left:
            out.append(Difference(f"{name}", None, f"key {cur['key'][:_SHORT]} (new)"))
            continue
        best = min(left, key=lambda p: len(_leaf_differences("", p["inputs"], cur["inputs"])))
        left.remove(best)
        inputs = _leaf_differences(f"{name} · ", best["inputs"], cur["inputs"])
        if best.get("upstream") != cur.get("upstream"):
            inputs.append(Difference(f"{name} · built from", "an upstream entry",
                                     "a changed upstream entry"))
        if not inputs:  # the key holds the tool versions too
            inputs.append(Difference(f"{name} · key (tool versions)", best["key"][:_SHORT],
                                     cur["key"][:_SHORT]))
        out += inputs
    out += [Difference(f"{name}", f"key {p['key'][:_SHORT]}", None) for p in left]
    return out


def differences(previous: Mapping[str, Json], current: Mapping[str, Json]) -> list[Difference]:
    """What differs from ``previous`` to ``current`` (two :func:`collect` results; an empty
    ``previous``, e.g. a run from before fingerprints, gives no differences)."""
    if not previous or not current:
        return []
    out: list[Difference] = []
    for section, prefix in (("versions", ""), ("harness", "harness "), ("settings", "setting "),
                            ("cases", "case ")):
        out += _leaf_differences(prefix, previous.get(section), current.get(section))
    before = _by_label(previous.get("artifacts", []))
    now = _by_label(current.get("artifacts", []))
    for name in sorted(before.keys() | now.keys()):
        out += _artifact_differences(name, before.get(name, []), now.get(name, []))
    return out
