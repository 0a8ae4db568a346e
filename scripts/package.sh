#!/usr/bin/env bash
# Builds Countersign's .deb with the Tauri bundler (release build; the demo server is packed
# beside the app as /usr/bin/countersign-demo-server). Prints the package's path.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export PATH="$HOME/.cargo/bin:$PATH"
npm run --prefix ui build >&2
cargo build --release -p countersign-demo-server -p countersign-bridge >&2
# The CLI finds src-tauri/tauri.conf.json itself; --ci: no prompts.
ui/node_modules/.bin/tauri build --ci --bundles deb >&2
ls -t "${CARGO_TARGET_DIR:-$ROOT/target}"/release/bundle/deb/Countersign_*_amd64.deb | head -n 1
