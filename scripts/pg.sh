#!/usr/bin/env bash
# scripts/pg.sh - manage a throwaway, project-local PostgreSQL server for counterd.
#
# Usage:
#   scripts/pg.sh start          ensure the server runs; print ONLY its URL on stdout
#   scripts/pg.sh stop           fast shutdown (no error if not running / never initialised)
#   scripts/pg.sh url            print the URL without starting anything
#   scripts/pg.sh datadir        print the data directory
#   scripts/pg.sh pgctl ARGS...  run `pg_ctl -D <datadir> ARGS...` as the server user
#                                (e.g. `pgctl stop -m immediate`, `pgctl start`)
#   scripts/pg.sh destroy        stop the server and delete all of its files
#
# Layout: <repo>/.pg/{data,run,log} (data dir, Unix socket dir, server log).
# When run as root the server runs as `postgres` (or a system user `counterd-pg`
# created on demand). If that user cannot reach <repo> (e.g. the clone lives
# under /root), or the socket path would be too long, the files live in
# /tmp/counterd-pg-<sha256(repo path)[:12]> instead.
#
# The server only listens on its Unix socket (listen_addresses=''), with trust
# auth for the `postgres` role, so it is for local development and CI only.
#
# Environment:
#   PGPORT_COUNTERD   port number (names the socket file; default 5432 or the
#                     port the data dir was last configured with)
#
# All diagnostics go to stderr; stdout carries only the requested value.

set -euo pipefail

readonly DB_NAME=counterd
readonly DB_ROLE=postgres
readonly DEFAULT_PORT=5432
readonly FALLBACK_USER=counterd-pg

# ---------------------------------------------------------------------------
# helpers

log() { printf 'pg.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

is_root() { [[ ${EUID:-$(id -u)} -eq 0 ]]; }

usage() {
	sed -n '2,/^$/{s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}" >&2
}

# Repository root: the parent of the directory holding this script, with
# symlinks resolved so the path (and the /tmp fallback hash) is canonical.
SCRIPT_PATH=$(readlink -f -- "${BASH_SOURCE[0]}")
REPO=$(cd -P -- "$(dirname -- "$SCRIPT_PATH")/.." && pwd -P)
readonly SCRIPT_PATH REPO

# ---------------------------------------------------------------------------
# locating / installing PostgreSQL binaries

INITDB='' PG_CTL='' POSTGRES='' PSQL='' PG_ISREADY=''

# set_bins_from_dir DIR: use initdb/pg_ctl/postgres from DIR if all exist.
set_bins_from_dir() {
	local dir=$1
	[[ -x $dir/initdb && -x $dir/pg_ctl && -x $dir/postgres ]] || return 1
	INITDB=$dir/initdb PG_CTL=$dir/pg_ctl POSTGRES=$dir/postgres
}

# newest_lib_bin: print the newest /usr/lib/postgresql/<ver>/bin with a server.
newest_lib_bin() {
	local d
	# shellcheck disable=SC2012 # version dirs are plain numbers; sort -V is fine
	for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -rV); do
		if [[ -x $d/initdb && -x $d/pg_ctl && -x $d/postgres ]]; then
			printf '%s\n' "$d"
			return 0
		fi
	done
	return 1
}

# find_bins: PATH first, then the newest /usr/lib/postgresql/*/bin.
find_bins() {
	local a b c dir
	if a=$(command -v initdb) && b=$(command -v pg_ctl) && c=$(command -v postgres); then
		INITDB=$a PG_CTL=$b POSTGRES=$c
	elif dir=$(newest_lib_bin); then
		set_bins_from_dir "$dir"
	else
		return 1
	fi
	find_client_bins
}

