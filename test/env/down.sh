#!/usr/bin/env bash
# Stops what up.sh started (stop.d/*.sh in reverse order). Never fails the run.
here="$(cd "$(dirname "$0")" && pwd)"
export AGENT_TEST_STATE="${AGENT_TEST_STATE:-$here/../../.test-env}"
for script in $(ls -r "$here"/stop.d/*.sh 2>/dev/null); do
  bash "$script" || echo "test env: $(basename "$script") failed" >&2
done
exit 0
