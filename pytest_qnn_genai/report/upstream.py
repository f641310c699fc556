"""The report's section beside upstream: a run's figures of a case whose weights are a model
upstream gates, next to that model's ``LlmSpecs`` (:mod:`pytest_qnn_genai.checks.upstream_specs`).

Contract: one table per such case × target, a row per figure upstream sets a bound on (``.pte``
bytes, logits SQNR against fp32, perplexity, decode tok/s on the SoC), with the bound's direction
as upstream asserts it and the sentences of the case's ``upstream.json`` saying what this run
measures otherwise (weights, text, mode, target). Every row is ``info``: the two measurements
differ, so neither judges the other; the hazard is a reader taking a row for a verdict, which the
section's first line rules out.
"""
from __future__ import annotations

from collections.abc import Mapping

from pytest_qnn_genai import text
from pytest_qnn_genai.checks.upstream_specs import UpstreamSpecsError, counterpart, llm_specs
from pytest_qnn_genai.models import registry
from pytest_qnn_genai.report.document import Cell, Section, Table
from pytest_qnn_genai.report.results import Record, ResultsFile

# (this run's figure, the record kind it is in, upstream's LlmSpecs field (None: the SoC's),
# the row's words, how upstream asserts its bound)
ROWS = (("pte_bytes", "gate", "pte_size", ".pte bytes", "≤"),
        ("target_vs_transformers_sqnr_db", "gate", "sqnr",
         "logits SQNR dB vs fp32 (upstream: llama.py's sqnr_eval)", "≥"),
        ("target_word_perplexity", "gate", "wikitext_ppl",
         "perplexity (here: held-out word perplexity; upstream: wikitext)", "≤"),
        ("decode_tok_s", "perf", None, "decode tok/s (upstream: on a phone of the SoC)", "≥"))
INFO_LINE = ("Every row is info: upstream measures otherwise (below), so neither figure judges "
             "the other.")


def _figure(records: list[Record], kind: str, name: str) -> object:
    return next((f.value for r in records if r.kind == kind for f in r.figures
                 if f.name == name), None)


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
        for name, kind, field, words, asserts in ROWS:
            bound = specs.values.get(field or soc)
            ours = _figure(mine, kind, name)
            rows.append([Cell(words), Cell(text.value(ours)),  # as the report shows every figure
                         Cell("—" if bound is None else f"{asserts} {bound}"),
                         Cell("info", verdict="info")])
        out.append(Section(f"{model} · {target} beside upstream's LlmSpecs[{pair.llm_specs!r}]",
                           2, [INFO_LINE,
                               Table(["figure", "this run", "upstream asserts", "verdict"], rows),
                               "\n".join([f"- {d}" for d in pair.differs]
                                         + [f"- upstream's entry: {specs.source}"])]))
    return out
