#!/usr/bin/env bash
# scripts/run.sh - `make run`: counterd and the rollup scheduler against
# DATABASE_URL, or against a throwaway local PostgreSQL started here.
# Ctrl-C stops everything this script started.
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/database.sh
use_database DATABASE_URL
# counterd's default socket (config.SocketRule), spelled out so this script
# can wait for it and print it: a directory only this user can write.
if [[ -z ${COUNTERD_SOCKET:-} ]]; then
	if [[ ${XDG_RUNTIME_DIR:-} == /* ]]; then
		COUNTERD_SOCKET=$XDG_RUNTIME_DIR/counterd/counterd.sock
	elif [[ $(id -u) == 0 ]]; then
		COUNTERD_SOCKET=/run/counterd/counterd.sock
	else
		tmp=/tmp
		if [[ ${TMPDIR:-} == /* ]]; then tmp=${TMPDIR%/}; fi
		COUNTERD_SOCKET=$tmp/counterd-$(id -u)/counterd.sock
	fi
fi
export COUNTERD_SOCKET
export COUNTERD_JOURNAL_DIR=${COUNTERD_JOURNAL_DIR:-$PWD/.journal}
# Fold often, so the demo shows slot rows moving into counters.
export ROLLUP_SCHEDULE=${ROLLUP_SCHEDULE:-@every 10s}

pids=()
cleanup() {
	trap - INT TERM EXIT
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	wait "${pids[@]}" 2>/dev/null || true
	if [[ $started_pg == 1 ]]; then scripts/pg.sh stop; fi
}
trap cleanup INT TERM EXIT

bin/counterd &
pids+=($!)

# counterd migrates the schema before it listens, so rollup starts after.
for _ in $(seq 100); do [[ -S $COUNTERD_SOCKET ]] && break; sleep 0.1; done
if [[ ! -S $COUNTERD_SOCKET ]]; then
	echo "counterd did not start; see its error above" >&2
	exit 1
fi
bin/rollup &
pids+=($!)
cat <<MSG

counterd is listening on $COUNTERD_SOCKET; rollup folds $ROLLUP_SCHEDULE.
Try, in another terminal:

  redis-cli -s $COUNTERD_SOCKET incr post:42
  printf 'incrby post:42 5\r\nget post:42\r\n' | nc -U -q1 $COUNTERD_SOCKET
  redis-cli -s $COUNTERD_SOCKET flush
  psql '$DATABASE_URL' -c 'select * from counter_totals'
  curl -s localhost:9464/metrics | grep ^counterd_

Ctrl-C stops counterd, rollup and (if started here) PostgreSQL.

MSG
wait -n "${pids[@]}" || true
