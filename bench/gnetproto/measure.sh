#!/usr/bin/env bash
# measure.sh: counterd's own epoll loop vs the gnet v2 prototype, side by
# side, interleaved, with redis-benchmark on the unix socket.
#
#   DATABASE_URL=postgres://... ./measure.sh
#
# Environment (defaults in brackets):
#   DATABASE_URL  required; the database both servers write to (both
#                 migrate it at start; use a scratch database: the check
#                 below reads sum(total) of counter_totals before and after
#                 each server run, so nothing else may write to it meanwhile)
#   R [2]         rounds; each round runs both servers, in alternating order
#   N16 [1000000] requests of the -P 16 cell
#   N1 [300000]   requests of the -P 1 cell
#   CLIENTS [50]  redis-benchmark -c;  KEYS [100000]: redis-benchmark -r
#   COUNTERD_SRC [../..]  counterd checkout to build cmd/counterd from
#   CELL_TIMEOUT [900]  seconds one redis-benchmark run may take
#
# Each server runs with one event loop, is started fresh (fresh journal
# directory, fresh 0700 socket directory) for its two cells (P=16, then
# P=1) and stopped with SIGTERM afterwards; the script waits for it to exit
# (its final flush) and then checks that the database's total grew by
# exactly the INCRs sent. CPU is the server's utime+stime from
# /proc/PID/stat (fields 14 and 15) across each redis-benchmark run, in
# clock ticks (getconf CLK_TCK; 10 ms at 100 Hz, so short cells are coarse).
set -euo pipefail

