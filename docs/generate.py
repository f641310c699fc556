"""The docs site's generated parts: an mkdocs hook (``hooks:`` in mkdocs.yml) that reads the code at
build time, so no committed page can drift from it.

A page asks for a generated part with a marker on a line of its own (``<!-- qnn:fixtures -->``,
``marks``, ``options``, ``case-specs``, ``product-graph``, ``readme-example``: the README's
example test, whose one home is the README) or inline
(``[[const:suites/gate/test_gate.py:NAME]]``, a module-level constant's value read from the
source). Fixtures are read from their source files
with :mod:`ast` (the plugin's ``plugin/fixtures.py``, every ``suites/**/conftest.py``, and the
arguments the plugin parametrises in ``plugin/*.py``), so the build imports neither torch nor the
suites; marks and options come from the plugin's own tables (``MARKERS``, ``KNOBS``). A marker or
constant that names nothing is a build error, never an empty section: a renamed constant fails
``make docs`` instead of leaving a stale number on the gates page.
"""
from __future__ import annotations

import ast
import inspect
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mkdocs.config.defaults import MkDocsConfig
    from mkdocs.structure.files import Files
    from mkdocs.structure.pages import Page

ROOT = Path(__file__).resolve().parents[1]
PLUGIN = ROOT / "pytest_qnn_genai" / "plugin"
SUITES = ROOT / "suites"
MARKER = re.compile(r"^<!-- qnn:([a-z-]+) -->$", re.MULTILINE)
CONST = re.compile(r"\[\[const:([^:\]]+):([A-Za-z_][A-Za-z0-9_]*)\]\]")


class GenerationError(Exception):
    """A page asks for something the code does not have."""


# -- fixtures -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Fixture:
    name: str
    scope: str
    source: str  # the file, relative to the repository
    requests: tuple[str, ...]  # the fixtures it asks for
    doc: str
    parametrised: bool = False  # an argument the plugin parametrises, not a fixture function


def _decorator_scope(func: ast.FunctionDef) -> str | None:
    """The fixture's scope when ``func`` is decorated with ``pytest.fixture``, else None."""
    for deco in func.decorator_list:
        call = deco if isinstance(deco, ast.Call) else None
        target = call.func if call else deco
        if isinstance(target, ast.Attribute) and target.attr == "fixture":
            for kw in call.keywords if call else []:
                if kw.arg == "scope" and isinstance(kw.value, ast.Constant):
                    return str(kw.value.value)
            return "function"
    return None


def fixtures_in(path: Path) -> list[Fixture]:
    """Every ``@pytest.fixture`` function of ``path``, in source order."""
    found = []
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef) and (scope := _decorator_scope(node)) is not None:
            args = tuple(a.arg for a in node.args.args if a.arg != "request")
            found.append(Fixture(node.name, scope, str(path.relative_to(ROOT)), args,
                                 ast.get_docstring(node) or ""))
    return found


def parametrised() -> list[Fixture]:
    """The arguments the plugin parametrises itself (``metafunc.parametrize("qnn_case", ...)``),
    each with the docstring of the function that does it."""
    found = []
    for path in sorted(PLUGIN.glob("*.py")):
        tree = ast.parse(path.read_text())
        for func in ast.walk(tree):
            if not isinstance(func, ast.FunctionDef):
                continue
            for call in ast.walk(func):
                if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                        and call.func.attr == "parametrize" and call.args
                        and isinstance(call.args[0], ast.Constant)):
                    scope = next((str(k.value.value) for k in call.keywords if k.arg == "scope"
                                  and isinstance(k.value, ast.Constant)), "function")
                    found.append(Fixture(str(call.args[0].value), scope,
                                         str(path.relative_to(ROOT)), (),
                                         ast.get_docstring(func) or "", parametrised=True))
    return found


def suite_conftests() -> list[Path]:
    return sorted(SUITES.rglob("conftest.py"))


