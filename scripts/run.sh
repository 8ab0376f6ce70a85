#!/usr/bin/env bash
# scripts/run.sh - `make run`: counterd and the rollup scheduler against
# DATABASE_URL, or against a throwaway local PostgreSQL started here.
# Ctrl-C stops everything this script started.
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/database.sh
use_database DATABASE_URL
# Per-checkout defaults, so a second checkout's `make run` does not collide
# with the first: the socket under this checkout's .run/ (0700, as counterd
# requires), and a metrics port the kernel picks. counterd logs both.
mkdir -p .run && chmod 700 .run
if [[ -z ${COUNTERD_SOCKET:-} ]]; then
	COUNTERD_SOCKET=$PWD/.run/counterd.sock
	if (( ${#COUNTERD_SOCKET} > 107 )); then
		# Too long for a Unix socket: a private directory under /tmp.
		COUNTERD_SOCKET=$(mktemp -d "${TMPDIR:-/tmp}/counterd-run.XXXXXX")/counterd.sock
	fi
fi
export COUNTERD_SOCKET
export COUNTERD_METRICS_ADDR=${COUNTERD_METRICS_ADDR:-127.0.0.1:0}
export COUNTERD_JOURNAL_DIR=${COUNTERD_JOURNAL_DIR:-$PWD/.journal}
# The demo counts post:* keys per minute, hour and day too (COUNT ...
# SINCE, RANGE, TOP); set COUNTERD_WINDOWS= to turn that off.
export COUNTERD_WINDOWS=${COUNTERD_WINDOWS-post:*=minute:2h,hour:14d,day:400d}
# Fold often, so the demo shows slot rows moving into counters.
export ROLLUP_SCHEDULE=${ROLLUP_SCHEDULE:-@every 10s}
log=.run/counterd.log

pids=()
cleanup() {
	trap - INT TERM EXIT
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	wait "${pids[@]}" 2>/dev/null || true
	if [[ $started_pg == 1 ]]; then scripts/pg.sh stop; fi
}
trap cleanup INT TERM EXIT

# counterd's log goes to the terminal and to .run/counterd.log, where this
# script reads the addresses it really listens on.
: >"$log"
bin/counterd 2> >(tee -a "$log" >&2) &
pids+=($!)

# counterd migrates the schema before it listens, so rollup starts after.
for _ in $(seq 300); do
	grep -q 'msg="counterd ready"' "$log" && break
	if ! kill -0 "${pids[0]}" 2>/dev/null; then break; fi
	sleep 0.1
done
if ! grep -q 'msg="counterd ready"' "$log"; then
	echo "make run: counterd failed to start; its log is above and in $log" >&2
	exit 1
fi
socket=$(sed -n 's/.*msg="counterd ready" socket=\([^ ]*\).*/\1/p' "$log" | tail -1)
metrics=$(sed -n 's/.*msg="serving metrics" addr=\([^ ]*\).*/\1/p' "$log" | tail -1)
bin/rollup &
pids+=($!)
cat <<MSG

counterd is listening on $socket; metrics on ${metrics:-(off)}; rollup folds $ROLLUP_SCHEDULE.
Try, in another terminal:

  redis-cli -s $socket incr post:42      # 1: INCR replies the amount added
  redis-cli -s $socket get post:42       # the total
  redis-cli -s $socket count post:42 since 1h    # the last hour (COUNTERD_WINDOWS)
  redis-cli -s $socket top 'post:*' hour 24 10   # trending over 24 hours
  redis-cli -s $socket budget gift 1000; redis-cli -s $socket take gift   # a budget that never overspends
  printf 'incrby post:42 5\r\nget post:42\r\n' | nc -U -q1 $socket
  redis-cli -s $socket flush
  psql '$DATABASE_URL' -c 'select * from counter_totals'
  curl -s http://${metrics:-127.0.0.1:9464}/metrics | grep ^counterd_

Ctrl-C stops counterd, rollup and (if started here) PostgreSQL.

MSG
# If counterd or rollup exits by itself, say so and fail.
rc=0
wait -n "${pids[@]}" || rc=$?
echo "make run: counterd or rollup exited (status $rc); stopping" >&2
exit $(( rc == 0 ? 1 : rc ))
