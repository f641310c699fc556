"""The performance gate's plain logic: golden floors, run-to-run diffs, A/B gates, minimum work."""
from pytest_qnn_genai.perf.compare import (FigureDiff, GateVerdict, compare, interleave,
                                           relative_gate, render_table)
from pytest_qnn_genai.perf.golden import (GoldenFileError, GoldenPerf, GoldenWriteRefused,
                                          load_golden, load_goldens, update_golden)
from pytest_qnn_genai.perf.minimum import Work, check_minimum, measured_work

__all__ = ["FigureDiff", "GateVerdict", "GoldenFileError", "GoldenPerf", "GoldenWriteRefused",
           "Work", "check_minimum", "compare", "interleave", "load_golden", "load_goldens",
           "measured_work", "relative_gate", "render_table", "update_golden"]
