"""pytest-qnn-genai: the parity and regression gate for ExecuTorch's Qualcomm (QNN) LLM pipeline.

Importing the package pins the numeric path (:mod:`pytest_qnn_genai.isa`) in this process's
environment, before any of its modules loads torch: every build and reference computes on it.
"""
from pytest_qnn_genai import isa

isa.pin()

__version__ = "0.1.0"
