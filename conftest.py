"""Repository conftest. The plugin itself loads through its ``pytest11`` entry point (installed by
``make install``); the plugin's own tests use pytest's ``pytester``."""

pytest_plugins = ["pytester"]
