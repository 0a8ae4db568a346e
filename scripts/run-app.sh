#!/usr/bin/env bash
# Starts the built app. With no display (a server, CI) it runs under Xvfb inside a D-Bus
# session, so it still starts; `import -window root shot.png` then takes a screenshot.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
APP="${CARGO_TARGET_DIR:-$ROOT/target}/debug/countersign"
if [[ -n "${DISPLAY:-}" || -n "${WAYLAND_DISPLAY:-}" ]]; then
  exec "$APP" "$@"
fi
echo "run-app: no display; starting under Xvfb (screen 1280x800) in a D-Bus session" >&2
exec dbus-run-session -- xvfb-run -a -s "-screen 0 1280x800x24" "$APP" "$@"
