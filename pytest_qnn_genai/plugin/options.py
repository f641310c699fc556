"""Every knob of the plugin: one row each, carrying its parser and its one default.

A knob ``qnn_cache_dir`` is the flag ``--qnn-cache-dir``, the ini key ``qnn_cache_dir`` and the
environment variable ``QNN_GENAI_CACHE_DIR``; a knob without the ``qnn_`` prefix (``soc``) gets it
for its ini key (``qnn_soc``) and env variable (``QNN_GENAI_SOC``). Precedence: command line >
environment variable > ini file > default. A boolean knob also has ``--no-<flag>``, so a value set
by env or ini can be turned off on the command line. The raw default is parsed like any other
value, so each default is defined once. A bad value is one ``pytest.UsageError`` line naming the
flag.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_qnn_genai import targets
from pytest_qnn_genai.settings import Settings, default_cache_dir
from pytest_qnn_genai.shards import Shard, ShardError
from pytest_qnn_genai.targets import SocSpec

if TYPE_CHECKING:
    from pytest_qnn_genai.models.case import ModelCase

Raw = str | bool | Sequence[str] | None


@dataclass(frozen=True)
class Context:
    """What a parser may need besides the raw value."""

    rootdir: Path
    environ: Mapping[str, str]


Parser = Callable[[Raw, "Knob", Context], object]


class OptionError(ValueError):
    """A knob's value is invalid (the message names no flag; :func:`resolve` adds it)."""


# -- parsers --------------------------------------------------------------------------------------
def _text(raw: Raw, knob: Knob, ctx: Context) -> str | None:
    return None if raw in (None, "") else str(raw)


def _truthy(text: str) -> bool:
    return text.strip().lower() in ("1", "true", "yes", "on")


def _flag(raw: Raw, knob: Knob, ctx: Context) -> bool:
    return raw if isinstance(raw, bool) else _truthy(str(raw))


def _split(raw: Raw) -> list[str]:
    items = [] if raw is None else [str(raw)] if isinstance(raw, (str, bool)) else list(raw)
    return [p.strip() for v in items for p in str(v).split(",") if p.strip()]


def _names(raw: Raw, knob: Knob, ctx: Context) -> tuple[str, ...]:
    return tuple(dict.fromkeys(_split(raw)))


def _devices(raw: Raw, knob: Knob, ctx: Context) -> tuple[str, ...]:
    """``--device`` entries: ``SERIAL`` or ``SERIAL@HOST:PORT`` (a phone behind another adb
    server, see :mod:`pytest_qnn_genai.devices.pool`), repeats dropped."""
    entries = _names(raw, knob, ctx)
    if entries:
        from pytest_qnn_genai.devices.pool import parse_device

        for entry in entries:
            try:
                parse_device(entry)
            except ValueError as e:
                raise OptionError(str(e)) from None
    return entries


def _ab_pairs(raw: Raw, knob: Knob, ctx: Context) -> tuple[tuple[str, str], ...]:
    """``--qnn-ab A:B`` entries: (reference, candidate) variant names, repeats dropped."""
    pairs = []
    for entry in _names(raw, knob, ctx):
        a, sep, b = entry.partition(":")
        if not (sep and a.strip() and b.strip()) or a.strip() == b.strip():
            raise OptionError(f"expected REFERENCE:CANDIDATE (two different variant names, e.g. "
                              f"legacy:new or ar8:new), got {entry!r}")
        pairs.append((a.strip(), b.strip()))
    return tuple(dict.fromkeys(pairs))


def _socs(raw: Raw, knob: Knob, ctx: Context) -> tuple[SocSpec, ...]:
    try:
        socs = tuple(dict.fromkeys(targets.soc(s) for s in _split(raw)))
    except targets.UnknownSocError as e:
        raise OptionError(str(e)) from None
    if not socs:
        raise OptionError(f"no SoC given; valid: {', '.join(targets.SOCS)}")
    return socs


def _choice(raw: Raw, knob: Knob, ctx: Context) -> str:
    value = str(raw)
    if knob.choices and value not in knob.choices:
        raise OptionError(f"invalid choice {value!r} (choose from {', '.join(knob.choices)})")
    return value


def _path(raw: Raw, knob: Knob, ctx: Context) -> Path | None:
    """A path from the invocation directory, or None."""
    return None if raw in (None, "") else Path(str(raw)).expanduser().resolve()


def _paths(raw: Raw, knob: Knob, ctx: Context) -> tuple[Path, ...]:
    """Paths from the invocation directory, comma separated or repeated, repeats dropped."""
    return tuple(dict.fromkeys(Path(p).expanduser().resolve() for p in _split(raw)))


