# Two commands set everything up on a fresh machine:
#   make demo   create .venv, install nbinspect, summarise a built-in example model
#   make test   create/update .venv with the test extras, run the whole suite
#   make js     build the widget front-end (js/ -> nbinspect/static/widget.js) with npm
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# torch is pinned to the CPU wheel here; a bare `pip install torch` would pull CUDA.
TORCH := torch==2.13.0

# The widget bundle: npm ci when the lockfile changes, esbuild when a source changes.
JS_BUNDLE := nbinspect/static/widget.js
JS_DEPS := js/node_modules/.package-lock.json

.PHONY: demo test venv js notebooks clean

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

demo: $(VENV)/.installed $(JS_BUNDLE)
	$(BIN)/nbinspect demo

test: $(VENV)/.installed-test $(JS_BUNDLE)
	cd js && npm test
	$(BIN)/python -m pytest --nbval --nbval-current-env tests notebooks

# Re-run the tutorials in place after changing them (outputs are committed, widget state not).
notebooks: $(VENV)/.installed-test $(JS_BUNDLE)
	$(BIN)/python notebooks/execute.py

clean:
	rm -rf $(VENV) .pytest_cache js/node_modules nbinspect/static
