#!/usr/bin/env bash
# sbx: install what is missing, build, install, and start the daemon.
#
#   sudo ./setup.sh            # state in /var/lib/sbx, unix socket only
#   sudo SBX_LISTEN=127.0.0.1:8080 ./setup.sh   # also serve HTTP on TCP
#
# With systemd it installs and starts sbx.service; without, it starts the
# daemon in the background (log in $STATE/sbxd.log, pid in $STATE/sbxd.pid).
set -euo pipefail
cd "$(dirname "$0")"

if [ "$(id -u)" -ne 0 ]; then
  echo "setup: run as root (sbx creates namespaces and cgroups): sudo ./setup.sh" >&2
  exit 1
fi

STATE=${SBX_STATE:-/var/lib/sbx}
PREFIX=${PREFIX:-/usr/local}
LISTEN=${SBX_LISTEN:-}

scripts/install-deps.sh
make -j"$(nproc)"
make install PREFIX="$PREFIX"

args=(serve --state "$STATE")
[ -n "$LISTEN" ] && args+=(--listen "$LISTEN")

if [ -d /run/systemd/system ]; then
  cat > /etc/systemd/system/sbx.service <<UNIT
[Unit]
Description=sbx sandbox daemon
After=network.target

[Service]
ExecStart=$PREFIX/bin/sbx ${args[*]}
# Only the daemon: running sandboxes outlive a stop or restart (upgrades)
# and the next start re-adopts them; `sbx serve --kill-on-exit` ends them.
KillMode=process
Restart=on-failure

[Install]
WantedBy=multi-user.target
UNIT
  systemctl daemon-reload
  systemctl enable --now sbx.service
  systemctl restart sbx.service
else
  mkdir -p "$STATE"
  chmod 700 "$STATE"
  if [ -f "$STATE/sbxd.pid" ] && kill -0 "$(cat "$STATE/sbxd.pid")" 2>/dev/null; then
    kill "$(cat "$STATE/sbxd.pid")"
    for _ in $(seq 100); do kill -0 "$(cat "$STATE/sbxd.pid")" 2>/dev/null || break; sleep 0.1; done
  fi
  nohup "$PREFIX/bin/sbx" "${args[@]}" >>"$STATE/sbxd.log" 2>&1 </dev/null &
  echo $! > "$STATE/sbxd.pid"
fi

for _ in $(seq 100); do
  if SBX_STATE="$STATE" "$PREFIX/bin/sbx" ls >/dev/null 2>&1; then
    echo "sbx is running (state $STATE). Try: sbx run -- python3 -c 'print(1 + 1)'"
    exit 0
  fi
  sleep 0.1
done
echo "setup: the daemon did not come up; see $STATE/sbxd.log or journalctl -u sbx" >&2
exit 1
