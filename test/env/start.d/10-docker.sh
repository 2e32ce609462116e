#!/usr/bin/env bash
# Starts dockerd when no engine answers, then builds the local test image without any registry.
set -euo pipefail
state="$AGENT_TEST_STATE"
# A machine restored from a snapshot, or a dockerd that was killed, leaves its pid files behind; dockerd then
# refuses to start. They are removed only when no process of that name holds the pid.
clear_stale_pid() {
  local file="$1" name="$2" pid
  [ -f "$file" ] || return 0
  pid="$(cat "$file" 2>/dev/null || true)"
  if [ -n "$pid" ] && [ "$(ps -p "$pid" -o comm= 2>/dev/null)" = "$name" ]; then return 0; fi
  echo "> test env: removing stale $file (pid ${pid:-none} is not $name)"
  rm -f "$file"
}
if ! docker info >/dev/null 2>&1; then
  clear_stale_pid /var/run/docker.pid dockerd
  clear_stale_pid /var/run/docker/containerd/containerd.pid containerd
  dockerd --host unix:///var/run/docker.sock >"$state/dockerd.log" 2>&1 &
  echo $! >"$state/dockerd.pid"
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
  docker info >/dev/null 2>&1 || { echo "dockerd did not start:" >&2; tail -20 "$state/dockerd.log" >&2; exit 1; }
fi
# agent-test/busybox: busybox-static with its applets linked, the base of every test container.
if ! docker image inspect agent-test/busybox:latest >/dev/null 2>&1; then
  root="$(mktemp -d)"
  mkdir -p "$root/bin" "$root/tmp" "$root/etc" "$root/www" "$root/var/log"
  cp /bin/busybox "$root/bin/busybox"
  for applet in $("$root/bin/busybox" --list); do [ "$applet" = busybox ] || ln -sf busybox "$root/bin/$applet"; done
  echo 'root:x:0:0:root:/root:/bin/sh' >"$root/etc/passwd"
  echo 'root:x:0:' >"$root/etc/group"
  echo 'hello from agent-test/busybox' >"$root/www/index.html"
  tar -C "$root" -c . | docker import -c 'ENV PATH=/bin' -c 'CMD ["sh"]' - agent-test/busybox:latest >/dev/null
  rm -rf "$root"
fi