: "${DATABASE_URL:?set DATABASE_URL}"
R=${R:-2}
N16=${N16:-1000000}
N1=${N1:-300000}
CLIENTS=${CLIENTS:-50}
KEYS=${KEYS:-100000}
COUNTERD_SRC=${COUNTERD_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
CELL_TIMEOUT=${CELL_TIMEOUT:-900}
START_TIMEOUT=60 # seconds for a server to answer PING (it migrates first)
STOP_TIMEOUT=90  # seconds for a server to exit after SIGTERM (final flush)

HERE=$(cd "$(dirname "$0")" && pwd)
BIN=$HERE/bin
TCK=$(getconf CLK_TCK)
for tool in redis-benchmark redis-cli psql go awk; do
	command -v "$tool" >/dev/null || { echo "measure.sh: $tool not found" >&2; exit 1; }
done

WORK=$(mktemp -d /tmp/gnetmeasure.XXXXXX) # mode 0700
chmod 700 "$WORK"
PID=""

stop_server() { # SIGTERM, bounded wait; returns the server's exit status
	[ -n "$PID" ] || return 0
	local pid=$PID rc=0
	PID=""
	kill -TERM "$pid" 2>/dev/null || true
	local i
	for ((i = 0; i < STOP_TIMEOUT * 10; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		echo "measure.sh: server $pid still running ${STOP_TIMEOUT}s after SIGTERM; killing it" >&2
		kill -KILL "$pid" 2>/dev/null || true
	fi
	wait "$pid" 2>/dev/null || rc=$?
	return "$rc"
}

BENCH= # the running redis-benchmark's timeout process, if any

cleanup() {
	if [ -n "$BENCH" ]; then
		kill "$BENCH" 2>/dev/null || true
		wait "$BENCH" 2>/dev/null || true
	fi
	stop_server || true
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

echo "building counterd ($COUNTERD_SRC/cmd/counterd) and gnetproto into $BIN" >&2
mkdir -p "$BIN"
(cd "$COUNTERD_SRC" && go build -o "$BIN/counterd" ./cmd/counterd)
(cd "$HERE" && go build -o "$BIN/gnetproto" .)

psql_total() {
	if [ "$(psql "$DATABASE_URL" -X -q -Atc "SELECT to_regclass('counter_totals') IS NULL")" = t ]; then
		echo 0 # not migrated yet: the first server migrates it
		return
	fi
	psql "$DATABASE_URL" -X -q -v ON_ERROR_STOP=1 -Atc \
		"SELECT coalesce(sum(total), 0) FROM counter_totals"
}

cpu_ticks() { # utime+stime (fields 14, 15); comm may hold spaces, so cut at ") "
	awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"
}

# start_server NAME DIR: starts it in the background, sets PID and SOCK.
start_server() {
	local name=$1 dir=$2
	mkdir -m 700 -p "$dir/run"
	SOCK=$dir/run/$name.sock
	local base=(env -i "PATH=$PATH" "HOME=${HOME:-/root}" "DATABASE_URL=$DATABASE_URL")
	case $name in
	counterd)
		"${base[@]}" COUNTERD_SOCKET="$SOCK" COUNTERD_JOURNAL_DIR="$dir/journal" \
			COUNTERD_METRICS_ADDR=off COUNTERD_LOOPS=1 COUNTERD_IO=loop \
			"$BIN/counterd" >"$dir/log" 2>&1 &
		;;
	gnet)
		"${base[@]}" SOCKET="$SOCK" JOURNAL_DIR="$dir/journal" LOOPS=1 \
			"$BIN/gnetproto" >"$dir/log" 2>&1 &
		;;
	esac
	PID=$!
	local i
	for ((i = 0; i < START_TIMEOUT * 10; i++)); do
		if ! kill -0 "$PID" 2>/dev/null; then
			echo "measure.sh: $name exited at start:" >&2
			cat "$dir/log" >&2
			PID=""
			return 1
		fi
		if [ -S "$SOCK" ] && [ "$(timeout 5 redis-cli -s "$SOCK" PING 2>/dev/null)" = PONG ]; then
			return 0
		fi
		sleep 0.1
	done
	echo "measure.sh: $name did not answer PING within ${START_TIMEOUT}s" >&2
	cat "$dir/log" >&2
	return 1
}

# run_cell NAME ROUND P N: one redis-benchmark run against the running server.
run_cell() {
	local name=$1 round=$2 p=$3 n=$4 t0 t1 out rps p50 cpu
	t0=$(cpu_ticks "$PID")
	# In the background and waited for, so a signal reaches the trap at
	# once and cleanup can stop the benchmark (a foreground command
	# substitution would hold the trap until redis-benchmark ended).
	timeout "$CELL_TIMEOUT" redis-benchmark -s "$SOCK" -c "$CLIENTS" -r "$KEYS" -n "$n" -P "$p" -q \
		incr 'post:__rand_int__' >"$WORK/bench.out" 2>&1 &
	BENCH=$!
	local rc=0
	wait "$BENCH" || rc=$?
	BENCH=
	out=$(tr '\r' '\n' <"$WORK/bench.out")
	if [ "$rc" -ne 0 ]; then
		echo "measure.sh: redis-benchmark failed or timed out ($name P=$p):" >&2
		printf '%s\n' "$out" | tail -5 >&2
		return 1
	fi
	t1=$(cpu_ticks "$PID")
	local line
	line=$(printf '%s\n' "$out" | grep 'requests per second' | tail -1)
	rps=$(printf '%s\n' "$line" | sed -E 's/.*: ([0-9.]+) requests per second.*/\1/')
	p50=$(printf '%s\n' "$line" | sed -nE 's/.*p50=([0-9.]+) msec.*/\1/p')
	cpu=$(awk -v d=$((t1 - t0)) -v t="$TCK" -v n="$n" 'BEGIN { printf "%.2f", d * 1e6 / t / n }')
	if printf '%s\n' "$out" | grep -qi 'error'; then
		echo "measure.sh: redis-benchmark reported errors ($name P=$p):" >&2
		printf '%s\n' "$out" | grep -i error | head -3 >&2
	fi
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$name" "$p" "$n" "${rps:-?}" "${p50:-?}" "$cpu" >>"$WORK/cells"
}

# sent P N: what redis-benchmark issues: whole pipelines of P.
sent() { echo $(((($2 + $1 - 1) / $1) * $1)); }

# server_run NAME ROUND: fresh server, both cells, stop, check the totals.
server_run() {
	local name=$1 round=$2 dir=$WORK/r$2-$1 before after want
	mkdir -m 700 "$dir"
	before=$(psql_total)
	start_server "$name" "$dir"
	run_cell "$name" "$round" 16 "$N16"
	run_cell "$name" "$round" 1 "$N1"
	if ! stop_server; then
		echo "measure.sh: $name exited non-zero after SIGTERM:" >&2
		tail -5 "$dir/log" >&2
	fi
	after=$(psql_total)
	want=$(($(sent 16 "$N16") + $(sent 1 "$N1")))
	local verdict=exact
	[ $((after - before)) -eq "$want" ] || verdict="MISMATCH"
	printf '%s\t%s\t%s\t%s\t%s\n' "$round" "$name" "$want" "$((after - before))" "$verdict" >>"$WORK/checks"
	echo "round $round $name: sent $want INCRs, counter_totals grew by $((after - before)): $verdict" >&2
}

: >"$WORK/cells"
: >"$WORK/checks"
for ((round = 1; round <= R; round++)); do
	if ((round % 2)); then order=(counterd gnet); else order=(gnet counterd); fi
	for name in "${order[@]}"; do
		server_run "$name" "$round"
	done
done

echo
echo "redis-benchmark -s SOCK -c $CLIENTS -r $KEYS -n N -P P -q incr post:__rand_int__; 1 loop each; CLK_TCK=$TCK"
printf '%-5s %-9s %3s %8s %12s %9s %12s\n' round server P N 'req/s' 'p50 ms' 'cpu us/INCR'
sort -t$'\t' -k3,3nr -k1,1n -k2,2 "$WORK/cells" |
	awk -F'\t' '{ printf "%-5s %-9s %3s %8s %12s %9s %12s\n", $1, $2, $3, $4, $5, $6, $7 }'
echo
echo "means over $R round(s):"
printf '%-9s %3s %12s %12s\n' server P 'req/s' 'cpu us/INCR'
awk -F'\t' '{ k = $2 "\t" $3; n[k]++; r[k] += $5; c[k] += $7 }
	END { for (k in n) { split(k, a, "\t"); printf "%-9s %3s %12.0f %12.2f\n", a[1], a[2], r[k] / n[k], c[k] / n[k] } }' \
	"$WORK/cells" | sort -k2,2nr -k1,1
echo
echo "exactness (sum(total) of counter_totals after the server's final flush, minus before):"
awk -F'\t' '{ printf "round %s %-9s sent %d, counted %d: %s\n", $1, $2, $3, $4, $5 }' "$WORK/checks"
if grep -q MISMATCH "$WORK/checks"; then exit 1; fi
