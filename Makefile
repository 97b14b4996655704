# The README's two commands: `make demo` runs the main job, `make test` runs the tests.
# Both create .venv and install lakelog with everything it needs on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The status page's browser test drives Debian's headless Chromium through its chromedriver.
CHROMEDRIVER := /usr/bin/chromedriver
# The Spark cluster test keeps its Iceberg catalog on Debian's PostgreSQL 15, started by the test.
INITDB := /usr/lib/postgresql/15/bin/initdb
export SPARK_LOCAL_IP ?= 127.0.0.1
export PYTHONUNBUFFERED := 1

.PHONY: demo test test-unit proto bench clean

# PYTHONWARNINGS: setuptools' boxed notice on editable installs about folders named like the
# package (here they are the package) would greet every first run.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	PYTHONWARNINGS='ignore:Editable installation' $(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m lakelog demo

test: $(STAMP) $(CHROMEDRIVER) $(INITDB)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# The unit tier alone: no sockets, no processes, no browser or PostgreSQL needed; seconds.
test-unit: $(STAMP)
	$(BIN)/python -m pytest tests/unit -q $(PYTEST_ARGS)

# Only when missing (a file target): installs Debian's chromium and chromium-driver, needs root.
$(CHROMEDRIVER):
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver > /dev/null

# Only when missing: Debian's postgresql (its server binaries; the test runs its own on loopback), needs root.
$(INITDB):
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql > /dev/null

# Regenerate lakelog/rpc/*_pb2*.py from proto/.
proto: $(STAMP)
	$(BIN)/python -m grpc_tools.protoc -I proto --python_out=. --pyi_out=. --grpc_python_out=. proto/lakelog/rpc/lakelog_api.proto

bench: $(STAMP)
	$(BIN)/python -m bench.run

clean:
	rm -rf $(VENV) build *.egg-info
