"""The docs site builds with warnings as errors, and its generated pages name every fixture (the
plugin's, the suites' conftests', the arguments the plugin parametrises), every registered mark
and every option of the knob table.

The names are found here another way than the generator finds them: fixtures by importing their
modules and asking pytest's fixture objects (the generator reads the source with ast), marks from
what the plugin registers with pytest, options from what the plugin adds to pytest's parser. So a
generator that skipped a kind of definition fails here.
"""
from __future__ import annotations

import html
import importlib.util
import inspect
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from _pytest.fixtures import FixtureFunctionDefinition

from pytest_qnn_genai.plugin import fixtures, marks, options

ROOT = Path(__file__).resolve().parents[3]
BUILD_TIMEOUT_S = 300
PYTEST_OWN = {"request", "tmp_path_factory", "benchmark"}  # pytest's and plugins' fixtures


def _module(path: Path) -> ModuleType:
    name = "docs_test_" + "_".join(path.relative_to(ROOT).with_suffix("").parts)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _fixtures(module: ModuleType) -> dict[str, FixtureFunctionDefinition]:
    return {v.name: v for v in vars(module).values() if isinstance(v, FixtureFunctionDefinition)}


def _conftests() -> list[Path]:
    return sorted((ROOT / "suites").rglob("conftest.py"))


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet",
                           "-d", str(out)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=BUILD_TIMEOUT_S)
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def _text(site: Path, page: str) -> str:
    return html.unescape((site / page).read_text())


def missing(names: set[str], page: str) -> list[str]:
    """The names ``page`` does not show as code (`` <code>name</code> ``), sorted."""
    return sorted(n for n in names if f"<code>{n}</code>" not in page)


def fixture_names() -> set[str]:
    found = set(_fixtures(fixtures))
    for conftest in _conftests():
        found |= set(_fixtures(_module(conftest)))
    return found


def parametrised_names() -> set[str]:
    """What fixtures request that no fixture defines: the arguments the plugin parametrises."""
    defined = fixture_names()
    modules = [fixtures, *(_module(c) for c in _conftests())]
    requested = {p for m in modules for f in _fixtures(m).values()
                 for p in inspect.signature(f._get_wrapped_function()).parameters}
    return requested - defined - PYTEST_OWN


class _Recorder:
    """Stands in for pytest's parser and its option group: records what the plugin adds."""

    def __init__(self) -> None:
        self.flags: list[str] = []
        self.ini: list[str] = []

    def getgroup(self, name: str, description: str = "") -> _Recorder:
        return self

    def addoption(self, *names: str, **kwargs: object) -> None:
        self.flags += names

    def addini(self, name: str, help: str, **kwargs: object) -> None:
        self.ini.append(name)


class _Config:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def addinivalue_line(self, name: str, line: str) -> None:
        assert name == "markers"
        self.lines.append(line)


def test_every_fixture_is_on_the_fixtures_page(site: Path) -> None:
    names = fixture_names() | parametrised_names()
    assert {"qnn_run", "qnn_case", "qnn_target", "heldout_fp32", "legacy_run"} <= names
    assert missing(names, _text(site, "fixtures.html")) == []


def test_every_registered_mark_is_on_the_writing_tests_page(site: Path) -> None:
    config = _Config()
    marks.register(config)
    names = {line.split(":")[0].split("(")[0] for line in config.lines}
    assert len(names) == len(config.lines) >= 8
    page = _text(site, "writing-tests.html")
    assert [n for n in sorted(names) if f"@pytest.mark.{n}" not in page] == []


def test_every_option_is_on_the_options_page(site: Path) -> None:
    parser = _Recorder()
    options.add_options(parser)
    page = _text(site, "options.html")
    assert missing({f for f in parser.flags if not f.startswith("--no-")}, page) == []
    assert [f for f in parser.flags if f.startswith("--no-") and f"<code>{f}</code>" not in page] == []
    assert missing(set(parser.ini), page) == []
    assert missing({k.env_var for k in options.KNOBS}, page) == []


def test_a_name_left_out_is_found(site: Path) -> None:
    page = _text(site, "fixtures.html")
    assert missing({"qnn_pte"}, page.replace("<code>qnn_pte</code>", "qnn_pte")) == ["qnn_pte"]


def test_the_gates_page_shows_the_thresholds_of_the_code(site: Path) -> None:
    generate = _module(ROOT / "docs" / "generate.py")
    from pytest_qnn_genai.checks import bounds, parity

    assert generate.constant("pytest_qnn_genai/checks/parity.py", "SCALE_RTOL") == parity.SCALE_RTOL
    assert generate.constant("pytest_qnn_genai/checks/bounds.py", "DEFAULTS") == bounds.DEFAULTS
    page = _text(site, "gates.html")
    assert "[[const:" not in page
    assert f"scales within rtol {parity.SCALE_RTOL:g};" in page


def test_a_marker_or_constant_that_names_nothing_fails_the_build() -> None:
    generate = _module(ROOT / "docs" / "generate.py")
    with pytest.raises(generate.GenerationError, match="defines no NOPE"):
        generate.expand("[[const:suites/gate/test_gate.py:NOPE]]")
    with pytest.raises(generate.GenerationError, match="no file"):
        generate.expand("[[const:suites/gone.py:X]]")
    with pytest.raises(generate.GenerationError, match="no such generated part"):
        generate.expand("<!-- qnn:nothing -->")


def test_every_product_and_its_edges_are_on_the_architecture_page(site: Path) -> None:
    """The product graph drawn from the table: every product, and what the flows are built from."""
    from pytest_qnn_genai.pipeline.products import table

    page = _text(site, "architecture.html")
    assert missing(set(table()), page) == []
    assert "quantize --> new" in page and "fp32-reference --> transformers-logits" in page
