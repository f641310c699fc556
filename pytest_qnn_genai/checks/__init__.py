"""The gate's comparisons as plain functions: agreement measures (:mod:`.numerics`), legacy-vs-new
program parity (:mod:`.parity`) and QDQ encodings matched by meaning (:mod:`.encodings`)."""
