"""The new (staged) flow: plain functions, each writing files the next one loads in a fresh process.

- :func:`pytest_qnn_genai.stages.prepare.prepare` — model case → eager fp32 static-LLaMA graphs;
- :func:`pytest_qnn_genai.stages.quantize.quantize` — PT2E QDQ graphs + ``qdq.json``;
- :func:`pytest_qnn_genai.stages.compile.compile_pte` — hybrid QNN ``.pte`` + ``artifacts.json``
  + ``compile_spec.json``;
- :mod:`pytest_qnn_genai.stages.run` — run a built ``.pte`` on a target.

Nothing is imported here: executorch is slow to import, and import order matters once the QNN
SDK is active (see :func:`pytest_qnn_genai.sdk.activate`).
"""
