#!/usr/bin/env bash
# The server matrix (make matrix): for each server of scripts/servers.sh,
# the integration core suite (without -race: the machine is small) and
# `redlock doctor` against 3 nodes of that server; the chaos short suite on
# one server per run. The servers run side by side. Writes the results to
# docs/servers.md (MATRIX_OUT) and exits non-zero if anything failed.
#
# Chaos rotation: the chaos short suite runs on one of the servers after
# the first (Debian 12's redis-server, which make chaos and chaos-full cover
# on every run): the one at (day of the year) mod 3, so each gets a chaos
# run every 3 days and a rerun the same day picks the same one.
# MATRIX_CHAOS=NAME picks one, MATRIX_CHAOS=none skips it. The chaos run
# leaves out TestChaosContainers: its containers run an image built from
# Debian 12's redis-server whatever REDIS_SERVER says.
# MATRIX_SERVERS="NAME ..." runs only those servers; MATRIX_NO_CORE="NAME ..."
# leaves out their core suite (make ci: redis-7.0's runs in make integration).
# MATRIX_ROTATE=1 runs, of the servers after the first two, only the one
# the chaos rotation picks (make ci).
#
# Transports: the core suite also runs through the other client libraries
# of the transport seam (integration/harness: REDLOCK_TRANSPORT), with the
# hand-off suite (make transports adds the invariant test), one job
# per TRANSPORT@SERVER of MATRIX_TRANSPORTS, side by side with the servers;
# by default rueidis and valkey (valkey-go) on the first two servers. make
# ci runs two of the four pairs, crossed on alternate days.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${MATRIX_OUT:-docs/servers.md}
logs=$(mktemp -d "${TMPDIR:-/tmp}/redlock-matrix.XXXXXX")
export PATH="$PATH:/usr/local/go/bin"
t0=$(date +%s)
mapfile -t names < <(scripts/servers.sh names)
has() { case " $1 " in *" $2 "*) return 0 ;; esac; return 1; }

# The apt-get installs one after the other, then the trixie tree (a minute
# or more of debootstrap) in the background while the first servers run.
scripts/servers.sh path "${names[0]}" >/dev/null
scripts/servers.sh path "${names[1]}" >/dev/null
(
	start=$(date +%s)
	scripts/servers.sh path "${names[2]}"
	echo "matrix: trixie tree ready in $(($(date +%s) - start))s" >&2
) >"$logs/trixie.log" 2>&1 &
trixie=$!

