#!/usr/bin/env bash
# scripts/run.sh - `make run`: counterd and the rollup scheduler against
# DATABASE_URL, or against a throwaway local PostgreSQL started here.
# Ctrl-C stops everything this script started.
set -euo pipefail
cd "$(dirname "$0")/.."

RUN_DIR=${RUN_DIR:-$PWD/.run}
mkdir -p "$RUN_DIR" && chmod 700 "$RUN_DIR"

. scripts/database.sh
use_database DATABASE_URL
# COUNTERD_PARTITIONS=N (a power of two): counterd and rollup run on a
# PL/Proxy cluster of N partitions, databases counterd_p0.. on the same
# server, declared as server counterd in database counterd_proxy
# (scripts/cluster.sh), which becomes DATABASE_URL; COUNTERD_CLUSTER
# names another cluster. Unset: DATABASE_URL alone. A journal belongs to
# the database it writes (a switch was warned about at every start, and
# refused while it held rounds), so each has its own: .journal/ alone,
# .journal-<cluster>/ partitioned.
journal=$PWD/.journal
if [[ -n ${COUNTERD_PARTITIONS:-} ]]; then
	cluster=${COUNTERD_CLUSTER:-counterd}
	DATABASE_URL=$(scripts/cluster.sh "$DATABASE_URL" "$COUNTERD_PARTITIONS" "$cluster")
	export COUNTERD_CLUSTER=$cluster ROLLUP_CLUSTER=$cluster
	journal=$PWD/.journal-$cluster
	reads="-c \"select * from counter_totals(array['post:42'])\""
else
	reads="-c 'select * from counter_totals'"
fi
# The banner shows the URL to psql, but never a password in it.
if [[ $(redact_url "$DATABASE_URL") == "$DATABASE_URL" ]]; then
	reads="psql '$DATABASE_URL' $reads"
else
	reads="psql \"\$DATABASE_URL\" $reads    # with DATABASE_URL set in that terminal (its password is not shown here)"
fi
# One make run per run directory: a second one would start nothing that
# works (the socket is taken) but would empty the first one's log. The lock
# is taken after the database is up, so a PostgreSQL started here does not
# inherit it; counterd and rollup do, and hold it while they run. flock is
# util-linux's; without it counterd's own socket check is all there is.
if command -v flock >/dev/null; then
	exec 9>"$RUN_DIR/run.lock"
	if ! flock -n 9; then
		echo "make run: another make run is using $RUN_DIR (its log: $RUN_DIR/counterd.log); stop it first, or set RUN_DIR, COUNTERD_SOCKET and COUNTERD_JOURNAL_DIR for a second one" >&2
		exit 1
	fi
fi

