#!/usr/bin/env bash
# Brings up the real services the test suite uses, on loopback, installing Debian packages that are missing.
#   packages.d/*.txt  Debian packages needed (one per line, # comments)
#   start.d/*.sh      start scripts, run in name order; each records what it started under $AGENT_TEST_STATE
#   stop.d/*.sh       run by down.sh, in reverse order
# Services started here are stopped by down.sh; services that were already running are left alone.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export AGENT_TEST_STATE="${AGENT_TEST_STATE:-$here/../../.test-env}"
mkdir -p "$AGENT_TEST_STATE"

mapfile -t wanted < <(cat "$here"/packages.d/*.txt 2>/dev/null | sed 's/#.*//' | tr -s ' \t' '\n' | grep -v '^$' | sort -u)
missing=()
for p in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "test env: missing Debian packages (${missing[*]}); run the tests as root or install them" >&2
    exit 1
  fi
  echo "> test env: installing ${missing[*]}"
  # Packages must not start their system-wide services: tests run their own instances on loopback ports.
  policy=/usr/sbin/policy-rc.d
  had_policy=0; [ -e "$policy" ] && had_policy=1
  if [ $had_policy = 0 ]; then printf '#!/bin/sh\nexit 101\n' > "$policy"; chmod +x "$policy"; fi
  export DEBIAN_FRONTEND=noninteractive
  apt_opts=(-o DPkg::Lock::Timeout=600 -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)
  apt-get "${apt_opts[@]}" update -qq || true
  apt-get "${apt_opts[@]}" install -y -qq --no-install-recommends "${missing[@]}" >"$AGENT_TEST_STATE/apt.log" 2>&1 \
    || { tail -30 "$AGENT_TEST_STATE/apt.log" >&2; [ $had_policy = 0 ] && rm -f "$policy"; exit 1; }
  [ $had_policy = 0 ] && rm -f "$policy"
fi

for script in "$here"/start.d/*.sh; do
  [ -e "$script" ] || continue
  echo "> test env: $(basename "$script")"
  bash "$script"
done