others=("${names[@]:1}")
chaos=${MATRIX_CHAOS:-${others[$((10#$(date +%j) % ${#others[@]}))]}}

(cd cmd/redlock && go build -o "$logs/redlock" .)

# counts prints "P passed, F failed[: names][, S skipped]" from go test -v
# output (top-level tests only).
counts() {
	local p f s
	p=$(grep -c '^--- PASS' "$1" || true)
	f=$(grep -c '^--- FAIL' "$1" || true)
	s=$(grep -c '^--- SKIP' "$1" || true)
	printf '%s passed, %s failed' "$p" "$f"
	[ "$f" = 0 ] || printf ': %s' "$(awk '/^--- FAIL/ { printf "%s%s", sep, $3; sep = ", " }' "$1")"
	[ "$s" = 0 ] || printf ', %s skipped' "$s"
}

# suite NAME BIN PKG [ARGS...]: runs PKG of integration/ against BIN
# (through the transport $TRANSPORT names, go-redis if unset);
# prints "ok|FAIL (counts)" and the seconds it took, tab-separated.
# The suites of several servers run side by side beside the other CI lanes
# on a small machine: a test that failed runs once more, alone, and the
# suite passes only if every such test then passes. Both runs' failures
# are printed, and the counts say which tests needed the rerun.
suite() {
	local name=$1 bin=$2 pkg=$3 log="$logs/$1-${3//[^a-z]/}.log" start verdict=ok failed rerun
	shift 3
	start=$(date +%s)
	(cd integration && REDLOCK_TRANSPORT=${TRANSPORT:-goredis} REDIS_SERVER=$bin go test -count=1 -v "$@" "$pkg") >"$log" 2>&1 || verdict=FAIL
	if [ $verdict = FAIL ]; then
		echo "matrix: $name $pkg failed:" >&2
		# -v streams a test's log lines before its "--- FAIL" line.
		grep -E -B12 -A3 '^ *--- FAIL|^panic' "$log" | grep -Ev '^=== (PAUSE|CONT)' | head -100 >&2
		failed=$(awk '/^--- FAIL/ { printf "%s%s", sep, $3; sep = "|" }' "$log")
		if [ -n "$failed" ] && ! grep -q '^panic' "$log"; then
			rerun="$log.rerun"
			if (cd integration && REDLOCK_TRANSPORT=${TRANSPORT:-goredis} REDIS_SERVER=$bin go test -count=1 -v "$@" -run "^($failed)\$" "$pkg") >"$rerun" 2>&1; then
				echo "matrix: $name $pkg: ${failed//|/, } passed when run again alone" >&2
				verdict=ok
				printf '%s (%s; passed on a rerun alone: %s)\t%s\n' $verdict "$(counts "$log")" "${failed//|/, }" $(($(date +%s) - start))
				return
			fi
			echo "matrix: $name $pkg failed again alone:" >&2
			grep -E -B12 -A3 '^ *--- FAIL|^panic' "$rerun" | grep -Ev '^=== (PAUSE|CONT)' | head -60 >&2
		fi
	fi
	printf '%s (%s)\t%s\n' $verdict "$(counts "$log")" $(($(date +%s) - start))
}

# freeport prints a loopback port nothing listens on.
freeport() {
	local p
	while :; do
		p=$((20000 + RANDOM % 20000))
		(exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo $p; return; }
	done
}

# probe PORT prints whether the node takes WAITAOF (Redis 7.2+, Valkey)
# and SET IFEQ (Valkey 8.1+, Redis 8.4+), tried rather than looked up.
probe() {
	local w=no i=no
	redis-cli -p "$1" waitaof 1 0 100 | grep -q ERR || w=yes
	redis-cli -p "$1" set redlock:matrix:probe a >/dev/null
	[ "$(redis-cli -p "$1" set redlock:matrix:probe b ifeq a)" = OK ] && i=yes
	redis-cli -p "$1" del redlock:matrix:probe >/dev/null
	echo "WAITAOF $w, SET IFEQ $i"
}

# doctor NAME BIN: starts 3 nodes of BIN as a deployment should run them
# (appendonly yes, appendfsync always), runs redlock doctor against them
# (a node timeout of 1s: this checks the server, not the load of the machine)
# and prints its verdict line and the seconds it took, tab-separated.
doctor() {
	local name=$1 bin=$2 start urls="" pids=() i p dir verdict
	start=$(date +%s)
	for i in 1 2 3; do
		dir="$logs/$name-node$i"
		mkdir -p "$dir"
		# Another process may take the port between freeport and the bind
		# (the server then exits): try another port, a few times.
		for try in 1 2 3 4 5; do
			p=$(freeport)
			"$bin" --port "$p" --bind 127.0.0.1 --dir "$dir" --logfile "$dir/server.log" --save "" \
				--appendonly yes --appendfsync always --protected-mode no --daemonize no &
			pids+=($!)
			for _ in $(seq 100); do
				redis-cli -p "$p" ping >/dev/null 2>&1 && break
				kill -0 "$!" 2>/dev/null || break
				sleep 0.1
			done
			redis-cli -p "$p" info server 2>/dev/null | grep -q "^process_id:$!" && break
			echo "matrix: $name node on port $p did not come up (try $try)" >&2
		done
		urls="$urls${urls:+,}redis://127.0.0.1:$p"
	done
	"$logs/redlock" doctor --node-timeout 1s --nodes "$urls" >"$logs/$name-doctor.log" 2>&1 || true
	probe "$p" >"$logs/$name-probe.txt" || true # the nodes are killed whatever it says
	kill "${pids[@]}" 2>/dev/null || true
	wait "${pids[@]}" 2>/dev/null || true
	verdict=$(sed -n 's/^verdict: //p' "$logs/$name-doctor.log")
	[ -n "$verdict" ] || verdict="no verdict: $(tail -1 "$logs/$name-doctor.log")"
	# The version check's detail, as doctor saw the first node.
	sed -n 's/^redis:[^ ]* *version *[A-Z]* *//p' "$logs/$name-doctor.log" | head -1 >"$logs/$name-features.txt"
	printf '%s\t%s\n' "$verdict" $(($(date +%s) - start))
}

# server NAME: one server's core suite, doctor and (if it is this run's)
# chaos short suite, one after the other; its table rows go to
# $logs/NAME.row and $logs/NAME.features, its verdict to $logs/NAME.failed.
# The servers run side by side (their suites mostly wait on node
# deadlines and timers, each on nodes of its own).
server() {
	local name=$1 bin version core core_s doc doc_s ch ch_s failed=0
	bin=$(scripts/servers.sh path "$name")
	version=$("$bin" --version | sed -n 's/.* v=\([^ ]*\).*/\1/p')
	echo "matrix: $name $version ($bin)"
	core="run by make integration (-race)" core_s="-"
	if ! has "${MATRIX_NO_CORE:-}" "$name"; then
		IFS=$'\t' read -r core core_s < <(suite "$name" "$bin" ./core/)
		echo "matrix: $name core: $core in ${core_s}s"
	fi
	IFS=$'\t' read -r doc doc_s < <(doctor "$name" "$bin")
	echo "matrix: $name doctor: $doc in ${doc_s}s"
	ch="not this run" ch_s="-"
	if [ "$name" = "$chaos" ]; then
		IFS=$'\t' read -r ch ch_s < <(suite "$name" "$bin" ./chaos/ -timeout 10m -skip TestChaosContainers)
		echo "matrix: $name chaos short: $ch in ${ch_s}s"
	fi
	case "$core $doc $ch" in *FAIL*|*"no verdict"*|*UNREACHABLE*) failed=1 ;; esac
	for v in core_s doc_s ch_s; do [ "${!v}" = - ] || printf -v "$v" '%ss' "${!v}"; done
	echo "| $name | $version | $core | $core_s | $doc | $doc_s | $ch | $ch_s |" >"$logs/$name.row"
	echo "| $name | $(cat "$logs/$name-probe.txt") | $(cat "$logs/$name-features.txt") |" >"$logs/$name.features"
	echo $failed >"$logs/$name.failed"
}

# via TRANSPORT@NAME: the core and handoff suites on NAME
# through TRANSPORT; its row
# goes to $logs/TRANSPORT@NAME.row, its verdict to .failed.
via() {
	local tr=${1%@*} name=${1#*@} bin version core core_s
	bin=$(scripts/servers.sh path "$name")
	version=$("$bin" --version | sed -n 's/.* v=\([^ ]*\).*/\1/p')
	IFS=$'\t' read -r core core_s < <(TRANSPORT=$tr suite "$tr-$name" "$bin" ./core/ ./handoff/)
	echo "matrix: $name via $tr core: $core in ${core_s}s"
	echo "| $name via $tr | $version | $core | ${core_s}s | - | - | - | - |" >"$logs/$1.row"
	case "$core" in FAIL*) echo 1 ;; *) echo 0 ;; esac >"$logs/$1.failed"
}

transports=${MATRIX_TRANSPORTS-rueidis@${names[0]} valkey@${names[0]} rueidis@${names[1]} valkey@${names[1]}}
if [ "${MATRIX_ROTATE:-}" = 1 ]; then
	day=$((10#$(date +%j)))
	later=("${names[@]:2}")
	pick=${later[$((day % ${#later[@]}))]}
	has "${later[*]}" "$chaos" && pick=$chaos
	MATRIX_SERVERS=${MATRIX_SERVERS:-"${names[*]:0:2} $pick"}
	if [ -z "${MATRIX_TRANSPORTS+set}" ]; then
		transports="rueidis@${names[day % 2]} valkey@${names[(day + 1) % 2]}"
	fi
fi
run=()
for pair in $transports; do
	via "$pair" >"$logs/$pair.out" 2>&1 &
	run+=("$pair")
done
for name in "${names[@]}"; do
	has "${MATRIX_SERVERS:-$name}" "$name" || continue
	if [ -n "$trixie" ] && [ "$name" != "${names[0]}" ] && [ "$name" != "${names[1]}" ]; then
		wait $trixie || { cat "$logs/trixie.log" >&2; exit 1; }
		grep '^matrix:' "$logs/trixie.log"
		trixie=""
	fi
	server "$name" >"$logs/$name.out" 2>&1 &
	run+=("$name")
done
wait
rows="" features=""
failed=0
for name in "${run[@]}"; do
	cat "$logs/$name.out"
	[ -f "$logs/$name.row" ] || { echo "matrix: $name did not finish" >&2; failed=1; continue; }
	rows="$rows$(cat "$logs/$name.row")
"
	[ ! -f "$logs/$name.features" ] || features="$features$(cat "$logs/$name.features")
"
	[ "$(cat "$logs/$name.failed")" = 0 ] || failed=1
done
# The names promise a major.minor: this fails if a package moved on.
scripts/servers.sh

mkdir -p "$(dirname "$out")"
cat >"$out" <<EOF
# Servers the tests run against

Generated by \`make matrix\` (scripts/matrix.sh) on $(date -u +%Y-%m-%d) at commit
$(git rev-parse --short HEAD 2>/dev/null || echo unknown); do not edit by hand.
Each server is the one Debian ships (scripts/servers.sh): Redis 7.0 from
Debian 12, Valkey 8.0 from Debian 12 backports, Redis 8.0 and Valkey 8.1
from Debian 13.

- core: \`cd integration && REDIS_SERVER=<server> go test -count=1 ./core/\`
  (no -race), counted in top-level tests.
- via rueidis, via valkey: the core and handoff suites through that client library
  (\`REDLOCK_TRANSPORT=rueidis|valkey\`, the transport seam); make ci runs
  two of these four pairs a day.
- doctor: \`redlock doctor --node-timeout 1s\` against 3 nodes of the server
  started with appendonly yes, appendfsync always.
- chaos short: \`cd integration && REDIS_SERVER=<server> go test -count=1 -skip TestChaosContainers ./chaos/\`,
  on one server per run other than redis-7.0 (\`make chaos\` covers that
  one), rotating by the day of the year.

| server | version | core suite | time | doctor | time | chaos short | time |
| --- | --- | --- | --- | --- | --- | --- | --- |
$rows
Server features: tried on a node (WAITAOF 1 0 100; SET with IFEQ), and
as \`redlock doctor\` reports them from the version. The library needs only
Lua and pub/sub.

| server | tried | doctor's version check |
| --- | --- | --- |
$features
EOF
echo "matrix: wrote $out in $(($(date +%s) - t0))s (logs in $logs)"
exit $failed
