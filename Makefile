# pytest-qnn-genai: two commands do all the set-up on a fresh machine (Python 3.11, pip, gcc).
#   make gate   run the gate suites on the x86 HTP emulator (SoC SM8650 unless SOC=...)
#   make test   lint, then run the plugin's own tests and the suites
#   make unit   the fast tier only (seconds, no builds)
PYTHON ?= python3.11
VENV   ?= .venv
PY     := $(VENV)/bin/python
SOC    ?= SM8650
PYTEST_ARGS ?=
# make test: both cores. Builds (llama.py, QNN compiles) are single-threaded; the emulator A/B
# gate pairs calls in lockstep, so a build on the other worker does not sway it.
TEST_WORKERS ?= 2
STAMP  := $(VENV)/.installed

.PHONY: gate test unit lint install adb chromium nightly clean

$(PY):
	$(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml constraints.txt | $(PY)
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# The real adb client (Debian package) for the device-path tests against the loopback adb server.
adb:
	@command -v adb >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq adb >/dev/null; }

# Headless Chromium (Debian package) for the report page's browser test (summary.html from disk).
chromium:
	@command -v chromium >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; }

gate: install
	$(PY) -m pytest suites --soc $(SOC) $(PYTEST_ARGS)

# ruff and the import-linter layer contracts (pyproject.toml)
lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports

# the fast tier: no builds; both cores (pytest-xdist) keep it near half a minute
unit: install
	$(PY) -m pytest tests/unit -n 2 $(PYTEST_ARGS)

test: lint adb chromium
	@$(PY) -m pytest tests suites -n $(TEST_WORKERS) --soc $(SOC) $(PYTEST_ARGS); rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests (exit 5)" >&2; fi; exit $$rc

# Every suite with --nightly, the report into reports/<date>/ (trend over earlier nights, changes
# against the newest earlier night); the pytest-benchmark JSON goes next to it. The emulator A/B
# gate runs legacy:new and each case's committed variant pairs ar8:new and kv16:new.
REPORTS ?= reports
nightly: install
	@day=$$(date -u +%F); mkdir -p $(REPORTS)/$$day; \
	  $(PY) -m pytest suites --soc $(SOC) --nightly --qnn-report $(REPORTS) \
	    --qnn-ab legacy:new --qnn-ab ar8:new --qnn-ab kv16:new \
	    --benchmark-json $(REPORTS)/$$day/benchmark.json $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info
