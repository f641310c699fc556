"""The run report: records of judged figures (:mod:`.results`), the run's fingerprint
(:mod:`.fingerprint`), what moved between runs (:mod:`.changes`, :mod:`.diff`), the summary
document (:mod:`.summary`, :mod:`.document`) as ``summary.md`` and ``summary.html``
(:mod:`.html`), the plots (:mod:`.plots`), the report folder (:mod:`.write`), and the one report
of a sharded run (:mod:`.merge`, ``python -m pytest_qnn_genai.report merge``: :mod:`.commands`)."""
