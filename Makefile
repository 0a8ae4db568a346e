# Countersign: build and test entry points. A newcomer runs `make deps run` or `make deps test`.
#   make deps         install system packages, test peers (npm, Python venv), UI packages,
#                     cargo-nextest and tauri-driver (only what is missing)
#   make run          build the UI, the demo server and the app, and start the app (under Xvfb
#                     when there is no display)
#   make test         UI build, Rust tests (nextest), UI tests in Chromium, conformance suite,
#                     end-to-end tests of the real app, the .deb (packed from the tests'
#                     debug build) installed and started
#   make package      the .deb (Tauri bundler): target/release/bundle/deb/Countersign_*.deb
#   make package-test build the release .deb, check it, install it with apt, start it, remove
#                     it (PACKAGE_PROFILE=debug packs the debug build, as `make test` does)
#   make screenshot   docs/ask-dialog.png, docs/approval-dialog.png and docs/sign-in.png from the real app
#   make conformance  the MCP conformance suite against countersign-conformance-client
#   make smoke-peers  check that the test peers start and answer (quick, no Rust build)
#   make soak         the backend over a long day: 100,000 questions (RSS slope), 10 idle servers,
#                     1,000 gateway sessions (tasks, files, children left); prints figures
#   make faults       the fault matrix as one table: servers breaking while a question is open
#                     (core), and the real app killed mid-answer, the disk full, its web process
#                     killed, the desktop's services gone, the config edited, an agent killed
#                     (e2e); `make test` runs the same tests and prints the same table
#   make fuzz         every parser of untrusted input against FUZZ_CASES generated inputs each
#                     (default 20000; the test command runs 256 each and the committed corpus)
#   make e2e-runs     runs made in the real app RUNS times in a row (200) without a retry, each
#                     reaching the app once, short-lived dialogs seen from the page
#   make memory       the app's processes by PSS: window open (in front, then behind another
#                     program's), closed to the tray, opened again
#   make bench-gateway the gateway's forwarding overhead beside mcp-proxy and supergateway
#                     (installs those two under target/bench-peers; prints figures, asserts none)

SHELL := /bin/bash
.NOTPARALLEL:
.PHONY: deps run ui ui-test test unit conformance e2e package package-test screenshot smoke-peers bench-gateway interop fuzz soak faults fault-table e2e-runs memory


deps:
	bash scripts/install-deps.sh

# The app embeds ui/dist at compile time, so the UI is built before any cargo build.
ui:
	npm run --prefix ui build

run: ui
	cargo build -p countersign-demo-server -p countersign-bridge -p countersign
	bash scripts/run-app.sh

# Each step's time is printed as it ends and in a table at the end.
# The unit and e2e steps leave the fault matrix's rows, printed as one table at the end.
test:
	@mkdir -p target && rm -f $(FAULT_ROWS)
	@COUNTERSIGN_FAULT_ROWS=$(FAULT_ROWS) PACKAGE_PROFILE=debug bash scripts/steps.sh ui unit ui-test conformance e2e package-test fault-table

# The real app in a real webview (tauri-driver + WebKitWebDriver), under Xvfb when headless.
e2e: ui
	bash scripts/e2e.sh

package: ui
	bash scripts/package.sh

# PACKAGE_PROFILE=debug: packed from the debug build the other steps made, not a release build of over 10 minutes.
package-test: ui
	COUNTERSIGN_PACKAGE_PROFILE=$(or $(PACKAGE_PROFILE),release) bash scripts/package-test.sh

# The README's screenshot of the ask dialog, taken from the real app.
screenshot: ui
	COUNTERSIGN_SCREENSHOT_OUT=$(CURDIR)/docs/ask-dialog.png bash scripts/e2e.sh e2e_screenshot
	COUNTERSIGN_APPROVAL_SCREENSHOT_OUT=$(CURDIR)/docs/approval-dialog.png bash scripts/e2e.sh e2e_gateway_allow_once
	COUNTERSIGN_SIGN_IN_SHOT=$(CURDIR)/docs/sign-in.png bash scripts/e2e.sh e2e_signing_in_to_an_oauth_server

ui-test: ui
	npm test --prefix ui

# The e2e package is built (its features are unified with the rest) but its tests run in
# the e2e step, against the real app.
unit:
	@if cargo nextest --version >/dev/null 2>&1; then \
	  echo "cargo nextest run --workspace -E 'not package(countersign-e2e)' --no-fail-fast"; \
	  cargo nextest run --workspace -E 'not package(countersign-e2e)' --no-fail-fast; \
	else \
	  echo "cargo-nextest not found, using cargo test"; \
	  cargo test --workspace --exclude countersign-e2e --no-fail-fast; \
	fi
	@# The tests regenerate the UI's IPC types from the Rust types; stale ones must not pass.
	@if [ -n "$$(git status --porcelain -- ui/src/bindings)" ]; then \
	  git status --short -- ui/src/bindings; \
	  echo "ui/src/bindings changed when regenerated from the Rust types: commit them"; exit 1; \
	fi

# The whole workspace, as the unit and e2e steps build it: one feature set, so each step
# reuses the others' build instead of rebuilding the dependencies with other features.
conformance:
	cargo build --workspace --all-targets
	bash scripts/conformance.sh

smoke-peers:
	bash scripts/smoke-peers.sh

# The interop matrix (peers × revisions × transports, app and gateway), printed as a table.
# The unit step runs the same test.
interop:
	cargo nextest run --workspace -E 'binary(interop)' --no-capture

bench-gateway:
	bash scripts/bench-gateway.sh

# Property-based fuzzing (proptest) of the schema parser and validator, the agents' JSONC and
# TOML readers, the raw stdout and SSE readers, the gateway's response rewriting and the
# bridge's line and header reading. A failure is shrunk, saved under proptest-regressions/
# (commit it: it is replayed first on every run) and belongs in the corpus under fuzz/.
fuzz:
	PROPTEST_CASES=$${FUZZ_CASES:-20000} cargo nextest run --workspace -E 'test(/fuzz_/)' --no-fail-fast

# Soak figures for BENCHMARKS.md (minutes; not part of the test command).
soak:
	cargo bench -p countersign-core --bench soak

memory:
	bash scripts/memory.sh

# The rows come from the core's matrix and from the real app's fault tests; one table at the end.
FAULT_ROWS := $(CURDIR)/target/fault-rows.jsonl
E2E_FAULTS := e2e_the_app_killed e2e_a_full_disk e2e_when_the_pages_process_dies \
	e2e_a_notification_server_that_hangs e2e_without_a_notification_daemon e2e_without_a_session_bus \
	e2e_editing_the_config_file \
	e2e_gateway_an_agent_killed_mid_approval
faults: ui
	@mkdir -p target && rm -f $(FAULT_ROWS)
	COUNTERSIGN_FAULT_ROWS=$(FAULT_ROWS) cargo nextest run --workspace -E 'package(countersign-core) and binary(faults)'
	COUNTERSIGN_FAULT_ROWS=$(FAULT_ROWS) bash scripts/e2e.sh $(E2E_FAULTS)
	@node scripts/fault-table.mjs $(FAULT_ROWS)

fault-table:
	@node scripts/fault-table.mjs $(FAULT_ROWS)

# Runs in a row without a retry (RUNS=N each of three kinds, 200 by default): minutes.
e2e-runs: ui
	COUNTERSIGN_E2E_FILTER='package(countersign-e2e) and binary(runs)' bash scripts/e2e.sh
