"""``summary.html`` opened from disk by a real browser (headless Chromium, ``make chromium``).

The report of a real emulator run plus a phone's perf record below its golden floor, compared
with the same run a day earlier with another compile option. Chromium loads the page, the test
reads back through the rendered DOM the verdict of every figure cell (counted by the page's own
script and by the test) and holds them to ``results.json``; the phone's decode is ``fail`` and
the emulator's ``info``; a screenshot shows the verdict colours.
"""
from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
from matplotlib.image import imread

from pytest_qnn_genai.figures import VERDICTS
from pytest_qnn_genai.report.html import COLOURS
from pytest_qnn_genai.report.write import write_report
from tests.support import chromium
from tests.support.report_runs import EMU, PHONE, changed_run, with_phone


class RenderedPage(HTMLParser):
    """What the test reads back from the browser's DOM: attributes of ``#rendered-counts``, the
    ``#verdict-counts`` table, and every figure row (its section heading, cells, verdict)."""

    def __init__(self, dom: str) -> None:
        super().__init__()
        self.rendered: dict[str, str] = {}
        self.rows: list[tuple[str, list[str], str | None]] = []  # (h2, cells, data-verdict)
        self.counts_table: list[list[str]] = []
        self._h2, self._in_h2 = "", False
        self._table: str | None = None
        self._row: list[str] | None = None
        self._cell: str | None = None
        self._verdict: str | None = None
        self.feed(dom)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id") == "rendered-counts":
            self.rendered = {k: v or "" for k, v in a.items()}
        if tag == "h2":
            self._in_h2, self._h2 = True, ""
        elif tag == "table":
            self._table = a.get("id") or ""
        elif tag == "tr":
            self._row, self._verdict = [], None
        elif tag == "td" and self._row is not None:
            self._cell = ""
            self._verdict = a.get("data-verdict") or self._verdict

    def handle_data(self, data: str) -> None:
        if self._in_h2:
            self._h2 += data
        if self._cell is not None:
            self._cell += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "h2":
            self._in_h2 = False
        elif tag == "td" and self._row is not None and self._cell is not None:
            self._row.append(self._cell.strip())
            self._cell = None
        elif tag == "tr" and self._row:
            if self._table == "verdict-counts":
                self.counts_table.append(self._row)
            self.rows.append((self._h2, self._row, self._verdict))
            self._row = None

    def verdict_of(self, section: str, figure: str) -> str | None:
        [v] = [v for h2, cells, v in self.rows if h2 == section and figure in cells]
        return v


def test_summary_html_renders_the_verdicts_of_results_json(tmp_path: Path) -> None:
    run = with_phone(800.0)  # the phone's decode below its floor of 1600
    earlier = changed_run(option="kHtpHighPerformance", decode_scale=1.0, days=-1)
    folder, written, _ = write_report(tmp_path / "reports", run, earlier, 0.1, "yesterday")
    page = folder / "summary.html"
    assert page in written
    text = page.read_text()
    assert "http://" not in text and "https://" not in text  # one self-contained file
    assert text.count('src="data:image/png;base64,') == 2  # both plots embedded

    results = json.loads((folder / "results.json").read_text())
    want = dict.fromkeys(VERDICTS, 0)
    for r in results["records"]:
        for f in r["figures"]:
            want[f["verdict"]] += 1
    assert want["fail"] == 2 and want["pass"] > 20 and want["info"] > 5

    dom = RenderedPage(chromium.dump_dom(page))
    by_script = {v: int(dom.rendered[f"data-{v}"]) for v in VERDICTS}  # counted in the browser
    assert by_script == want
    cells = dict.fromkeys(VERDICTS, 0)
    for _, _, v in dom.rows:
        if v is not None:
            cells[v] += 1
    assert cells == want
    holes = sum(1 for r in results["records"] for f in r["figures"] if f["rule"] == "no-record")
    assert {row[0]: int(row[1]) for row in dom.counts_table} == {**want, "fail: no record": holes}
    assert dom.verdict_of(f"stories260k · {PHONE.id}", "decode_tok_s") == "fail"
    assert dom.verdict_of(f"stories260k · {EMU.id}", "decode_tok_s") == "info"
    changes = [cells for h2, cells, _ in dom.rows if h2.startswith("What changed")]
    assert ["compile stories260k SM8650-htp · spec.backend_options.performance_mode",
            "kHtpHighPerformance", "kHtpBurst"] in changes

    painted = _painted(chromium.screenshot(page, tmp_path / "summary.png"))
    assert painted["pass"] > 200 and painted["fail"] > 200 and painted["info"] > 200, painted
    passing, _, _ = write_report(tmp_path / "passing", with_phone(1700.0), None, 0.1)
    clean = _painted(chromium.screenshot(passing / "summary.html", tmp_path / "passing.png"))
    assert clean["fail"] == 0 and clean["pass"] > 200, clean  # no red without a failed figure


def _painted(png: Path) -> dict[str, int]:
    """How many pixels of the screenshot have each verdict's colour."""
    shot = imread(png)[..., :3]
    out = {}
    for verdict, (background, _) in COLOURS.items():
        rgb = np.array([int(background[i:i + 2], 16) / 255 for i in (1, 3, 5)])
        out[verdict] = int((np.abs(shot - rgb).max(axis=-1) < 0.02).sum())
    return out