def _markdown(doc: str) -> str:
    """A docstring as markdown: reST roles and double backticks read as code, ``::`` blocks as
    indented code blocks."""
    text = inspect.cleandoc(doc) if doc else "*(no docstring)*"
    text = re.sub(r":(?:class|func|mod|meth|data|attr):`~?([^`]+)`", r"`\1`", text)
    text = text.replace("``", "`")
    return re.sub(r"::\n\n", ":\n\n", text)


def _fixture_section(f: Fixture) -> str:
    needs = ("*parametrised by:* the plugin" if f.parametrised
             else "*requests:* " + (", ".join(f"`{r}`" for r in f.requests) or "nothing"))
    return (f"### `{f.name}`\n\n*scope:* {f.scope} · *defined in:* `{f.source}` · {needs}\n\n"
            f"{_markdown(f.doc)}\n")


def fixtures_page() -> str:
    parts = ["## Parametrised by the plugin\n",
             "Ask for these in a test's signature; the plugin parametrises the test over them "
             "(test ids read `test_x[<case>-<target>]`).\n"]
    parts += [_fixture_section(f) for f in parametrised()]
    parts += ["## The plugin's fixtures\n",
              "Available in every test once the plugin is installed "
              "(`pytest_qnn_genai/plugin/fixtures.py`).\n"]
    parts += [_fixture_section(f) for f in fixtures_in(PLUGIN / "fixtures.py")]
    for conftest in suite_conftests():
        where = conftest.parent.relative_to(ROOT)
        parts.append(f"## The suites' fixtures: `{where}/conftest.py`\n")
        parts.append(f"Available to the tests under `{where}/`.\n")
        parts += [_fixture_section(f) for f in fixtures_in(conftest)]
    return "\n".join(parts)


# -- marks and options ----------------------------------------------------------------------------
def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def marks_page() -> str:
    from pytest_qnn_genai.plugin.marks import MARKERS

    rows = [f"| `@pytest.mark.{spec}` | {_cell(text)} |" for spec, text in MARKERS.items()]
    return "\n".join(["| mark | meaning |", "|---|---|", *rows]) + "\n"


def options_page() -> str:
    from pytest_qnn_genai.plugin.options import KNOBS

    rows = []
    for k in KNOBS:
        flag = f"`{k.flag}`" + (f" `{k.metavar}`" if k.metavar else "")
        if k.kind == "bool":
            flag += f" / `--no-{k.flag[2:]}`"
        how = {"list": " (repeatable; comma separated in env and ini)", "bool": " (on/off)"}
        default = "—" if k.default in (None, "") else f"`{k.default}`"
        choices = f" One of {', '.join(f'`{c}`' for c in k.choices)}." if k.choices else ""
        rows.append(f"| {flag} | `{k.env_var}` | `{k.key}` | {default} | "
                    f"{_cell(k.help)}{how.get(k.kind, '')}.{choices} |")
    return "\n".join(["| option | environment | ini key | default | meaning |",
                      "|---|---|---|---|---|", *rows]) + "\n"


# -- gates ----------------------------------------------------------------------------------------
def constant(source: str, name: str) -> object:
    """The literal value of module-level ``name`` in ``source`` (a path in the repository)."""
    path = ROOT / source
    if not path.is_file():
        raise GenerationError(f"[[const:{source}:{name}]]: no file {source}")
    for node in ast.parse(path.read_text()).body:
        targets = (node.targets if isinstance(node, ast.Assign)
                   else [node.target] if isinstance(node, ast.AnnAssign) and node.value else [])
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            value = node.value
            assert value is not None
            try:
                return ast.literal_eval(value)
            except ValueError:
                raise GenerationError(f"[[const:{source}:{name}]]: not a literal") from None
    raise GenerationError(f"[[const:{source}:{name}]]: {source} defines no {name}")


def _constant_text(value: object) -> str:
    if isinstance(value, dict):
        return ", ".join(f"`{k}` {v:g}" if isinstance(v, float) else f"`{k}` {v}"
                         for k, v in value.items())
    return f"{value:g}" if isinstance(value, float) else str(value)


