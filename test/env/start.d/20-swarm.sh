#!/usr/bin/env bash
# The swarm suites (plugins/cluster, swarm deployments) need this engine to manage a swarm: a single-node one is
# initialised when the engine is in none, and recorded so that stop.d/20-swarm.sh leaves it again. A swarm that was
# already there is left as it is.
set -euo pipefail
state="$AGENT_TEST_STATE"
if [ "$(docker info --format '{{.Swarm.LocalNodeState}}')" = inactive ]; then
  docker swarm init --advertise-addr 127.0.0.1 >/dev/null
  touch "$state/swarm-initialised"
fi