def _rooted_path(raw: Raw, knob: Knob, ctx: Context) -> Path:
    """A path relative to pytest's rootdir (golden files live in the repository)."""
    return (ctx.rootdir / Path(str(raw)).expanduser()).resolve()


def _cache_dir(raw: Raw, knob: Knob, ctx: Context) -> Path:
    return _path(raw, knob, ctx) or default_cache_dir(ctx.environ, explicit=False).resolve()


def _shard(raw: Raw, knob: Knob, ctx: Context) -> Shard | None:
    """``K/N``: this run is shard K of N (:mod:`pytest_qnn_genai.shards`), or None."""
    if raw in (None, ""):
        return None
    try:
        return Shard.parse(str(raw))
    except ShardError as e:
        raise OptionError(str(e)) from None


def _remote_url(raw: Raw, knob: Knob, ctx: Context) -> str | None:
    """A remote cache URL the installed packages can open (checked now, no network traffic)."""
    url = _text(raw, knob, ctx)
    if url is not None:
        from pytest_qnn_genai.cache.remote import RemoteConfigError, check_url

        try:
            check_url(url)
        except RemoteConfigError as e:
            raise OptionError(str(e)) from None
    return url


def number(kind: type[int] | type[float], low: float, high: float | None = None,
           low_open: bool = False) -> Parser:
    """A parser for ``kind`` (int or float) within ``[low, high]`` (``(low, ...`` if low_open)."""
    def parse(raw: Raw, knob: Knob, ctx: Context) -> int | float:
        try:
            value: int | float = kind(str(raw).strip())
        except ValueError:
            raise OptionError(f"expected {'an integer' if kind is int else 'a number'}, "
                              f"got {raw!r}") from None
        below = value <= low if low_open else value < low
        if below or (high is not None and value > high) or value != value:
            span = f"{'(' if low_open else '['}{low:g}, {'∞)' if high is None else f'{high:g}]'}"
            raise OptionError(f"{raw!r} is outside {span}")
        return value
    return parse


def optional(parse: Parser) -> Parser:
    """``parse``, or None when the knob is unset."""
    def parse_optional(raw: Raw, knob: Knob, ctx: Context) -> object:
        return None if raw in (None, "") else parse(raw, knob, ctx)
    return parse_optional


# -- the table ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Knob:
    """One setting: its name, the :class:`Settings` field it fills, its parser and raw default."""

    name: str
    field: str
    help: str
    parse: Parser
    default: Raw = None
    kind: str = "value"  # "value" | "list" (repeatable, comma separated) | "bool"
    choices: tuple[str, ...] | None = None
    env: str | None = None  # overrides the derived environment variable name
    metavar: str | None = None

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def key(self) -> str:
        """The ini key and the option's ``dest``."""
        return self.name if self.name.startswith("qnn_") else f"qnn_{self.name}"

    @property
    def env_var(self) -> str:
        return self.env or "QNN_GENAI_" + self.name.removeprefix("qnn_").upper()


def _perf(name: str, field: str, help: str, default: str, parse: Parser, metavar: str) -> Knob:
    return Knob(name, field, help, parse, default, metavar=metavar)


