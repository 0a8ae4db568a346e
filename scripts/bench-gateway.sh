#!/usr/bin/env bash
# The gateway benchmark (BENCHMARKS.md, "Gateway: forwarding overhead"): installs the two
# third-party proxies it compares against, if they are missing, then runs
#   cargo bench -p countersign-core --bench gateway
# with their paths in COUNTERSIGN_BENCH_MCP_PROXY and COUNTERSIGN_BENCH_SUPERGATEWAY.
#
#   mcp-proxy (PyPI)     into target/bench-peers/venv (its own venv: it needs the Python SDK 1.x,
#                        the test peers' venv has 2.x)
#   supergateway (npm)   into target/bench-peers/npm
#
# Both live under target/ (ignored, never committed); CI installs neither. A proxy that cannot
# be installed is reported and its row says why; the other rows still run. The bench reads
# COUNTERSIGN_BENCH_ROWS, COUNTERSIGN_BENCH_CALLS and COUNTERSIGN_BENCH_NODELAY (see
# crates/core/benches/gateway.rs).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SCRATCH="$ROOT/target/bench-peers"
MCP_PROXY_VERSION="0.13.0"
# mcp-proxy 0.13.0 asks for mcp>=1.x; pinned so reruns measure the same code.
MCP_SDK_VERSION="1.30.0"
SUPERGATEWAY_VERSION="4.0.0"

step() { echo "bench-gateway: $*" >&2; }

install_mcp_proxy() {
  local venv="$SCRATCH/venv"
  if [[ "$("$venv/bin/mcp-proxy" --version 2>/dev/null)" == *"$MCP_PROXY_VERSION"* ]]; then
    step "mcp-proxy $MCP_PROXY_VERSION already in $venv"
    return 0
  fi
  step "installing mcp-proxy $MCP_PROXY_VERSION into $venv"
  mkdir -p "$SCRATCH"
  if ! "$venv/bin/python" -c 'import sys' 2>/dev/null; then
    rm -rf "$venv"
    "${PYTHON:-python3}" -m venv "$venv" || return 1
  fi
  "$venv/bin/python" -m pip install -q --disable-pip-version-check \
    "mcp-proxy==$MCP_PROXY_VERSION" "mcp==$MCP_SDK_VERSION" || return 1
  "$venv/bin/mcp-proxy" --version >/dev/null
}

install_supergateway() {
  local dir="$SCRATCH/npm"
  local installed="$dir/node_modules/supergateway/package.json"
  if [[ -f "$installed" ]] && grep -q "\"version\": \"$SUPERGATEWAY_VERSION\"" "$installed"; then
    step "supergateway $SUPERGATEWAY_VERSION already in $dir"
    return 0
  fi
  step "installing supergateway $SUPERGATEWAY_VERSION into $dir"
  mkdir -p "$dir"
  [[ -f "$dir/package.json" ]] || echo '{"private": true}' >"$dir/package.json"
  (cd "$dir" && npm install --no-audit --no-fund --loglevel=error \
    "supergateway@$SUPERGATEWAY_VERSION") || return 1
  [[ -x "$dir/node_modules/.bin/supergateway" ]]
}

if install_mcp_proxy; then
  export COUNTERSIGN_BENCH_MCP_PROXY="$SCRATCH/venv/bin/mcp-proxy"
else
  step "could not install mcp-proxy; its row will say so"
fi
if install_supergateway; then
  export COUNTERSIGN_BENCH_SUPERGATEWAY="$SCRATCH/npm/node_modules/.bin/supergateway"
else
  step "could not install supergateway; its row will say so"
fi
step "node $(node --version 2>/dev/null || echo missing), $("$SCRATCH/venv/bin/python" --version 2>/dev/null || echo 'python missing')"

cd "$ROOT"
step "at $(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet HEAD -- crates 2>/dev/null || echo ' with uncommitted changes in crates/'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
exec cargo bench -p countersign-core --bench gateway
