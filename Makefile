# Everything the project needs is installed by these targets: a venv with the pinned
# IREE wheels, this package in editable mode, and the cffi-built native libraries.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
INSTALLED := $(VENV)/.installed
NATIVE_STAMP := build/.native
NATIVE_SRC := $(wildcard native/*.c native/*.h native/*.py)

.PHONY: all install native demo test conformance bench clean

all: install

$(INSTALLED): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check --upgrade pip
	$(PY) -m pip install -q --disable-pip-version-check -e '.[test,bench]'
	touch $@

$(NATIVE_STAMP): $(INSTALLED) $(NATIVE_SRC)
	@mkdir -p build
	for b in native/build_*.py; do $(PY) $$b || exit 1; done
	touch $@

install: $(INSTALLED) $(NATIVE_STAMP)

native: $(NATIVE_STAMP)

demo: install
	$(PY) samples/demo.py

# The tests and the ONNX node cases in one run, in parallel across the machine's cores
# (pytest-xdist; worksteal: a worker that runs out takes tests from the other, and the
# real-network tests, a minute or two each, start first: tests/conftest.py).
test: install
	$(PY) -m pytest tests -n auto --dist worksteal --timeout=600

# Every ONNX node case the onnx wheel ships, on npu-sim and on stock: build/conformance/table.md
conformance: install
	$(PY) -m pytest tests/conformance --conformance=all -n auto --timeout=600

bench: install
	$(PY) -m tests.bench.run_bench

clean:
	rm -rf build native/*.so native/__pycache__