KNOBS: tuple[Knob, ...] = (
    Knob("soc", "socs", "target Snapdragon SoC, repeatable (e.g. SM8650)", _socs, "SM8650",
         kind="list", metavar="NAME"),
    Knob("backend", "backend", "QNN backend to target", _choice, "htp",
         choices=targets.BACKENDS, metavar="NAME"),
    Knob("device", "devices", "a phone: its adb serial (served by --adb-host, else the local "
         "adb server) or SERIAL@HOST:PORT (served by the adb server at HOST:PORT); repeatable; "
         "absent = the x86 HTP emulator", _devices, kind="list", metavar="SERIAL[@HOST:PORT]"),
    Knob("qnn_sdk", "qnn_sdk", "QNN SDK root (default: $QNN_SDK_ROOT, else the embedded x86 "
         "emulator SDK)", _text, metavar="PATH"),
    Knob("qnn_cache_dir", "cache_dir", "artifact and SDK cache directory (default: "
         "$XDG_CACHE_HOME/pytest-qnn-genai or ~/.cache/pytest-qnn-genai)", _cache_dir,
         metavar="PATH"),
    Knob("qnn_cache_max_gb", "cache_max_gb", "bound the artifact cache to this many GB: after a "
         "build, least recently used entries go first (never one this session uses)",
         optional(number(float, 0.0, low_open=True)), metavar="GB"),
    Knob("qnn_remote_cache", "remote_cache", "shared artifact cache: fetch entries from URL "
         "before building, upload what is built (http(s):// GET/PUT with a bearer token from "
         "$QNN_GENAI_REMOTE_CACHE_TOKEN, or s3:// and other fsspec URLs)", _remote_url,
         metavar="URL"),
    Knob("qnn_rebuild", "rebuild", "ignore cache hits and rebuild every artifact once", _flag,
         False, kind="bool"),
    Knob("qnn_prebuild", "prebuild", "once collection knows the selected tests, build the cache "
         "entries they need ahead, in a background process (dependency order; llama.py's "
         "subprocess builds beside the in-process ones)", _flag, True, kind="bool"),
    Knob("models", "models", "model cases to run, comma separated, whatever their tier "
         "(default: every default-tier case, and the nightly-tier ones with --nightly)",
         _names, kind="list", metavar="NAME,..."),
    Knob("qnn_shard", "shard", "run shard K of N: a deterministic share of the model case x "
         "target combinations, each case x SoC-backend's builds on one shard (tests without a "
         "combination on shard 1); merge the shards' --qnn-report folders with python -m "
         "pytest_qnn_genai.report merge", _shard, metavar="K/N"),
    Knob("qnn_cases", "case_dirs", "also run the model cases in DIR/*/case.json (files relative "
         "to each case's folder; golden files in its golden/ if it has one), repeatable",
         _paths, kind="list", metavar="DIR"),
    Knob("nightly", "nightly", "also run tests marked nightly", _flag, False, kind="bool"),
    Knob("qnn_update_golden", "update_golden", "rewrite golden files (continuations, perf "
         "floors) from this run, printing the diff; a test that wrote one reports 'updated', "
         "never 'passed' (refused under CI=true without --qnn-force-update)", _flag, False,
         kind="bool"),
    Knob("qnn_force_update", "force_update", "allow --qnn-update-golden or syrupy's "
         "--snapshot-update where $CI is set (refused there otherwise: a CI run judges, it "
         "does not accept)", _flag, False, kind="bool"),
    Knob("qnn_golden_dir", "golden_dir", "folder of golden files (relative paths are taken from "
         "rootdir)", _rooted_path, "golden", metavar="DIR"),
    Knob("qnn_report", "report_dir", "write results.json, summary.md and tok/s plots of this run "
         "into DIR/<date>/ (earlier runs in DIR give the trend)", _path, metavar="DIR"),
    Knob("qnn_compare_to", "compare_to", "an earlier results.json (or its folder): show each perf "
         "figure's change against it", _path, metavar="PATH"),
    _perf("qnn_perf_noise", "perf_noise", "relative change below which a perf figure counts as "
          "unchanged", "0.10", number(float, 0.0, 1.0), "FRACTION"),
    _perf("qnn_perf_min_tokens", "perf_min_tokens", "tokens a perf figure must rest on, pooled "
          "over rounds", "64", number(int, 0), "N"),
    _perf("qnn_perf_min_seconds", "perf_min_seconds", "measured seconds a perf figure must rest "
          "on, pooled over rounds", "2.0", number(float, 0.0), "S"),
    _perf("qnn_perf_ratio_floor", "perf_ratio_floor", "A/B gate on timed rounds (upstream's "
          "runners, a pair with a lookahead side): lowest allowed B/A tok/s ratio (median of "
          "paired rounds; its 95 percent lower bound must reach it); the emulator's gates count "
          "work and take no floor", "0.97", number(float, 0.0, low_open=True), "RATIO"),
    _perf("qnn_perf_accepted_floor", "perf_accepted_floor", "no effect since the emulator's "
          "speed against the accepted build is counted work, held exactly; kept one release so "
          "command lines that pass it still run", "0.97",
          number(float, 0.0, low_open=True), "RATIO"),
    _perf("qnn_perf_rounds", "perf_rounds", "measured rounds per perf figure (after one warm-up "
          "round)", "5", number(int, 1, 1000), "N"),
    Knob("qnn_ab", "ab_pairs", "emulator A/B gate on two variants of each model case, "
         "REFERENCE:CANDIDATE, repeatable: legacy (llama.py), new (the staged flow) or a "
         "variant the case declares (default: legacy:new)", _ab_pairs, "legacy:new",
         kind="list", metavar="A:B"),
    Knob("adb_host", "adb_host", "adb server HOST[:PORT]", _text, metavar="HOST[:PORT]"),
    Knob("adb_path", "adb_path", "adb client binary", _text, "adb", metavar="PATH"),
    Knob("runner", "runner", "qnn_llama_runner built for the phone (with --device) or for x86 "
         "(without: the emulator through upstream's runner); qnn_executor_runner beside it",
         _text, metavar="PATH"),
    Knob("qnn_device_libs", "qnn_device_libs", "folder with the phone's QNN libraries (default: "
         "under --qnn-sdk)", _text, metavar="DIR"),
    Knob("executorch_src", "executorch_src", "an ExecuTorch source tree: the harness builds "
         "upstream's qnn_llama_runner and qnn_executor_runner for x86 from it (cached) and runs "
         "the emulator through them", _path, metavar="DIR"),
)
KNOBS_BY_NAME = {k.name: k for k in KNOBS}


