"""The pipeline: every cached product of a session, declared once and built through the cache.

- :mod:`.products`: the product table (what each product is per, the code in its key, what it is
  built from, its ``make``), the needs fixtures declare, and the graph the prebuild walks;
- :mod:`.core`: :class:`Pipeline`, one session's view of the stages through the artifact cache;
- :mod:`.references`: the references it judges them by (fp32, the QDQ graph's, transformers');
- :mod:`.outputs`: a program's outputs on the emulator, kept;
- :mod:`.makers`: the harness's products' ``make`` functions.
"""
from pytest_qnn_genai.pipeline.core import Pipeline

__all__ = ["Pipeline"]
