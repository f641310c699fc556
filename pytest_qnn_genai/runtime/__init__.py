"""Running and inspecting .pte files with the ExecuTorch Python runtime."""