# Per-checkout defaults, so a second checkout's `make run` does not collide
# with the first: the socket and log under this checkout's .run/ (0700, as
# counterd requires; RUN_DIR moves them), and a metrics port the kernel
# picks. counterd logs both. BIN is where `make build` put the binaries.
BIN=${BIN:-bin}
if [[ -z ${COUNTERD_SOCKET:-} ]]; then
	COUNTERD_SOCKET=$RUN_DIR/counterd.sock
	if (( ${#COUNTERD_SOCKET} > 107 )); then
		# Too long for a Unix socket: a private directory under /tmp.
		COUNTERD_SOCKET=$(mktemp -d "${TMPDIR:-/tmp}/counterd-run.XXXXXX")/counterd.sock
	fi
fi
export COUNTERD_SOCKET
export COUNTERD_METRICS_ADDR=${COUNTERD_METRICS_ADDR:-127.0.0.1:0}
export COUNTERD_JOURNAL_DIR=${COUNTERD_JOURNAL_DIR:-$journal}
# The demo counts post:* keys per minute, hour and day too (COUNT ...
# SINCE, RANGE, TOP); set COUNTERD_WINDOWS= to turn that off.
export COUNTERD_WINDOWS=${COUNTERD_WINDOWS-post:*=minute:2h,hour:14d,day:400d}
# Fold often, so the demo shows slot rows moving into counters.
export ROLLUP_SCHEDULE=${ROLLUP_SCHEDULE:-@every 10s}
log=$RUN_DIR/counterd.log rollup_log=$RUN_DIR/rollup.log

# Ctrl-C sends SIGINT to everything in the terminal's foreground process
# group: this script, counterd, rollup and the tee of counterd's log (make
# too); `kill -- -PGID` sends SIGTERM to it, and closing the terminal or
# its tmux session SIGHUP. counterd and rollup take each as SIGTERM: they
# drain, flush and exit. The tee ignores all three and ends when counterd
# does: a tee killed first would take counterd's log with it. The script
# stops its children, waits for them, and exits 0 when they stopped
# cleanly.
pids=() socket='' tee_pids=()
declare -A names
# stop_all stops what this script started, once, and fails if counterd or
# rollup exited with an error.
stop_all() {
	local p rc status=0
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do
		rc=0
		wait "$p" || rc=$?
		# 127, and -1 which bash 5.2 sometimes says instead when the
		# signal came while wait -n was reaping it: not a child any more,
		# its status gone (TestRunScriptCtrlC saw -1 twice in 8 runs of
		# the suite, each time after rollup logged "rollup stopped");
		# 129, 130, 143: ended by SIGHUP, SIGINT or SIGTERM before it
		# could handle them (still starting, so holding nothing).
		case $rc in
		0 | 127 | -1 | 129 | 130 | 143) ;;
		*) echo "make run: ${names[$p]} exited with status $rc" >&2; status=1 ;;
		esac
	done
	pids=()
	# Each tee ends once its process closes its end: wait, so their last
	# lines come before ours.
	for p in "${tee_pids[@]}"; do wait "$p" 2>/dev/null || true; done
	tee_pids=()
	# A counterd that did not shut down cleanly leaves its socket behind.
	if [[ -n $socket && -S $socket ]]; then rm -f "$socket"; fi
	if [[ $started_pg == 1 ]]; then
		started_pg=0
		scripts/pg.sh stop || status=1
	fi
	return "$status"
}
interrupted() {
	# A second Ctrl-C while they flush must not cut the flush short.
	trap '' INT TERM HUP
	echo "make run: stopping counterd and rollup (they flush first)" >&2
	if stop_all; then
		echo "make run: stopped" >&2
		exit 0
	fi
	echo "make run: counterd or rollup did not stop cleanly (counterd's log is above and in $log); increments counterd did not write stay in $COUNTERD_JOURNAL_DIR for its next start" >&2
	exit 1
}
trap interrupted INT TERM HUP
trap 'trap "" INT TERM HUP; stop_all || true' EXIT

# counterd's and rollup's logs go to the terminal and to log files, where
# this script reads the addresses counterd really listens on and when
# each is ready.
: >"$log"
exec 3> >(trap '' INT TERM HUP; exec tee -a "$log" >&2)
tee_pids+=($!)
"$BIN"/counterd 2>&3 &
pids+=($!) names[$!]=counterd
exec 3>&-

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
: >"$rollup_log"
exec 3> >(trap '' INT TERM HUP; exec tee -a "$rollup_log" >&2)
tee_pids+=($!) rollup_tee=$!
"$BIN"/rollup 2>&3 &
pids+=($!) names[$!]=rollup
exec 3>&-
# The banner waits for rollup to have checked its settings against the
# database (ROLLUP_TARGETS against the catalog): before, it said all was
# running while rollup was about to refuse them.
for _ in $(seq 300); do
	grep -q 'rollup scheduled' "$rollup_log" && break
	if ! kill -0 "${pids[1]}" 2>/dev/null; then
		# It exited: its tee ends once it has copied the last lines, which
		# may say it was scheduled (a rollup that stopped right after).
		wait "$rollup_tee" 2>/dev/null || true
		break
	fi
	sleep 0.1
done
if ! grep -q 'rollup scheduled' "$rollup_log"; then
	echo "make run: rollup failed to start; its log is above and in $rollup_log" >&2
	exit 1
fi
# Any client of the protocol works; nc shows it when it is installed.
nc_line=''
if command -v nc >/dev/null; then
	nc_line="  printf 'incrby post:42 5\\r\\nget post:42\\r\\n' | nc -U -q1 $socket
"
fi
cat <<MSG

counterd is listening on $socket; metrics on ${metrics:-(off)}; rollup folds $ROLLUP_SCHEDULE.
Try, in another terminal:

  redis-cli -s $socket incr post:42      # 1: INCR replies the amount added
  redis-cli -s $socket get post:42       # the total
  redis-cli -s $socket count post:42 since 1h    # the last hour (COUNTERD_WINDOWS)
  redis-cli -s $socket top 'post:*' hour 24 10   # trending over 24 hours
  redis-cli -s $socket budget gift 1000; redis-cli -s $socket take gift   # a budget that never overspends
${nc_line}  redis-cli -s $socket flush
  $reads
  curl -s http://${metrics:-127.0.0.1:9464}/metrics | grep ^counterd_

Ctrl-C stops counterd, rollup and (if started here) PostgreSQL.${COUNTERD_PARTITIONS:+
Partitions: $COUNTERD_PARTITIONS (cluster counterd, declared in the database above).}

MSG
# If counterd or rollup exits by itself, say so and fail. (Ctrl-C ends
# this wait early and runs interrupted instead.)
rc=0
wait -n "${pids[@]}" || rc=$?
# Both exit 0 only once told to stop. A hangup of the terminal reaches the
# whole process group, so they can exit before bash runs its own trap:
# wait -n then returns 0 and the trap never runs (TestRunScriptCtrlC's
# script-hup failed so under stress-ng). That is a stop, not a failure.
if ((rc == 0)); then
	interrupted
fi
echo "make run: counterd or rollup exited (status $rc); stopping" >&2
exit "$rc"
