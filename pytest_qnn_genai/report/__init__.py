"""The run report: records of judged figures (:mod:`.results`), the run's fingerprint
(:mod:`.fingerprint`), what moved between runs (:mod:`.changes`, :mod:`.diff`), the summary
document (:mod:`.summary`, :mod:`.document`) as ``summary.md`` and ``summary.html``
(:mod:`.html`), the plots (:mod:`.plots`) and the report folder (:mod:`.write`)."""