def case_specs_page() -> str:
    """Each packaged model case's ``gate`` spec from its ``case.json``, with its notes."""
    rows, notes = [], []
    for spec_file in sorted((ROOT / "pytest_qnn_genai" / "models").glob("*/case.json")):
        name = spec_file.parent.name
        gate = dict(json.loads(spec_file.read_text()).get("gate", {}))
        note = gate.pop("notes", "")
        declared = ("; ".join(f"`{k}` {_constant_text(v)}" for k, v in gate.items())
                    or "nothing (every bound is a default)")
        rows.append(f"| `{name}` | {_cell(declared)} |")
        if note:
            notes.append(f"- **{name}**: {_cell(note)}")
    return "\n".join(["| case | declared bounds |", "|---|---|", *rows, "", *notes]) + "\n"


def readme_example_page() -> str:
    """The README's example test (one home: tests/integration/docs runs it)."""
    blocks = re.findall(r"^```python\n.*?^```\n", (ROOT / "README.md").read_text(),
                        re.MULTILINE | re.DOTALL)
    if len(blocks) != 1:
        raise GenerationError(f"README.md has {len(blocks)} python blocks; the example is one")
    return blocks[0]


# -- the product graph ----------------------------------------------------------------------------
# representative arguments of the products whose ``built_from`` depends on their argument
GRAPH_ARGS = {"qdq-encodings": ("legacy", "new"), "qdq-logits": ("", "heldout")}


def product_graph_page() -> str:
    """The product table (pipeline/products.py) as a table and as edges "built from -> product".
    Imports the package (the flows are products: their modules import torch)."""
    from pytest_qnn_genai.pipeline.products import Need, table

    rows, edges = [], []
    for product in table().values():
        froms: dict[str, None] = {}
        for arg in GRAPH_ARGS.get(product.name, ("",)):
            need = Need(product.name, "CASE", "SOC", "htp", arg)
            froms.update(dict.fromkeys(d.product for d in product.built_from(need)))
        kind = ", ".join(k for k, on in (("minutes", product.long),
                                          ("subprocess", product.in_subprocess)) if on)
        rows.append(f"| `{product.name}` | `{product.cache_stage}` | {product.per.value} | "
                    f"{', '.join(f'`{f}`' for f in froms) or '-'} | {kind or 'seconds'} | "
                    f"{', '.join(f'`{m}`' for m in product.code)} |")
        edges += [f"{f:>20} --> {product.name}" for f in froms]
    return "\n".join(["| product | cache stage | per | built from | builds in | code in its key |",
                      "|---|---|---|---|---|---|", *rows, "", "```", *edges, "```"]) + "\n"


# -- the hook -------------------------------------------------------------------------------------
GENERATORS = {"fixtures": fixtures_page, "marks": marks_page, "options": options_page,
              "case-specs": case_specs_page, "readme-example": readme_example_page,
              "product-graph": product_graph_page}


def expand(markdown: str) -> str:
    """``markdown`` with every marker and constant replaced by what the code says."""
    def block(match: re.Match[str]) -> str:
        make = GENERATORS.get(match.group(1))
        if make is None:
            raise GenerationError(f"<!-- qnn:{match.group(1)} -->: no such generated part "
                                  f"({', '.join(GENERATORS)})")
        return make()
    text = MARKER.sub(block, markdown)
    return CONST.sub(lambda m: _constant_text(constant(m.group(1), m.group(2))), text)


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    from mkdocs.exceptions import PluginError

    try:
        return expand(markdown)
    except GenerationError as e:
        raise PluginError(f"{page.file.src_path}: {e}") from None


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """The top-level CHANGELOG.md as the site's changelog page (one file, not a copy)."""
    from mkdocs.structure.files import File

    files.append(File.generated(config, "changelog.md",
                                content=(ROOT / "CHANGELOG.md").read_text()))
    return files
