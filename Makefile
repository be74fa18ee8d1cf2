# Two commands set everything up on a fresh machine:
#   make demo   create .venv, install nbinspect, summarise a built-in model, open the quickstart
#   make test   create/update .venv with the test extras, run the whole suite
#   make lint   the quality gate alone (ruff format/lint, mypy); make fix formats
#   make js     build the widget front-end (js/ -> nbinspect/static/widget.js) with npm
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# torch is pinned to the CPU wheel here; a bare `pip install torch` would pull CUDA.
TORCH := torch==2.13.0

# The widget bundle: npm ci when the lockfile changes, esbuild when a source changes.
JS_BUNDLE := nbinspect/static/widget.js
JS_DEPS := js/node_modules/.package-lock.json

.PHONY: demo test lint fix venv js notebooks clean

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

fix: $(VENV)/.installed-test
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

test: lint $(VENV)/.installed-test $(JS_BUNDLE)
	cd js && npm test
	$(BIN)/python -m pytest --nbval --nbval-current-env tests notebooks

# Re-run the tutorials in place after changing them (outputs are committed, widget state not).
notebooks: $(VENV)/.installed-test $(JS_BUNDLE)
	$(BIN)/python notebooks/execute.py

clean:
	rm -rf $(VENV) .pytest_cache js/node_modules nbinspect/static
