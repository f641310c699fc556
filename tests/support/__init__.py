"""Test-support code for the plugin's own tests (loopback adb server, stand-in runner, ...)."""
