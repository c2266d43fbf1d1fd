#!/usr/bin/env bash
# Makes sure redis-server is on PATH: the tests start their own nodes from
# it. Installs Debian's package when missing and we may (root + apt-get).
set -euo pipefail
if command -v redis-server >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "ensure-redis: installing redis-server from Debian's packages" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq redis-server >/dev/null
  # The package starts a system instance on 6379; the tests do not use it.
  (service redis-server stop || systemctl stop redis-server || true) >/dev/null 2>&1
  exit 0
fi
echo "ensure-redis: redis-server not found; install it (apt-get install redis-server, brew install redis) or set REDIS_SERVER" >&2
exit 1
