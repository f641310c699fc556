"""``summary.html``: the summary document as one self-contained page.

The same :class:`~pytest_qnn_genai.report.document.Section` list as ``summary.md``, with verdict
cells coloured, the plots embedded as base64 PNGs and no external resource (no stylesheet, font,
script or image is fetched), so the file opens from disk or as a CI artifact. Every figure's
verdict cell carries ``data-verdict``; a few lines of inline script count those cells as the
browser rendered them into ``#rendered-counts`` (``data-pass``, ``data-fail``, ...), which the
browser test reads back and holds to ``results.json`` and to the ``#verdict-counts`` table.
"""
from __future__ import annotations

import base64
from html import escape
from pathlib import Path

from pytest_qnn_genai.figures import VERDICTS
from pytest_qnn_genai.files import write_text_atomic
from pytest_qnn_genai.report.document import Block, Cell, Image, Section, Table

HTML_NAME = "summary.html"
# verdict colours: background, text
COLOURS = {"pass": ("#2da44e", "#ffffff"), "fail": ("#cf222e", "#ffffff"),
           "inconclusive": ("#bf8700", "#ffffff"), "info": ("#d0d7de", "#1f2328"),
           "updated": ("#8250df", "#ffffff")}

_STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 1.5em; color: #1f2328; }
table { border-collapse: collapse; margin: 0.5em 0 1.2em; }
th, td { border: 1px solid #d0d7de; padding: 3px 8px; vertical-align: top; }
th { background: #f6f8fa; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.verdict { font-weight: 600; text-align: center; }
img { max-width: 100%; border: 1px solid #d0d7de; margin: 0.5em 0; }
""" + "".join(f"td.v-{v} {{ background: {bg}; color: {fg}; }}\n"
              for v, (bg, fg) in COLOURS.items())

# counts the rendered verdict cells of the figure tables (what the browser test reads back)
_SCRIPT = """
document.addEventListener("DOMContentLoaded", function () {
  var out = document.getElementById("rendered-counts"), parts = [];
  VERDICTS.forEach(function (v) {
    var n = document.querySelectorAll('td[data-verdict="' + v + '"]').length;
    out.setAttribute("data-" + v, String(n));
    parts.push(n + " " + v);
  });
  out.textContent = "verdict cells rendered: " + parts.join(", ");
});
""".replace("VERDICTS", "[" + ", ".join(f'"{v}"' for v in VERDICTS) + "]")


def _cell(c: Cell, counted: bool) -> str:
    classes = []
    attrs = ""
    if c.verdict is not None:
        classes += ["verdict", f"v-{c.verdict}"]
        attrs = f' data-verdict="{c.verdict}"' if counted else f' data-shown="{c.verdict}"'
    if c.numeric:
        classes.append("num")
    cls = f' class="{" ".join(classes)}"' if classes else ""
    return f"<td{cls}{attrs}>{escape(c.text)}</td>"


def _table(t: Table) -> str:
    name = f' id="{escape(t.name)}"' if t.name else ""
    head = "".join(f"<th>{escape(c)}</th>" for c in t.columns)
    body = "\n".join("<tr>" + "".join(_cell(c, t.counted) for c in row) + "</tr>"
                     for row in t.rows)
    return f"<table{name}>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody>\n</table>"


def _image(img: Image) -> str:
    data = base64.b64encode(img.path.read_bytes()).decode("ascii")
    return (f'<figure><img alt="{escape(img.alt)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{escape(img.alt)}</figcaption></figure>")


def _paragraph(block: str) -> str:
    lines = block.strip("\n").splitlines()
    if lines and all(line.startswith("- ") for line in lines):
        return "<ul>" + "".join(f"<li>{escape(line[2:])}</li>" for line in lines) + "</ul>"
    return "<p>" + "<br>".join(escape(line) for line in lines) + "</p>"


def _block(b: Block) -> str:
    if isinstance(b, Table):
        return _table(b)
    if isinstance(b, Image):
        return _image(b)
    return _paragraph(b)


def to_html(sections: list[Section], title: str) -> str:
    """The page's text."""
    body = []
    for i, s in enumerate(sections):
        level = min(max(s.level, 1), 6)
        body.append(f"<h{level}>{escape(s.title)}</h{level}>")
        if i == 0:
            body.append('<p id="rendered-counts"></p>')
        body += [_block(b) for b in s.blocks]
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{escape(title)}</title>\n<style>{_STYLE}</style>\n"
            f"<script>{_SCRIPT}</script>\n</head>\n<body>\n" + "\n".join(body)
            + "\n</body>\n</html>\n")


def write_html(path: Path | str, sections: list[Section], title: str) -> Path:
    """Write :func:`to_html` atomically; returns the path."""
    path = Path(path)
    write_text_atomic(path, to_html(sections, title))
    return path
