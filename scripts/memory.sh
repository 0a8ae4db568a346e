#!/usr/bin/env bash
# What Countersign weighs while it waits: the proportional set size (PSS, shared pages split
# between the processes that map them) of each of the app's processes, idle with the window
# open, then closed to the tray (and a minute later), then opened again, then started in the
# tray as start at login does (and a minute later). Uses the release build when there is one
# (`make package` builds it), else the debug build, and says which. Runs under Xvfb inside a
# D-Bus session when there is no display; the tray host is the tests' desktop double. Also
# measures the window left open behind another program's. Prints figures, asserts nothing.
# Needs root: the app keeps its memory from other processes, the user's own included
# (`launch::keep_memory_private`), so only root reads its PSS.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export PATH="$HOME/.cargo/bin:$PATH"
if [[ $(id -u) != 0 ]]; then
  echo "make memory: run it as root (sudo): the app's memory map is root's to read" >&2
  exit 1
fi
if [[ -z "${COUNTERSIGN_MEMORY_INNER:-}" ]]; then
  cargo build -p countersign-e2e --bins
  [[ -x target/release/countersign ]] || cargo build -p countersign -p countersign-demo-server
  export COUNTERSIGN_MEMORY_INNER=1
  exec dbus-run-session -- xvfb-run -a -s "-screen 0 1280x800x24" bash "$0" "$@"
fi

profile=debug
[[ -x target/release/countersign && -x target/release/countersign-demo-server ]] && profile=release
dir="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$dir"' EXIT
cat > "$dir/config.json" <<EOF
{"mcpServers": {"demo": {"command": "$ROOT/target/$profile/countersign-demo-server"}}}
EOF
target/debug/desktop-double --tray "$dir/tray.jsonl" > "$dir/double.out" &
until grep -q ready "$dir/double.out" 2>/dev/null; do sleep 0.1; done

COUNTERSIGN_CONFIG="$dir/config.json" XDG_DATA_HOME="$dir/data" XDG_CONFIG_HOME="$dir/config" \
  HOME="$dir/home" "target/$profile/countersign" 2> "$dir/app.log" &
app=$!

# PSS in KiB of one process.
pss() { awk '/^Pss:/ {print $2}' "/proc/$1/smaps_rollup" 2>/dev/null || echo 0; }

# One line per process of the app (itself and its children but the MCP server), then the sum.
measure() {
  local label=$1 total=0 line
  printf '\n%s\n' "$label"
  printf '  %-24s %8s\n' process "PSS MiB"
  for pid in $app $(pgrep -P "$app"); do
    name=$(cat "/proc/$pid/comm" 2>/dev/null) || continue
    [[ $name == countersign-dem* ]] && continue
    kib=$(pss "$pid")
    total=$((total + kib))
    printf '  %-24s %8.1f\n' "$name" "$(bc -l <<< "$kib / 1024")"
  done
  printf '  %-24s %8.1f\n' "all of the app" "$(bc -l <<< "$total / 1024")"
  for pid in $(pgrep -P "$app"); do
    name=$(cat "/proc/$pid/comm" 2>/dev/null) || continue
    [[ $name == countersign-dem* ]] || continue
    printf '  (the demo MCP server, not counted: %.1f MiB)\n' "$(bc -l <<< "$(pss "$pid") / 1024")"
  done
}

# What the app itself holds while it waits: its own heap and stacks (anonymous, private), the
# libraries' pages it touched (file-backed), and the largest mappings.
holdings() {
  awk '/^(Pss_Anon|Pss_File|Pss_Shmem|Private_Dirty|Private_Clean|Rss):/ {printf "  %-16s %8.1f MiB\n", $1, $2 / 1024}' "/proc/$app/smaps_rollup"
  echo "  largest file mappings of the app by PSS:"
  awk '/^[0-9a-f]+-[0-9a-f]+ / {file = $6} /^Pss:/ {if (file != "") pss[file] += $2}
       END {for (f in pss) printf "%8.1f MiB  %s\n", pss[f] / 1024, f}' "/proc/$app/smaps" \
    | sort -rn | awk 'NR <= 6 {print "  " $0}'  # reads to the end: no SIGPIPE for pipefail
}

echo "Countersign's memory ($profile build), idle with the demo server; settle ${SETTLE:=10} s each"
sleep "$SETTLE"
measure "window open"
# The person switches to another program (its window takes the focus) and leaves this one
# behind it: after 30 s the app gives back the code it is not running (`released.rs`).
exec 3> >(target/debug/other-program > "$dir/other.out")
for _ in $(seq 150); do grep -q focused "$dir/other.out" 2>/dev/null && break; sleep 0.1; done
grep -q focused "$dir/other.out" || { echo "other-program took no focus" >&2; exit 1; }
sleep "${BEHIND:=40}"
measure "window open, behind another program's, ${BEHIND} s later"
holdings
sleep "${LATER:=60}"
measure "still behind, ${LATER} s later"
exec 3>&-
target/debug/close-window Countersign > /dev/null
sleep "$SETTLE"
measure "closed to the tray"
holdings
# What the tray runs comes back into memory as it runs (the rest was given back, `idle_memory`).
sleep "${LATER:=60}"
measure "still in the tray, ${LATER} s later"
# A second launch brings the window forward, as the tray's Open item does.
COUNTERSIGN_CONFIG="$dir/config.json" XDG_DATA_HOME="$dir/data" XDG_CONFIG_HOME="$dir/config" \
  HOME="$dir/home" "target/$profile/countersign" 2>> "$dir/second.log" || true
sleep "$SETTLE"
measure "opened again"
grep -o 'window made.*' "$dir/app.log" | tail -1 | sed 's/^/  again: /' || true
kill -TERM "$app"
wait "$app" 2>/dev/null || true

# As start at login starts it: in the tray, no window made until the person opens one.
COUNTERSIGN_CONFIG="$dir/config.json" XDG_DATA_HOME="$dir/data" XDG_CONFIG_HOME="$dir/config" \
  HOME="$dir/home" "target/$profile/countersign" --in-tray 2> "$dir/in-tray.log" &
app=$!
sleep "$SETTLE"
measure "started in the tray (start at login), never opened"
holdings
sleep "$LATER"
measure "still in the tray, ${LATER} s later"
kill -TERM "$app"
wait "$app" 2>/dev/null || true
