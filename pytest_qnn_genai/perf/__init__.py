"""The performance gate: measured rounds (:mod:`.benchmark`), the minimum work a figure rests on
(:mod:`.minimum`) and the interleaved A/B gate (:mod:`.gate`). Phone floors are golden files
(:mod:`pytest_qnn_genai.golden.perf`); run-to-run changes are the report's
(:mod:`pytest_qnn_genai.report.diff`)."""
