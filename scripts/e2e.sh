#!/usr/bin/env bash
# End-to-end tests of the real app: the tests in tests/e2e drive it through tauri-driver +
# WebKitWebDriver, under Xvfb inside a D-Bus session when there is no display. The driver's
# fixed port means one test at a time. Extra arguments filter the tests by name (nextest).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export PATH="$HOME/.cargo/bin:$PATH"
if [[ -z "${DISPLAY:-}" && -z "${COUNTERSIGN_E2E_INNER:-}" ]]; then
  # Same target set as `cargo nextest run --workspace`, so nothing is rebuilt after it.
  cargo build --workspace --all-targets
  export COUNTERSIGN_E2E_INNER=1
  exec dbus-run-session -- xvfb-run -a -s "-screen 0 1280x800x24" bash "$0" "$@"
fi
[[ -n "${COUNTERSIGN_E2E_INNER:-}" ]] || cargo build --workspace --all-targets
# nextest with the workspace's features (as `make unit` builds them), so nothing is rebuilt;
# `cargo test -p countersign-e2e` would resolve features for that package alone and rebuild
# zbus and others (measured: 1 min 45 s on two cores). --no-capture runs one test at a time.
# COUNTERSIGN_E2E_FILTER picks other tests (`make e2e-runs`).
cargo nextest run --workspace --no-capture --no-fail-fast \
  -E "${COUNTERSIGN_E2E_FILTER:-package(countersign-e2e) and (binary(app) | binary(desktop) | binary(gateway) | binary(faults))}" "$@"
