#!/usr/bin/env bash
# The servers of the CI matrix, each made available as one executable that
# the integration harness runs through REDIS_SERVER:
#   redis-7.0   Debian 12's redis-server (scripts/ensure-redis.sh)
#   valkey-8.0  Debian 12 backports' valkey-server, installed natively
#   redis-8.0   Debian 13 (trixie) redis-server  } from a minimal trixie tree in
#   valkey-8.1  Debian 13 (trixie) valkey-server } $CACHE/trixie, run through a
#                                                  wrapper with trixie's loader
# Everything comes from the Debian mirror apt already uses.
#
#   scripts/servers.sh              installs what is missing; prints name, version, path
#   scripts/servers.sh path NAME    installs NAME if missing; prints its executable
#   scripts/servers.sh names        prints the names, one a line
set -euo pipefail
CACHE=${REDLOCK_SERVERS_CACHE:-/var/cache/redlock-servers}
NAMES="redis-7.0 valkey-8.0 redis-8.0 valkey-8.1"
export DEBIAN_FRONTEND=noninteractive

say() { echo "servers: $*" >&2; }

# mirror prints the Debian archive URI apt is configured with (deb822 or
# one-line format), the only one this machine may reach.
mirror() {
	local uri
	uri=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null |
		awk '/^URIs:/ { for (i = 2; i <= NF; i++) if ($i !~ /security/) { print $i; exit } }')
	if [ -z "$uri" ]; then
		uri=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
			awk '$1 == "deb" && $0 ~ /bookworm/ && $0 !~ /security/ { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; exit } }')
	fi
	[ -n "$uri" ] || { say "no Debian mirror in apt's sources"; exit 1; }
	echo "$uri"
}

need_root() { [ "$(id -u)" = 0 ] || { say "installing $1 needs root and apt-get"; exit 1; }; }

# stop_service stops a system instance a package may have started: the
# tests start their own nodes on free ports.
stop_service() { (service "$1" stop || systemctl stop "$1" || true) >/dev/null 2>&1; }

valkey_backports() {
	command -v valkey-server >/dev/null 2>&1 && return
	need_root valkey-server
	local list=/etc/apt/sources.list.d/redlock-backports.sources
	if [ ! -f "$list" ]; then
		printf 'Types: deb\nURIs: %s\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' "$(mirror)" >"$list"
	fi
	say "installing valkey-server from bookworm-backports"
	apt-get update -qq
	# valkey-server and valkey-tools ship only valkey-* files: redis-server
	# stays as it is (checked below).
	apt-get install -y -qq -t bookworm-backports valkey-server >/dev/null
	stop_service valkey-server
	redis-server --version | grep -q '^Redis server' || { say "redis-server was replaced"; exit 1; }
}

# trixie makes $CACHE/trixie: a minimal Debian 13 tree with both servers,
# reused when present.
trixie() {
	[ -x "$CACHE/trixie/usr/bin/valkey-server" ] && return
	need_root "the trixie tree"
	command -v debootstrap >/dev/null 2>&1 || { apt-get update -qq; apt-get install -y -qq debootstrap >/dev/null; }
	say "debootstrap trixie into $CACHE/trixie (about a minute)"
	mkdir -p "$CACHE"
	rm -rf "$CACHE/trixie.tmp"
	debootstrap --variant=minbase --include=redis-server,valkey-server trixie "$CACHE/trixie.tmp" "$(mirror)" >"$CACHE/debootstrap.log" 2>&1 ||
		{ tail -20 "$CACHE/debootstrap.log" >&2; exit 1; }
	mv "$CACHE/trixie.tmp" "$CACHE/trixie"
}

# wrapper writes $CACHE/bin/NAME running BIN of the trixie tree with the
# tree's own loader and libraries; exec keeps the pid, so the harness's
# signals (SIGSTOP, SIGKILL) reach the server itself. The working directory
# is untouched, so relative paths in arguments mean what they meant.
wrapper() {
	local name=$1 bin=$2 d=$CACHE/trixie
	mkdir -p "$CACHE/bin"
	cat >"$CACHE/bin/$name" <<EOF
#!/bin/sh
exec $d/lib64/ld-linux-x86-64.so.2 --library-path $d/lib/x86_64-linux-gnu:$d/usr/lib/x86_64-linux-gnu $d/usr/bin/$bin "\$@"
EOF
	chmod 755 "$CACHE/bin/$name"
	echo "$CACHE/bin/$name"
}

# path installs NAME when missing and prints its executable.
path() {
	case $1 in
	redis-7.0) "$(dirname "$0")/ensure-redis.sh" && command -v redis-server ;;
	valkey-8.0) valkey_backports && command -v valkey-server ;;
	redis-8.0) trixie && wrapper redis-8.0 redis-server ;;
	valkey-8.1) trixie && wrapper valkey-8.1 valkey-server ;;
	*) say "unknown server $1 (one of: $NAMES)"; exit 2 ;;
	esac
}

# version prints the version the executable reports ("Redis server v=8.0.2 ...").
version() { "$1" --version | sed -n 's/.* v=\([^ ]*\).*/\1/p'; }

case ${1:-table} in
names) printf '%s\n' $NAMES ;;
path) path "${2:?usage: servers.sh path NAME}" ;;
table)
	printf '%-11s %-8s %s\n' server version path
	for n in $NAMES; do
		p=$(path "$n")
		v=$(version "$p")
		# The name promises a major.minor: fail if the package moved on.
		case $v in "${n#*-}".*) ;; *) say "$n: $p reports version '$v'"; exit 1 ;; esac
		printf '%-11s %-8s %s\n' "$n" "$v" "$p"
	done
	;;
*) sed -n '2,14p' "$0" >&2; exit 2 ;;
esac
