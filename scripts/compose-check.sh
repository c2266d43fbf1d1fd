#!/usr/bin/env bash
# Brings up docker-compose.yml's five nodes (with the image built locally
# from the host's redis-server unless REDLOCK_REDIS_IMAGE names another),
# runs the demo and inspect against them, and takes them down again.
set -euo pipefail
cd "$(dirname "$0")/.."
export REDLOCK_REDIS_IMAGE="${REDLOCK_REDIS_IMAGE:-redlock-redis:local}"
if ! docker image inspect "$REDLOCK_REDIS_IMAGE" >/dev/null 2>&1; then
  integration/scripts/build-image.sh "$REDLOCK_REDIS_IMAGE"
fi
COMPOSE="docker-compose"
command -v docker-compose >/dev/null 2>&1 || COMPOSE="docker compose"
trap '$COMPOSE down -v >/dev/null 2>&1 || true' EXIT
$COMPOSE up -d
nodes=redis://127.0.0.1:7001,redis://127.0.0.1:7002,redis://127.0.0.1:7003,redis://127.0.0.1:7004,redis://127.0.0.1:7005
for i in $(seq 1 50); do
  if (cd cmd/redlock && go run . inspect 'redlock:*' --nodes "$nodes" >/dev/null 2>&1); then break; fi
  sleep 0.2
done
(cd cmd/redlock && go run . demo --nodes "$nodes" --duration 3s --ttl 2s)
# A node call that hit its node timeout has an unknown outcome; if its
# command was still in flight (docker-proxy can hold it), the clean-up sent
# after the timeout can arrive first and leave a minority key that expires
# with its TTL (docs/usage.md: "What remains"). Such a key is reported, and the
# check fails only if something is still there once the demo's TTL (2s)
# has passed: a key without TTL or one that outlives it.
if ! (cd cmd/redlock && go run . inspect 'redlock:*' --nodes "$nodes"); then
  echo "compose-check: leftover right after the demo (above); checking again once its TTL has passed"
  sleep 2.5
  (cd cmd/redlock && go run . inspect 'redlock:*' --nodes "$nodes")
fi
echo "compose-check: ok"
