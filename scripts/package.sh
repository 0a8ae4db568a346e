#!/usr/bin/env bash
# Builds Countersign's .deb with the Tauri bundler (release build; the demo server and the
# bridge are packed beside the app in /usr/bin). Prints the package's path.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export PATH="$HOME/.cargo/bin:$PATH"
npm run --prefix ui build >&2
# COUNTERSIGN_PACKAGE_PROFILE=debug packs the debug build the tests make instead (the test
# command's package test: a release build from scratch takes over 10 minutes on two cores, and the
# package's makeup, dependencies, install and start are the same either way).
profile="${COUNTERSIGN_PACKAGE_PROFILE:-release}"
case "$profile" in
  release)
    # One cargo build for the three programs the package holds, so the dependencies they share
    # are built once with one feature set (a build of the helpers first, then `tauri build`,
    # built tokio, rmcp, reqwest and the rest twice: 4.5 min more on two cores).
    cargo build --release -p countersign -p countersign-demo-server -p countersign-bridge \
      --features countersign/custom-protocol >&2
    bundle=(); dir=release ;;
  debug)
    # The workspace's own target set and features, as the unit and e2e steps build it, so only
    # what `custom-protocol` changes (Tauri and the app, half a minute) is built again.
    cargo build --workspace --all-targets --features countersign/custom-protocol >&2
    # The helpers beside the app come from the debug build too (tauri.conf.json names the
    # release ones).
    files='{"/usr/bin/countersign-demo-server": "../target/debug/countersign-demo-server",
            "/usr/bin/countersign-bridge": "../target/debug/countersign-bridge"}'
    bundle=(--debug --config "{\"bundle\": {\"linux\": {\"deb\": {\"files\": $files}}}}"); dir=debug ;;
  *) echo "COUNTERSIGN_PACKAGE_PROFILE is release or debug, not $profile" >&2; exit 2 ;;
esac
# `custom-protocol` serves the embedded UI (what `tauri build` turns on); `tauri bundle` then
# packs what is built.
# The config lives at the top level (tauri.conf.json) and src-tauri/tauri.conf.json links to
# it, so cargo and the bundler read one file; the CLI, run from here, would take the top level
# for the app's folder (and find the workspace's Cargo.toml there), so it is told where the app
# and the UI are. Paths inside the config are relative to src-tauri. --ci: no prompts.
TAURI_APP_PATH="$ROOT/src-tauri" TAURI_FRONTEND_PATH="$ROOT/ui" \
  ui/node_modules/.bin/tauri bundle --ci --bundles deb "${bundle[@]}" >&2
ls -t "${CARGO_TARGET_DIR:-$ROOT/target}"/$dir/bundle/deb/Countersign_*_amd64.deb | head -n 1
