#!/usr/bin/env bash
# The .deb as a user gets it: builds it, checks its declared dependencies and contents,
# installs it with apt, starts the installed /usr/bin/countersign under Xvfb in a D-Bus
# session with a fresh home (so it writes the demo config and connects the bundled demo
# server), quits it with SIGTERM, and removes the package again.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
fail() { echo "package-test: FAIL: $*" >&2; exit 1; }
say() { echo "package-test: $*"; }
sudo=(); [[ $(id -u) == 0 ]] || sudo=(sudo)

deb="$(bash scripts/package.sh)"
say "built $deb ($(du -h "$deb" | cut -f1))"

depends="$(dpkg-deb -f "$deb" Depends)"
say "Depends: $depends"
for dep in libwebkit2gtk-4.1-0 libgtk-3-0 libayatana-appindicator3-1; do
  grep -q "\b$dep\b" <<<"$depends" || fail "Depends lacks $dep"
done
contents="$(dpkg-deb -c "$deb")"
for path in usr/bin/countersign usr/bin/countersign-demo-server usr/bin/countersign-bridge \
            usr/share/applications/Countersign.desktop; do
  grep -Eq " (\./)?$path\$" <<<"$contents" || fail "the package lacks /$path"
done

# A Countersign the person installed themselves is upgraded in place and left installed.
if dpkg-query -W -f='${Status}' countersign 2>/dev/null | grep -q "ok installed"; then
  say "countersign was already installed: it will be left installed"
else
  trap '"${sudo[@]}" apt-get remove -y -qq countersign >/dev/null 2>&1 || true' EXIT
fi
say "installing with apt"
"${sudo[@]}" apt-get install -y -qq -o Dpkg::Use-Pty=0 "$(realpath "$deb")" >/dev/null
[[ -x /usr/bin/countersign ]] || fail "/usr/bin/countersign is not installed"

home="$(mktemp -d)"
log="$home/countersign.log"
say "starting /usr/bin/countersign under Xvfb (HOME=$home)"
# The app's own pid is written first, so only this instance is stopped (not a Countersign the
# person is running).
HOME="$home" XDG_CONFIG_HOME="$home/.config" XDG_DATA_HOME="$home/.local/share" \
  dbus-run-session -- xvfb-run -a -s "-screen 0 1280x800x24" \
  sh -c 'echo $$ >"$0"; exec /usr/bin/countersign' "$home/pid" >"$log" 2>&1 &
runner=$!
for _ in $(seq 1 300); do
  grep -q 'server=demo state=Ready' "$log" && break
  kill -0 "$runner" 2>/dev/null || { cat "$log" >&2; fail "the app exited"; }
  sleep 0.1
done
grep -q 'server=demo state=Ready' "$log" || { cat "$log" >&2; fail "the demo session never became ready"; }
[[ -f "$home/.config/countersign/config.json" ]] || fail "no demo config was written"
grep -q '/usr/bin/countersign-demo-server' "$home/.config/countersign/config.json" \
  || fail "the demo config does not use the packaged demo server"
say "running; demo server connected"
kill -TERM "$(cat "$home/pid")" || fail "the countersign process is gone"
status=0; wait "$runner" || status=$?
[[ $status == 0 ]] || { cat "$log" >&2; fail "the app exited with $status on SIGTERM"; }
say "ok: installs, starts, connects its demo server, quits cleanly"
# Best effort: the desktop's document portal may have mounted a FUSE file system at
# $home/.cache/doc, which outlives the app for a moment.
fusermount -uz "$home/.cache/doc" 2>/dev/null || true
rm -rf "$home" 2>/dev/null || true
