#!/usr/bin/env bash
# Checks that each test peer in tests/peers starts, answers `initialize`, lists its tools and
# does its one trick, using tests/peers/smoke-client.mjs (TypeScript SDK client). Quick (~10 s),
# no Rust build. Run scripts/install-deps.sh first.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PEERS="$ROOT/tests/peers"
cd "$PEERS"

if [[ ! -d node_modules || ! -x .venv/bin/python ]]; then
  echo "smoke-peers: peers not installed; run scripts/install-deps.sh" >&2
  exit 2
fi

passed=0
failed=0
LOG="$(mktemp -d)"
HTTP_PID=""
cleanup() {
  if [[ -n "$HTTP_PID" ]]; then kill "$HTTP_PID" 2>/dev/null || true; fi
  rm -rf "$LOG"
}
trap cleanup EXIT

# check NAME EXPECTED-REGEX -- smoke-client args...
check() {
  local name="$1" expect="$2"
  shift 3
  if timeout 60 node smoke-client.mjs "$@" >"$LOG/out" 2>"$LOG/err" && grep -Eq "$expect" "$LOG/out"; then
    echo "ok   $name"
    passed=$((passed + 1))
  else
    echo "FAIL $name (wanted /$expect/)"
    sed 's/^/     out| /' "$LOG/out"
    tail -n 20 "$LOG/err" | sed 's/^/     err| /'
    failed=$((failed + 1))
  fi
}

check "ts-elicit-server stdio: confirm_action accept" \
  '"text":"\{\\"action\\":\\"accept\\",\\"content\\":\{\\"confirm\\":true\}\}"' -- \
  --call confirm_action --args '{"action":"smoke"}' -- node ts-elicit-server.mjs

check "ts-elicit-server stdio: confirm_action decline" \
  '"text":"\{\\"action\\":\\"decline\\"\}"' -- \
  --call confirm_action --args '{"action":"smoke"}' --answer decline -- node ts-elicit-server.mjs

check "ts-elicit-server stdio: ask_with_timeout times out, late answer counted" \
  '"tool":"late_answers".*late_answers\\":1' -- \
  --call ask_with_timeout --args '{"timeout_ms":300}' --answer late:500 --pause 1000 \
  --then late_answers -- node ts-elicit-server.mjs
if grep -q 'sent notifications/cancelled {"requestId":0' "$LOG/err"; then
  echo "ok   ts-elicit-server stdio: cancellation sent with requestId 0"
  passed=$((passed + 1))
else
  echo "FAIL ts-elicit-server stdio: no notifications/cancelled with requestId 0 on stderr"
  failed=$((failed + 1))
fi

node ts-elicit-server.mjs --http 0 2>"$LOG/http-err" &
HTTP_PID=$!
url=""
for _ in $(seq 1 100); do
  url="$(grep -o 'http://127.0.0.1:[0-9]*/mcp' "$LOG/http-err" || true)"
  [[ -n "$url" ]] && break
  sleep 0.1
done
if [[ -n "$url" ]]; then
  check "ts-elicit-server http: confirm_action accept" \
    '"text":"\{\\"action\\":\\"accept\\",\\"content\\":\{\\"confirm\\":true\}\}"' -- \
    --url "$url" --call confirm_action --args '{"action":"smoke"}'
  check "ts-elicit-server http: ask_with_timeout times out" '"text":"timed out"' -- \
    --url "$url" --call ask_with_timeout --args '{"timeout_ms":300}' --answer ignore
else
  echo "FAIL ts-elicit-server http: never printed its URL"
  cat "$LOG/http-err"
  failed=$((failed + 1))
fi

check "py_elicit_server stdio: ask_profile accept" \
  '\\"action\\": \\"accept\\", \\"data\\": \{\\"name\\": \\"smoke\\", \\"subscribe\\": false\}' -- \
  --call ask_profile -- .venv/bin/python py_elicit_server.py
check "py_elicit_server stdio: ask_profile cancel" '\\"action\\": \\"cancel\\"' -- \
  --call ask_profile --answer cancel -- .venv/bin/python py_elicit_server.py

check "server-everything stdio: initialize + trigger-elicitation-request listed" \
  '"trigger-elicitation-request"' -- -- node node_modules/@modelcontextprotocol/server-everything/dist/index.js

echo "smoke-peers: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