# find_client_bins: psql/pg_isready, preferring the server's own bin dir.
find_client_bins() {
	local dir
	dir=$(dirname -- "$(readlink -f -- "$PG_CTL")")
	PSQL=$dir/psql PG_ISREADY=$dir/pg_isready
	[[ -x $PSQL ]] || PSQL=$(command -v psql || true)
	[[ -x $PG_ISREADY ]] || PG_ISREADY=$(command -v pg_isready || true)
}

# major_of BINARY: print the major version of a PostgreSQL program.
major_of() {
	"$1" --version | awk '{print $3}' | grep -oE '^[0-9]+'
}

# install_postgres: apt-get install the server (root + apt-get only). The
# Debian packages normally create and start a "main" cluster; we disable that
# first because we always run our own data dir.
install_postgres() {
	is_root && command -v apt-get >/dev/null 2>&1 || return 1
	log "PostgreSQL server binaries not found; installing them with apt-get (this can take a while)"
	export DEBIAN_FRONTEND=noninteractive
	local -a apt_opts=(-y -q --no-install-recommends
		-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)
	apt-get update -q >&2 || return 1
	if ! dpkg -s postgresql-common >/dev/null 2>&1; then
		apt-get install "${apt_opts[@]}" postgresql-common >&2 || return 1
	fi
	local conf=/etc/postgresql-common/createcluster.conf
	if [[ -f $conf ]]; then
		if grep -qE '^[#[:space:]]*create_main_cluster[[:space:]]*=' "$conf"; then
			sed -i -E 's/^[#[:space:]]*create_main_cluster[[:space:]]*=.*/create_main_cluster = false/' "$conf"
		else
			printf 'create_main_cluster = false\n' >>"$conf"
		fi
	fi
	apt-get install "${apt_opts[@]}" postgresql postgresql-client >&2 || return 1
	# Belt and braces: if a packaged cluster was created and started anyway,
	# stop it; it is never the one we use.
	if command -v pg_lsclusters >/dev/null 2>&1; then
		local ver name _rest
		while read -r ver name _rest; do
			[[ -n $ver && -n $name ]] || continue
			log "stopping Debian's auto-created cluster $ver/$name (we use our own data dir)"
			pg_ctlcluster "$ver" "$name" stop >&2 || true
		done < <(pg_lsclusters -h 2>/dev/null | awk '$4 == "online"')
	fi
}

# require_bins [install]: locate binaries, optionally installing them.
require_bins() {
	if find_bins; then return 0; fi
	if [[ ${1:-} == install ]] && install_postgres && find_bins; then return 0; fi
	die "PostgreSQL server binaries (initdb, pg_ctl, postgres) not found.
  install PostgreSQL server binaries: apt-get install postgresql
  (or put them on PATH), or set DATABASE_URL to use an existing server"
}

# ---------------------------------------------------------------------------
# user and directory layout

PG_USER='' BASE='' DATA='' RUN='' LOGDIR='' LOGFILE='' PORT='' FALLBACK_REASON=''

user_exists() { id -u "$1" >/dev/null 2>&1; }

# ensure_user (root only): make sure the unprivileged server user exists.
ensure_user() {
	is_root || return 0
	if user_exists postgres || user_exists "$FALLBACK_USER"; then return 0; fi
	log "creating system user $FALLBACK_USER to run PostgreSQL (it refuses to run as root)"
	useradd --system --no-create-home --user-group \
		--home-dir /nonexistent --shell /usr/sbin/nologin "$FALLBACK_USER" >&2 ||
		user_exists "$FALLBACK_USER" || # lost a race with a concurrent run
		die "could not create system user $FALLBACK_USER"
}

# can_traverse USER DIR: can USER search (reach) DIR, including all ancestors?
can_traverse() {
	runuser -u "$1" -- test -x "$2" 2>/dev/null
}

# configured_port DATADIR: the port recorded in our config file, if any.
configured_port() {
	local f=$1/counterd.conf
	[[ -r $f ]] || return 1
	sed -nE "s/^port[[:space:]]*=[[:space:]]*([0-9]+).*/\1/p" "$f" | tail -n 1 | grep .
}

