#!/usr/bin/env bash
# Makes sure PostgreSQL's server binaries are installed for the fencing
# example (examples/stock), whose test starts its own server on a free
# port. Installs Debian's package when missing and we may (root + apt-get).
set -euo pipefail
if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "ensure-postgres: installing postgresql from Debian's packages" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq postgresql >/dev/null
  # The package starts a system cluster on 5432; the test does not use it.
  (service postgresql stop || systemctl stop postgresql || true) >/dev/null 2>&1
  exit 0
fi
echo "ensure-postgres: PostgreSQL not found; install it (apt-get install postgresql)" >&2
exit 1
