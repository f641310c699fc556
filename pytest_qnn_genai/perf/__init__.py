"""The performance gate: measured rounds (:mod:`.benchmark`), the minimum work a figure rests on
(:mod:`.minimum`), the interleaved A/B gate (:mod:`.gate`) and phone rounds on the workload a
golden floor was measured on (:mod:`.phone`). Phone floors are golden files
(:mod:`pytest_qnn_genai.golden.perf`); run-to-run changes are the report's
(:mod:`pytest_qnn_genai.report.diff`)."""
