# Countersign: build and test entry points. A newcomer runs `make deps test`.
#   make deps         install system packages, test peers (npm, Python venv) and cargo-nextest
#   make test         unit + integration tests (nextest, else cargo test), then `make conformance`
#   make conformance  the MCP conformance suite against countersign-conformance-client
#   make smoke-peers  check that the test peers start and answer (quick, no Rust build)

SHELL := /bin/bash
.NOTPARALLEL:
.PHONY: deps test unit conformance smoke-peers

CONFORMANCE_PKG := countersign-conformance-client

deps:
	bash scripts/install-deps.sh

test: unit conformance

unit:
	@if cargo nextest --version >/dev/null 2>&1; then \
	  echo "cargo nextest run --workspace --no-fail-fast"; \
	  cargo nextest run --workspace --no-fail-fast; \
	else \
	  echo "cargo-nextest not found, using cargo test"; \
	  cargo test --workspace --no-fail-fast; \
	fi

conformance:
	cargo build -p $(CONFORMANCE_PKG)
	bash scripts/conformance.sh

smoke-peers:
	bash scripts/smoke-peers.sh
