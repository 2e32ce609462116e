#!/usr/bin/env bash
# Removes the stacks tests left (their services are labelled agent.test=1) and leaves the swarm if start.d initialised it.
state="$AGENT_TEST_STATE"
if [ "$(docker info --format '{{.Swarm.ControlAvailable}}' 2>/dev/null)" = true ]; then
  ids=$(docker service ls -q --filter label=agent.test=1 2>/dev/null); [ -n "$ids" ] && docker service rm $ids >/dev/null 2>&1
fi
if [ -f "$state/swarm-initialised" ]; then
  docker swarm leave --force >/dev/null 2>&1
  rm -f "$state/swarm-initialised"
fi
exit 0
