#!/usr/bin/env bash
# make ci: everything make test runs and the long suites, in three lanes
# side by side: the machine has 2 cores, and the long suites (chaos-full,
# invariant-long, the server matrix, durable availability runs) spend most
# of their time waiting on timers and node deadlines, while the first lane
# compiles and runs the functional suites. Each target's output goes to a
# log of its own (CI_LOGS, default a temporary folder), printed when the
# target fails; one line per target says how long it took.
#
# Left out as double coverage: make chaos (chaos-full runs every scenario
# of it), and the 20 s TestInvariant of make integration (invariant-long
# runs it for 3 minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
logs=${CI_LOGS:-$(mktemp -d "${TMPDIR:-/tmp}/redlock-ci.XXXXXX")}
mkdir -p "$logs"
t0=$(date +%s)

# Host packages first, one apt-get at a time: the lanes would contend for
# dpkg's lock. (The matrix makes its trixie tree with debootstrap itself,
# in the background of its first servers.)
scripts/ensure-redis.sh
scripts/ensure-postgres.sh
scripts/servers.sh path valkey-8.0 >/dev/null
if ! command -v debootstrap >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
fi
# Module downloads once, before two lanes would race for them.
go mod download >/dev/null 2>&1 || true
for m in integration cmd/redlock cmd/redlock-bench cmd/internal/localredis redlockotel redlocktest examples/stock; do
	(cd "$m" && go mod download >/dev/null 2>&1) || true
done

# lane NAME TARGET...: runs make TARGET one after the other; the first that
# fails ends the lane, with its log's tail. A target given as after:T waits
# until T has ended (ok or not) in another lane.
lane() {
	local name=$1 t s
	shift
	for t in "$@"; do
		if [[ $t == after:* ]]; then
			until [ -f "$logs/${t#after:}.ended" ] || [ -f "$logs/failed" ]; do sleep 2; done
			[ ! -f "$logs/failed" ] || return 1 # another lane failed first: no point going on
			continue
		fi
		s=$(date +%s)
		if make --no-print-directory "$t" >"$logs/$t.log" 2>&1; then
			echo "ci: [$name] $t ok in $(($(date +%s) - s))s"
			touch "$logs/$t.ended"
		else
			echo "ci: [$name] $t FAILED in $(($(date +%s) - s))s; the end of $logs/$t.log:"
			tail -100 "$logs/$t.log"
			touch "$logs/$t.ended" "$logs/failed"
			return 1
		fi
	done
}

# Lane c, the server matrix (its suites wait on nodes more than they
# compute), starts once lane a has compiled and run the unit tests.
lane a check unit integration-ci cli examples oldest-go compose-check &
a=$!
lane b durable chaos-full invariant-long bench-quick &
b=$!
lane c after:unit matrix-ci &
c=$!
fail=0
wait $a || fail=1
wait $b || fail=1
wait $c || fail=1
echo "ci: $([ $fail = 0 ] && echo ok || echo FAILED) in $(($(date +%s) - t0))s (logs: $logs)"
exit $fail