def add_options(parser: pytest.Parser) -> None:
    """Register every knob as a command-line option (``--no-`` too for booleans) and an ini key."""
    group = parser.getgroup("qnn-genai", "ExecuTorch QNN GenAI gate")
    for k in KNOBS:
        env_help = f" [env {k.env_var}, ini {k.key}]"
        if k.kind == "bool":
            group.addoption(k.flag, action="store_true", default=None, dest=k.key,
                            help=k.help + env_help)
            group.addoption("--no-" + k.flag[2:], action="store_false", default=None, dest=k.key,
                            help=f"turn {k.flag} off (over env and ini)")
            parser.addini(k.key, k.help, type="bool", default=None)
        else:
            choices = f" {{{','.join(k.choices)}}}" if k.choices else ""
            group.addoption(k.flag, action="append" if k.kind == "list" else "store",
                            default=None, dest=k.key, metavar=k.metavar,
                            help=k.help + choices + env_help)
            parser.addini(k.key, k.help, default=None)


def raw_value(k: Knob, getoption: Callable[[str], Raw], getini: Callable[[str], Raw],
              environ: Mapping[str, str]) -> Raw:
    """The knob's raw value from the first source that sets it: CLI, env, ini, default."""
    raw = getoption(k.key)
    if raw is None and environ.get(k.env_var, "") != "":
        raw = _truthy(environ[k.env_var]) if k.kind == "bool" else environ[k.env_var]
    if raw is None:
        ini = getini(k.key)
        raw = ini if ini not in (None, "", []) else None
    return k.default if raw is None else raw


assert {f.name for f in fields(Settings)} == {k.field for k in KNOBS}, "a knob without a field"


def resolve(getoption: Callable[[str], Raw], getini: Callable[[str], Raw], rootdir: Path,
            environ: Mapping[str, str] | None = None) -> Settings:
    """The session's :class:`Settings`; a bad value is one ``pytest.UsageError`` naming the flag."""
    ctx = Context(rootdir, os.environ if environ is None else environ)
    values: dict[str, Any] = {}  # each parser returns its field's type (checked by the table test)
    for k in KNOBS:
        try:
            values[k.field] = k.parse(raw_value(k, getoption, getini, ctx.environ), k, ctx)
        except OptionError as e:
            raise pytest.UsageError(f"{k.flag}: {e}") from None
    return Settings(**values)


# -- checks across options, once the cases are known ---------------------------------------

def check_ab_pairs(pairs: tuple[tuple[str, str], ...], cases: Iterable[ModelCase]) -> None:
    """Every ``--qnn-ab`` name is a variant of some case there is (``cases``: every case, not
    only the selected ones), so a misspelt name is one line. A selected case without it skips
    its pair, saying so: the nightly's standard pairs stay valid for a selection of cases that
    declare none of them (``make nightly MODELS=smollm2_135m``)."""
    known = dict.fromkeys(n for c in cases for n in c.variant_names)
    for name in (n for pair in pairs for n in pair):
        if name not in known:
            raise pytest.UsageError(f"--qnn-ab: no model case has a variant {name!r}; "
                                    f"variants: {', '.join(known)}")


def check_x86_runner(settings: Settings) -> None:
    """``--executorch-src`` must be a tree the runners build from; a ``--runner`` without
    ``--device`` runs on this machine, so it must be an x86_64 binary: one line each."""
    if settings.executorch_src is not None:
        from pytest_qnn_genai.runners import RunnerBuildError
        from pytest_qnn_genai.runners.sources import check_tree

        try:
            check_tree(settings.executorch_src)
        except RunnerBuildError as e:
            raise pytest.UsageError(f"--executorch-src: {e}") from None
    if settings.runner and not settings.devices:
        from pytest_qnn_genai.elf import ElfError, read_elf

        try:
            machine = read_elf(Path(settings.runner).expanduser()).machine
        except ElfError as e:
            raise pytest.UsageError(f"--runner: {e}") from None
        if machine != "x86_64":
            raise pytest.UsageError(
                f"--runner: {settings.runner} is built for {machine}; without --device the runner "
                "runs on this machine (x86_64): pass an x86 build, or --device for a phone")
