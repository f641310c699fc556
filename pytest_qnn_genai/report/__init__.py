"""The run report: records (:mod:`.results`), run-to-run diffs (:mod:`.diff`), ``summary.md``
(:mod:`.summary`), tok/s plots (:mod:`.plots`) and the report folder (:mod:`.write`)."""
