"""The legacy flow (executorch's ``llama.py``, compile-only) as a :class:`Flow`."""
from __future__ import annotations

from typing import Any

from pytest_qnn_genai.flows.base import QDQ, TEXT_DECODER, FlowArtifacts, build_seconds


class LegacyFlow:
    """``Pipeline.legacy``: ``llama.py --compile_only``'s .pte and its ``decode_qdq.pt2``.

    ``decode_qdq.pt2`` is, despite its name, the calibration-shaped graph (llama.py exports
    ``calibration_prefill.decoder`` after the encoding override), i.e. the new flow's
    ``calibration`` graph.
    """

    name = "legacy"

    def build(self, pipeline: Any, case: Any, target: Any) -> FlowArtifacts:
        entry = pipeline.legacy_entry(case, target)
        art = pipeline.legacy(case, target)
        return FlowArtifacts(self.name, {TEXT_DECODER: art.pte, QDQ: art.decode_qdq},
                             {"legacy-build": build_seconds(entry)},
                             {"wall_s": art.wall_s, "peak_rss_mb": art.peak_rss_mb})
