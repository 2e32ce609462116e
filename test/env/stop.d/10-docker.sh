#!/usr/bin/env bash
# Stops dockerd if up.sh started it (containers left by tests are removed first).
state="$AGENT_TEST_STATE"
[ -f "$state/dockerd.pid" ] || exit 0
pid=$(cat "$state/dockerd.pid")
ids=$(docker ps -aq --filter label=agent.test=1 2>/dev/null); [ -n "$ids" ] && docker rm -f $ids >/dev/null 2>&1
kill "$pid" 2>/dev/null
for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
rm -f "$state/dockerd.pid"