# resolve_layout: decide PG_USER, BASE/DATA/RUN/LOGDIR/LOGFILE and PORT.
# Creates nothing.
resolve_layout() {
	local local_base=$REPO/.pg reason='' probe='' hash
	hash=$(printf '%s' "$REPO" | sha256sum | cut -c1-12)
	local tmp_base=/tmp/counterd-pg-$hash

	if is_root; then
		if user_exists postgres; then
			PG_USER=postgres
		else
			PG_USER=$FALLBACK_USER
		fi
		# Before `start` has created the user, judge traversal as `nobody`
		# (a fresh system user gets the same "other" permissions).
		if user_exists "$PG_USER"; then
			probe=$PG_USER
		elif user_exists nobody; then
			probe=nobody
		fi
		if [[ -n $probe ]] && ! can_traverse "$probe" "$REPO"; then
			reason="user $PG_USER cannot traverse $REPO"
		fi
	fi

	# Unix socket paths are limited to 107 bytes ("<run>/.s.PGSQL.<port>").
	if [[ -z $reason ]] && ((${#local_base} + 24 > 107)); then
		reason="socket path under $local_base would be too long"
	fi
	# pg_ctl runs the server through /bin/sh inside double quotes, so these
	# characters in the path would break it.
	if [[ -z $reason && $local_base == *[\"\$\`\\]* ]]; then
		reason="$local_base contains characters pg_ctl cannot quote"
	fi

	if [[ -n $reason ]]; then
		BASE=$tmp_base
		FALLBACK_REASON=$reason
	else
		BASE=$local_base
		FALLBACK_REASON=''
	fi
	DATA=$BASE/data RUN=$BASE/run LOGDIR=$BASE/log
	LOGFILE=$LOGDIR/postgresql.log

	# A data dir already initialised by some unprivileged user keeps being run
	# by that user (pg_ctl insists the data dir owner runs the server).
	if is_root && [[ -f $DATA/PG_VERSION ]]; then
		local owner
		owner=$(stat -c %U -- "$DATA")
		if [[ $owner != root && $owner != UNKNOWN ]]; then PG_USER=$owner; fi
	fi

	if [[ -n ${PGPORT_COUNTERD:-} ]]; then
		if ! [[ $PGPORT_COUNTERD =~ ^[0-9]{1,5}$ ]] ||
			((10#$PGPORT_COUNTERD < 1 || 10#$PGPORT_COUNTERD > 65535)); then
			die "PGPORT_COUNTERD must be a port number (1-65535), got '$PGPORT_COUNTERD'"
		fi
		PORT=$((10#$PGPORT_COUNTERD))
	else
		PORT=$(configured_port "$DATA" 2>/dev/null) || PORT=$DEFAULT_PORT
	fi
}

# note_fallback: tell the user (stderr) when files live under /tmp.
note_fallback() {
	if [[ -n $FALLBACK_REASON ]]; then
		log "$FALLBACK_REASON; using $BASE instead of $REPO/.pg"
	fi
}

# make_base: create BASE safely (the fallback lives in world-writable /tmp,
# so there it must be a real directory that we own).
make_base() {
	if [[ -L $BASE ]]; then die "$BASE is a symlink; refusing to use it"; fi
	mkdir -p -- "$BASE" 2>/dev/null || die "cannot create $BASE"
	if [[ -O $BASE ]]; then
		chmod 755 -- "$BASE" # the server user must be able to traverse it
	elif [[ $BASE != "$REPO/.pg" ]]; then
		die "$BASE is owned by another user; refusing to use it"
	fi
}

# lock: take an exclusive flock (fd 9) on BASE/lock for the rest of the script, so
# concurrent invocations serialise. Re-checks the lock file identity in case
# a concurrent `destroy` removed it while we waited.
lock() {
	local i
	for ((i = 0; i < 10; i++)); do
		make_base
		exec 9>>"$BASE/lock"
		if ! flock -w 300 9; then die "timed out waiting for lock $BASE/lock"; fi
		if [[ $BASE/lock -ef /dev/fd/9 ]]; then return 0; fi
		exec 9>&-
	done
	die "could not lock $BASE/lock"
}

# ensure_dirs: create data/run/log dirs owned by the server user.
ensure_dirs() {
	mkdir -p -- "$DATA" "$RUN" "$LOGDIR"
	# A data dir owned by someone else cannot be used by a non-root invocation.
	if ! is_root && [[ ! -O $DATA ]]; then
		die "$DATA is owned by $(stat -c %U -- "$DATA"), not by you; run as that user (or root)"
	fi
	if is_root; then
		chown -- "$PG_USER:" "$DATA" "$RUN" "$LOGDIR"
		[[ ! -e $LOGFILE ]] || chown -- "$PG_USER:" "$LOGFILE"
	fi
	chmod 700 -- "$DATA" # PostgreSQL requires 0700 (or 0750)
	chmod 755 -- "$RUN" "$LOGDIR"
}

# as_pg CMD...: run CMD as the server user from "/" (the user may not be
# able to access our cwd), with the lock fd closed so that a server started
# by CMD does not inherit (and hold) our lock forever.
as_pg() {
	if is_root; then
		(cd / && exec runuser -u "$PG_USER" -- "$@" 9>&-)
	else
		(cd / && exec "$@" 9>&-)
	fi
}

# ---------------------------------------------------------------------------
# server state

initialised() { [[ -f $DATA/PG_VERSION ]]; }

# pid_file_pid: the postmaster PID recorded in postmaster.pid (if any).
pid_file_pid() {
	local pid
	[[ -f $DATA/postmaster.pid ]] || return 1
	pid=$(head -n 1 -- "$DATA/postmaster.pid" 2>/dev/null) || return 1
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	printf '%s\n' "$pid"
}

# running: is a postmaster for DATA alive? Stricter than `pg_ctl status`: a
# PID reused by an unrelated process after a crash/reboot does not count.
running() {
	local pid comm cwd
	pid=$(pid_file_pid) || return 1
	kill -0 "$pid" 2>/dev/null || [[ -d /proc/$pid ]] || return 1
	comm=$(cat "/proc/$pid/comm" 2>/dev/null) || return 0 # no procfs: trust kill -0
	[[ $comm == postgres || $comm == postmaster ]] || return 1
	if cwd=$(readlink "/proc/$pid/cwd" 2>/dev/null); then
		[[ $cwd == "$(readlink -f -- "$DATA")" ]] || return 1
	fi
	return 0
}

# running_port: the port the live server listens on (from postmaster.pid).
running_port() {
	sed -n 4p -- "$DATA/postmaster.pid" 2>/dev/null | grep -E '^[0-9]+$'
}

# clear_stale: remove leftovers of a server that died without cleaning up.
clear_stale() {
	if [[ -f $DATA/postmaster.pid ]] && ! running; then
		log "removing stale postmaster.pid left by a server that is gone"
		rm -f -- "$DATA/postmaster.pid"
		rm -f -- "$RUN"/.s.PGSQL.* 2>/dev/null || true
	fi
}

# write_config: (re)write our settings; postgresql.conf includes them.
write_config() {
	local conf=$DATA/counterd.conf tmp sockdir
	# unix_socket_directories is a list: double-quote the element (so spaces
	# and commas survive), then single-quote the whole value.
	sockdir="\"${RUN//\"/\"\"}\""
	sockdir=${sockdir//\'/\'\'}
	tmp=$(mktemp "$DATA/.counterd.conf.XXXXXX")
	# Full-page images after each checkpoint are most of the WAL a round
	# writes over many keys, and stalled replies (docs/operations.md):
	# compress them, with lz4 where the server has it (PostgreSQL 15+).
	local walcomp=on configure
	configure=$("$(dirname -- "$(readlink -f -- "$POSTGRES" 2>/dev/null || echo "$POSTGRES")")/pg_config" --configure 2>/dev/null) || true
	if [[ $configure == *--with-lz4* ]] && (($(major_of "$POSTGRES") >= 15)); then
		walcomp=lz4
	fi
	cat >"$tmp" <<EOF
# Managed by scripts/pg.sh; rewritten on every 'scripts/pg.sh start'.
listen_addresses = ''
unix_socket_directories = '$sockdir'
port = $PORT
max_connections = 200
shared_buffers = 256MB
fsync = on
synchronous_commit = on
full_page_writes = on
wal_compression = $walcomp
EOF
	chmod 600 -- "$tmp"
	if is_root; then chown -- "$PG_USER:" "$tmp"; fi
	mv -f -- "$tmp" "$conf"
	if ! grep -qxF "include_if_exists = 'counterd.conf'" "$DATA/postgresql.conf"; then
		printf "\n# counterd: local settings managed by scripts/pg.sh\ninclude_if_exists = 'counterd.conf'\n" \
			>>"$DATA/postgresql.conf"
	fi
}

do_initdb() {
	local out=$LOGDIR/initdb.log
	log "initialising a new cluster in $DATA"
	if ! as_pg "$INITDB" -D "$DATA" -U "$DB_ROLE" --auth=trust -E UTF8 --no-locale \
		--no-instructions >"$out" 2>&1; then
		cat -- "$out" >&2
		die "initdb failed (see above)"
	fi
}

# pg_ctl_start: start the server, logging to LOGFILE, waiting up to 60s.
pg_ctl_start() {
	if ! as_pg "$PG_CTL" -D "$DATA" -l "$LOGFILE" -w -t 60 start >&2; then
		log "server failed to start; last lines of $LOGFILE:"
		tail -n 30 -- "$LOGFILE" >&2 2>/dev/null || true
		exit 1
	fi
}

# conninfo_quote VALUE: quote a value for a libpq keyword=value string.
conninfo_quote() {
	local v=${1//\\/\\\\}
	printf "'%s'" "${v//\'/\\\'}"
}

psql_admin() {
	"$PSQL" -X -q -v ON_ERROR_STOP=1 -tA \
		"host=$(conninfo_quote "$RUN") port=$PORT user=$DB_ROLE dbname=postgres sslmode=disable" "$@"
}

wait_ready() {
	local i
	for ((i = 0; i < 120; i++)); do
		if psql_admin -c 'select 1' >/dev/null 2>&1; then return 0; fi
		sleep 0.5
	done
	die "server did not accept connections within 60s (log: $LOGFILE)"
}

ensure_database() {
	[[ -n $PSQL && -x $PSQL ]] || die "psql not found (apt-get install postgresql-client)"
	wait_ready
	if [[ -z $(psql_admin -c "select 1 from pg_database where datname = '$DB_NAME'") ]]; then
		log "creating database $DB_NAME"
		psql_admin -c "create database $DB_NAME" >&2
	fi
}

# urlencode STRING: percent-encode for a URL query value.
urlencode() {
	local s=$1 out='' c i
	local LC_ALL=C
	for ((i = 0; i < ${#s}; i++)); do
		c=${s:i:1}
		case $c in
		[A-Za-z0-9/._~-]) out+=$c ;;
		*) out+=$(printf '%%%02X' "'$c") ;;
		esac
	done
	printf '%s' "$out"
}

print_url() {
	printf 'postgres://%s@/%s?host=%s&port=%s&sslmode=disable\n' \
		"$DB_ROLE" "$DB_NAME" "$(urlencode "$RUN")" "$PORT"
}

# pick_bins_for_data: if DATA was created by another major version, prefer
# that version's binaries (Debian keeps them side by side).
pick_bins_for_data() {
	initialised || return 0
	local want have
	want=$(cat -- "$DATA/PG_VERSION")
	have=$(major_of "$POSTGRES")
	[[ $want == "$have" ]] && return 0
	if set_bins_from_dir "/usr/lib/postgresql/$want/bin"; then
		find_client_bins
		return 0
	fi
	die "$DATA was created by PostgreSQL $want but only $have is available; run '$0 destroy' to start over"
}

# ---------------------------------------------------------------------------
# subcommands

cmd_start() {
	require_bins install
	ensure_user
	resolve_layout
	note_fallback
	lock
	pick_bins_for_data
	ensure_dirs
	if ! initialised; then do_initdb; fi
	write_config
	clear_stale
	if running; then
		local port
		port=$(running_port || true)
		if [[ -n $port && $port != "$PORT" ]]; then
			log "server runs on port $port but $PORT was requested; restarting"
			as_pg "$PG_CTL" -D "$DATA" -w -t 60 stop -m fast >&2
			pg_ctl_start
		else
			log "server already running ($DATA)"
		fi
	else
		log "starting server ($DATA, log $LOGFILE)"
		pg_ctl_start
	fi
	ensure_database
	print_url
}

# stop_server MODE: stop if running; never an error if not.
stop_server() {
	local mode=$1
	if ! initialised; then
		log "no cluster initialised in $DATA; nothing to stop"
		return 0
	fi
	clear_stale
	if ! running; then
		log "server not running"
		return 0
	fi
	require_bins
	pick_bins_for_data
	as_pg "$PG_CTL" -D "$DATA" -w -t 60 stop -m "$mode" >&2
}

cmd_stop() {
	resolve_layout
	[[ -d $BASE ]] || {
		log "nothing to stop ($BASE does not exist)"
		return 0
	}
	lock
	stop_server fast
}

cmd_url() {
	resolve_layout
	if initialised && running; then PORT=$(running_port || echo "$PORT"); fi
	print_url
}

cmd_datadir() {
	resolve_layout
	printf '%s\n' "$DATA"
}

cmd_pgctl() {
	resolve_layout
	initialised || die "no cluster in $DATA; run '$0 start' first"
	lock
	require_bins
	pick_bins_for_data
	local -a args=("$@")
	local a action='' has_log=0
	for a in "${args[@]}"; do
		case $a in
		start | restart) action=$a ;;
		-l | --log | --log=* | -l?*) has_log=1 ;;
		esac
	done
	if [[ -n $action ]]; then
		ensure_dirs
		clear_stale
		# Without -l the server would inherit (and keep open) our stdout,
		# which makes callers that capture output hang.
		if ((has_log == 0)); then args=(-l "$LOGFILE" "${args[@]}"); fi
	fi
	as_pg "$PG_CTL" -D "$DATA" "${args[@]}"
}

cmd_destroy() {
	resolve_layout
	if [[ ! -d $BASE ]]; then
		log "nothing to destroy ($BASE does not exist)"
		return 0
	fi
	note_fallback
	lock
	if initialised && running; then
		stop_server fast || stop_server immediate
	fi
	# Refuse to rm -rf anything that is not one of our two layouts.
	case $BASE in
	"$REPO/.pg" | /tmp/counterd-pg-[0-9a-f]*) ;;
	*) die "refusing to remove unexpected directory $BASE" ;;
	esac
	log "removing $BASE"
	rm -rf -- "$BASE"
}

main() {
	local cmd=${1:-}
	(($# > 0)) && shift
	case $cmd in
	start) cmd_start ;;
	stop) cmd_stop ;;
	url) cmd_url ;;
	datadir) cmd_datadir ;;
	pgctl) cmd_pgctl "$@" ;;
	destroy) cmd_destroy ;;
	-h | --help | help)
		usage
		;;
	*)
		usage
		exit 2
		;;
	esac
}

main "$@"
