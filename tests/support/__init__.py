"""Test-support code for the plugin's own tests (loopback adb server, stand-in runner, ...)."""

# what pytest-xdist sets in a worker's environment (inherited by the subprocesses it starts): an
# inner pytest run that kept ``PYTEST_XDIST_WORKER=gw1`` would take itself for worker 1 of 2
XDIST_ENV = ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID")
