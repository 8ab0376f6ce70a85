# scripts/database.sh - sourced by test.sh, bench.sh and run.sh.
#
# use_database VAR: keep VAR (a PostgreSQL URL) when it is set, else set it
# to the URL of the project's throwaway server (scripts/pg.sh), starting
# that server if it is not running. Exports VAR, and sets started_pg=1 when
# it started the server, so the caller can stop it again.
use_database() {
	local var=$1 url
	started_pg=0
	if [[ -z ${!var:-} ]]; then
		scripts/pg.sh pgctl status >/dev/null 2>&1 || started_pg=1
		url=$(scripts/pg.sh start)
		printf -v "$var" '%s' "$url"
	fi
	export "${var?}"
}
