"""The builders a gate compares: ``legacy`` (executorch's llama.py), ``new`` (this project's
staged flow, :mod:`pytest_qnn_genai.stages`), ``genai`` (executorch's genai_pipeline), and the
smoke block. Each writes into a folder; :mod:`pytest_qnn_genai.pipeline` caches them.

Nothing is imported here: the builders import executorch, which is slow and order-sensitive once
the QNN SDK is active.
"""
