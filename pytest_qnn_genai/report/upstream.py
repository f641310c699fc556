"""The report's section beside upstream: a run's figures of a case whose weights are a model
upstream gates, next to that model's ``LlmSpecs`` (:mod:`pytest_qnn_genai.checks.upstream_specs`).

Contract: one table per such case × target, a row per figure upstream sets a bound on (``.pte``
bytes, logits SQNR against fp32, perplexity, decode tok/s on the SoC), with the bound's direction
as upstream asserts it, the configuration each figure was measured in, and the sentences of the
case's ``upstream.json`` saying what else differs (weights, text, target). Two kinds of row: the
gate's own figures, measured otherwise than upstream (the case's own mode and context), are
``info``, and the rows of upstream's CI job reproduced (``suites/gate/test_upstream_ci.py``: kv
mode at upstream's context, llama.py's own ``sqnr_eval``) carry their verdict, judged against
upstream's bound. The hazard is a reader taking an info row for a verdict; each row says which it
is and what it was measured in.
"""
from __future__ import annotations

from collections.abc import Mapping

from pytest_qnn_genai import text
from pytest_qnn_genai.checks.upstream_specs import UpstreamSpecsError, counterpart, llm_specs
from pytest_qnn_genai.figures import INFO, Figure
from pytest_qnn_genai.models import registry
from pytest_qnn_genai.report.document import Cell, Section, Table
from pytest_qnn_genai.report.results import Record, ResultsFile

UPSTREAM_CI = "upstream's CI job: kv mode, 1024/1024, --enable_x86_64 (llama.py sqnr_eval)"
# (this run's figure, the record kind it is in, upstream's LlmSpecs field (None: the SoC's),
# the row's words, how upstream asserts its bound, the configuration it was measured in)
ROWS = (("upstream_ci_pte_bytes", "gate", "pte_size", ".pte bytes", "≤", UPSTREAM_CI),
        ("upstream_ci_sqnr_db", "gate", "sqnr", "logits SQNR dB vs fp32 (the prompt's rows)",
         "≥", UPSTREAM_CI),
        ("pte_bytes", "gate", "pte_size", ".pte bytes", "≤",
         "the case's own build (hybrid: two graphs, no weight sharing on x86; upstream does not "
         "assert a hybrid x86 build's size)"),
        ("target_vs_transformers_sqnr_db", "gate", "sqnr",
         "logits SQNR dB vs fp32 (the generated tokens' rows, vs transformers)", "≥",
         "the case's own build and prompt run"),
        ("target_word_perplexity", "gate", "wikitext_ppl",
         "perplexity (here: held-out word perplexity; upstream: wikitext)", "≤",
         "the case's own build"),
        ("decode_tok_s", "perf", None, "decode tok/s (upstream: on a phone of the SoC)", "≥",
         "the case's own build on this target"))
INFO_LINE = ("Rows measured in upstream's CI job's configuration carry their verdict against "
             "upstream's bound; the others are info: measured otherwise (below), so neither "
             "figure judges the other.")


def _figure(records: list[Record], kind: str, name: str) -> Figure | None:
    return next((f for r in records if r.kind == kind for f in r.figures if f.name == name), None)


def sections(results: ResultsFile, cases: Mapping[str, registry.ModelCase] | None = None,
             ) -> list[Section]:
    """The section for every case × target of ``results`` with an upstream counterpart."""
    cases = registry.available() if cases is None else cases
    out = []
    for model, target in dict.fromkeys((r.model, r.target) for r in results.records):
        case = cases.get(model)
        try:
            pair = counterpart(case.folder) if case is not None else None
            specs = llm_specs(pair.llm_specs) if pair is not None else None
        except UpstreamSpecsError as e:  # said in the report, which is still written
            out.append(Section(f"{model} beside upstream's LlmSpecs", 2, [str(e)]))
            continue
        if pair is None or specs is None:
            continue
        mine = [r for r in results.records if (r.model, r.target) == (model, target)]
        soc = mine[0].soc
        rows = []
        for name, kind, field, words, asserts, configuration in ROWS:
            bound = specs.values.get(field or soc)
            ours = _figure(mine, kind, name)
            judged = configuration == UPSTREAM_CI
            if judged and ours is None:
                continue  # upstream's job did not run for this case × target
            verdict = ours.verdict if judged and ours is not None else INFO
            rows.append([Cell(words), Cell(configuration),
                         Cell(text.value(None if ours is None else ours.value)),
                         Cell("—" if bound is None else f"{asserts} {bound}"),
                         Cell(verdict, verdict=verdict)])
        out.append(Section(f"{model} · {target} beside upstream's LlmSpecs[{pair.llm_specs!r}]",
                           2, [INFO_LINE,
                               Table(["figure", "measured in", "this run", "upstream asserts",
                                      "verdict"], rows),
                               "\n".join([f"- {d}" for d in pair.differs]
                                         + [f"- upstream's entry: {specs.source}"])]))
    return out
