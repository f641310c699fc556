"""The QNN SDK the gate uses: a user's real SDK, or the embedded x86 emulator SDK."""
from pytest_qnn_genai.sdk.loader import QnnSdk, SdkError, activate, require_active, resolve_sdk

__all__ = ["QnnSdk", "SdkError", "activate", "require_active", "resolve_sdk"]
