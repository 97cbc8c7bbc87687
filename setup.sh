#!/usr/bin/env bash
# sbx: install what is missing, build, install, and start the daemon.
#
# As root:
#   ./setup.sh                             # state in /var/lib/sbx, unix socket only
#   SBX_LISTEN=127.0.0.1:8080 ./setup.sh   # also serve HTTP on TCP
#
# With systemd it installs and starts sbx-sandboxes.service and sbx.service
# (share/systemd); without, it starts the daemon in the background (log in
# $STATE/sbxd.log, pid in $STATE/sbxd.pid).
set -euo pipefail
cd "$(dirname "$0")"

if [ "$(id -u)" -ne 0 ]; then
  echo "setup: run as root (sbx creates namespaces and cgroups): ./setup.sh in a root shell" >&2
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
  # Two units (share/systemd): sbx-sandboxes.service holds the cgroup
  # subtree sandboxes run in, sbx.service is the daemon, free to restart
  # while they run (docs/architecture.md, Cgroups).
  # On v1 and hybrid hosts sandboxes stay in the daemon unit's systemd
  # cgroup: only KillMode=process leaves them running across a restart.
  killmode=mixed
  [ -f /sys/fs/cgroup/cgroup.controllers ] || killmode=process
  for unit in sbx-sandboxes.service sbx.service; do
    sed -e "s|@PREFIX@|$PREFIX|g" -e "s|@STATE@|$STATE|g" -e "s|@ARGS@|${args[*]:3}|g" \
      -e "s|@KILLMODE@|$killmode|g" "share/systemd/$unit" > "/etc/systemd/system/$unit"
  done
  systemctl daemon-reload
  systemctl enable --now sbx-sandboxes.service sbx.service
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
