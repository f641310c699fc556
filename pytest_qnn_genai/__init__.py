"""pytest-qnn-genai: the parity and regression gate for ExecuTorch's Qualcomm (QNN) LLM pipeline."""

__version__ = "0.1.0"
