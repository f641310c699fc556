"""Every knob of the plugin: a command-line option, an ini key and an environment variable.

Precedence: command line > environment variable > ini file > default.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest

from pytest_qnn_genai import targets
from pytest_qnn_genai.targets import SocSpec


@dataclass(frozen=True)
class Knob:
    """One setting, exposed as ``--flag``, ini ``name`` and ``$QNN_GENAI_<NAME>``."""

    name: str
    help: str
    default: Any = None
    multiple: bool = False  # repeatable flag; env/ini values are comma separated
    flag_kind: str = "value"  # "value" | "bool"
    choices: tuple[str, ...] | None = None
    env: str | None = None  # overrides the derived environment variable name
    metavar: str | None = None

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def env_var(self) -> str:
        return self.env or "QNN_GENAI_" + self.name.removeprefix("qnn_").upper()


KNOBS: tuple[Knob, ...] = (
    Knob("soc", "target Snapdragon SoC, repeatable (e.g. SM8650)", ["SM8650"], multiple=True,
         metavar="NAME"),
    Knob("backend", "QNN backend to target", "htp", choices=("htp", "gpu", "lpai"), metavar="NAME"),
    Knob("device", "adb serial of a phone, repeatable; absent = the x86 HTP emulator",
         [], multiple=True, metavar="SERIAL"),
    Knob("qnn_sdk", "QNN SDK root (default: $QNN_SDK_ROOT, else the embedded x86 emulator SDK)",
         None, metavar="PATH"),
    Knob("qnn_cache_dir", "artifact and SDK cache directory", None, metavar="PATH"),
    Knob("qnn_rebuild", "ignore cache hits and rebuild every artifact", False, flag_kind="bool"),
    Knob("models", "model cases to run, comma separated (default: all registered)", [],
         multiple=True, metavar="NAME,..."),
    Knob("nightly", "also run tests marked nightly", False, flag_kind="bool"),
    Knob("qnn_update_golden", "rewrite golden files (continuations, perf floors) from this run, "
         "printing the diff", False, flag_kind="bool"),
    Knob("qnn_golden_dir", "folder of golden files (relative paths are taken from rootdir)",
         "golden", metavar="DIR"),
    Knob("qnn_report", "write results.json, summary.md and tok/s plots of this run into "
         "DIR/<date>/ (earlier runs in DIR give the trend)", None, metavar="DIR"),
    Knob("qnn_compare_to", "an earlier results.json (or its folder): show each perf figure's "
         "change against it", None, metavar="PATH"),
    Knob("qnn_perf_noise", "relative change below which a perf figure counts as unchanged",
         "0.10", metavar="FRACTION"),
    Knob("qnn_perf_min_tokens", "tokens a perf figure must rest on, pooled over rounds", "64",
         metavar="N"),
    Knob("qnn_perf_min_seconds", "measured seconds a perf figure must rest on, pooled over rounds",
         "2.0", metavar="S"),
    Knob("qnn_perf_ratio_floor", "A/B gate: lowest allowed median(B)/median(A) tok/s ratio", "0.9",
         metavar="RATIO"),
    Knob("qnn_perf_rounds", "measured rounds per perf figure (after one warm-up round)", "5",
         metavar="N"),
    Knob("adb_host", "adb server HOST[:PORT]", None, metavar="HOST[:PORT]"),
    Knob("adb_path", "adb client binary", "adb", metavar="PATH"),
    Knob("runner", "qnn_llama_runner built for the phone", None, metavar="PATH"),
    Knob("qnn_device_libs", "folder with the phone's QNN libraries (default: under --qnn-sdk)",
         None, metavar="DIR"),
)
KNOBS_BY_NAME = {k.name: k for k in KNOBS}


def add_options(parser: pytest.Parser) -> None:
    """Register every knob as a CLI option and an ini key."""
    group = parser.getgroup("qnn-genai", "ExecuTorch QNN GenAI gate")
    for k in KNOBS:
        env_help = f" [env {k.env_var}]"
        if k.flag_kind == "bool":
            group.addoption(k.flag, action="store_true", default=None, dest=f"qnn_{k.name}",
                            help=k.help + env_help)
            parser.addini(f"qnn_{k.name}", k.help, type="bool", default=None)
        else:
            group.addoption(k.flag, action="append" if k.multiple else "store", default=None,
                            dest=f"qnn_{k.name}", metavar=k.metavar, choices=None,
                            help=k.help + (f" {{{','.join(k.choices)}}}" if k.choices else "")
                            + env_help)
            parser.addini(f"qnn_{k.name}", k.help, default=None)


def _split(values: list[str] | str) -> list[str]:
    items = values if isinstance(values, list) else [values]
    return [p.strip() for v in items for p in str(v).split(",") if p.strip()]


def _truthy(text: str) -> bool:
    return text.strip().lower() in ("1", "true", "yes", "on")


def resolve(getoption: Callable[[str], Any], getini: Callable[[str], Any],
            environ: dict[str, str] | None = None) -> dict[str, Any]:
    """Return ``{knob name: value}`` from CLI, environment, ini and defaults, in that order."""
    environ = os.environ if environ is None else environ
    out: dict[str, Any] = {}
    for k in KNOBS:
        raw: Any = getoption(f"qnn_{k.name}")
        if raw is None and k.env_var in environ and environ[k.env_var] != "":
            raw = environ[k.env_var]
            raw = _truthy(raw) if k.flag_kind == "bool" else raw
        if raw is None:
            ini = getini(f"qnn_{k.name}")
            raw = ini if ini not in (None, "", []) else None
        if raw is None:
            raw = k.default
        if k.multiple:
            raw = _split(raw)
        if k.choices and raw not in k.choices:
            raise pytest.UsageError(
                f"{k.flag}: invalid choice {raw!r} (choose from {', '.join(k.choices)})")
        out[k.name] = raw
    return out


def _number(v: dict[str, Any], name: str, kind: type, low: float, high: float | None = None,
            low_open: bool = False) -> Any:
    """``v[name]`` as ``kind`` within ``[low, high]`` (``(low, ...`` when ``low_open``), else a
    one-line ``pytest.UsageError`` naming the flag."""
    raw, flag = v[name], KNOBS_BY_NAME[name].flag
    try:
        value = kind(str(raw).strip())
    except ValueError:
        raise pytest.UsageError(f"{flag}: expected {'an integer' if kind is int else 'a number'}, "
                                f"got {raw!r}") from None
    below = value <= low if low_open else value < low
    if below or (high is not None and value > high) or value != value:
        span = f"{'(' if low_open else '['}{low:g}, {'∞)' if high is None else f'{high:g}]'}"
        raise pytest.UsageError(f"{flag}: {raw!r} is outside {span}")
    return value


def default_cache_dir(environ: dict[str, str] | None = None) -> Path:
    """Per-user cache: ``$XDG_CACHE_HOME/pytest-qnn-genai`` or ``~/.cache/pytest-qnn-genai``."""
    environ = os.environ if environ is None else environ
    base = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pytest-qnn-genai"


def _path(raw: Any) -> Path | None:
    """A path knob's value (relative paths from the invocation directory), or None."""
    return Path(raw).expanduser().resolve() if raw not in (None, "") else None


def _perf_values(v: dict[str, Any]) -> dict[str, Any]:
    """The perf knobs, validated (missing keys keep the defaults)."""
    specs = {"perf_noise": ("qnn_perf_noise", float, 0.0, 1.0, False),
             "perf_min_tokens": ("qnn_perf_min_tokens", int, 0, None, False),
             "perf_min_seconds": ("qnn_perf_min_seconds", float, 0.0, None, False),
             "perf_ratio_floor": ("qnn_perf_ratio_floor", float, 0.0, None, True),
             "perf_rounds": ("qnn_perf_rounds", int, 1, 1000, False)}
    return {field_name: _number(v, name, kind, low, high, low_open)
            for field_name, (name, kind, low, high, low_open) in specs.items() if name in v}


@dataclass(frozen=True)
class Settings:
    """The resolved knobs of one pytest session."""

    socs: tuple[SocSpec, ...]
    backend: str
    devices: tuple[str, ...]
    qnn_sdk: str | None
    cache_dir: Path
    rebuild: bool
    models: tuple[str, ...]
    nightly: bool
    update_golden: bool
    golden_dir: Path
    adb_host: str | None
    adb_path: str
    runner: str | None
    qnn_device_libs: str | None
    report_dir: Path | None = None  # --qnn-report: the report root (runs go into <date>/)
    compare_to: Path | None = None  # --qnn-compare-to: an earlier results.json
    perf_noise: float = 0.10
    perf_min_tokens: int = 64
    perf_min_seconds: float = 2.0
    perf_ratio_floor: float = 0.9
    perf_rounds: int = 5

    @classmethod
    def from_values(cls, v: dict[str, Any], rootdir: Path = Path(".")) -> "Settings":
        """Validate resolved knob values; bad values raise ``pytest.UsageError`` (one line)."""
        try:
            socs = tuple(dict.fromkeys(targets.soc(s) for s in v["soc"]))
        except targets.UnknownSocError as e:
            raise pytest.UsageError(f"--soc: {e}") from None
        if not socs:
            raise pytest.UsageError(f"--soc: no SoC given; valid: {', '.join(targets.SOCS)}")
        cache = Path(v["qnn_cache_dir"]).expanduser() if v["qnn_cache_dir"] else default_cache_dir()
        return cls(socs=socs, backend=v["backend"], devices=tuple(dict.fromkeys(v["device"])),
                   qnn_sdk=v["qnn_sdk"], cache_dir=cache.resolve(), rebuild=bool(v["qnn_rebuild"]),
                   models=tuple(v["models"]), nightly=bool(v["nightly"]),
                   update_golden=bool(v["qnn_update_golden"]),
                   golden_dir=(rootdir / Path(v["qnn_golden_dir"]).expanduser()).resolve(),
                   adb_host=v["adb_host"],
                   adb_path=v["adb_path"], runner=v["runner"],
                   qnn_device_libs=v["qnn_device_libs"],
                   report_dir=_path(v.get("qnn_report")),
                   compare_to=_path(v.get("qnn_compare_to")),
                   **_perf_values(v))

    @property
    def targets(self) -> list[targets.Target]:
        """Every SoC × device this session runs on (the emulator when no device is given)."""
        devices = self.devices or (targets.EMULATOR,)
        return [targets.Target(s, self.backend, d) for s in self.socs for d in devices]

    @property
    def device_label(self) -> str:
        return ",".join(self.devices) if self.devices else targets.EMULATOR
