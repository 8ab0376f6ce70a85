# scripts/database.sh - sourced by test.sh, bench.sh and run.sh.
#
# use_database VAR: keep VAR (a PostgreSQL URL) when it is set, else set it
# to the URL of the project's throwaway server (scripts/pg.sh), starting
# that server if it is not running. Exports VAR, and sets started_pg=1 when
# it started the server, so the caller can stop it again. Then makes sure
# the server offers the extensions counterd uses (ensure_extension): hll
# for unique counts, plproxy for partitioned clusters.
use_database() {
	local var=$1 url
	started_pg=0
	if [[ -z ${!var:-} ]]; then
		scripts/pg.sh pgctl status >/dev/null 2>&1 || started_pg=1
		url=$(scripts/pg.sh start)
		printf -v "$var" '%s' "$url"
	fi
	export "${var?}"
	check_url "$var" || exit 2
	check_connects "$var"
	ensure_extension "${!var}" hll "the unique-count tests"
	ensure_extension "${!var}" plproxy "the partition tests"
}

# check_url VAR: fail, in one line, when VAR is not a URL counterd takes
# (postgres:// or postgresql://) or keyword/value settings naming host or
# dbname, as counterd and rollup do (exit 2). pgx, and psql too when the
# string holds an =, read postgress://u:pw@h/db?sslmode=disable as
# keyword/value settings and connect to the local socket instead.
check_url() {
	local var=$1 v=${!1} scheme
	case $v in postgres://* | postgresql://*) return 0 ;; esac
	if [[ $v =~ ^([A-Za-z][A-Za-z0-9+.-]*):// ]]; then
		scheme=${BASH_REMATCH[1]}
		echo "database.sh: $var is not a valid PostgreSQL URL or DSN: scheme $scheme:// is neither postgres:// nor postgresql://" >&2
		return 1
	fi
	if ! [[ $v =~ (^|[[:space:]])(host|hostaddr|dbname)[[:space:]]*= ]]; then
		echo "database.sh: $var is not a valid PostgreSQL URL or DSN: a keyword/value DSN must name host or dbname" >&2
		return 1
	fi
}

# redact_url URL: URL with any password replaced by ***, for showing.
redact_url() {
	sed -E 's#(://[^:/@?]*):[^@/?]*@#\1:***@#; s#([?&]password=)[^&]*#\1***#' <<<"$1"
}

# check_connects VAR: fail, saying why in one line, when the server at the
# URL in VAR refuses the connection (a wrong database, role or password, a
# server that is not running), before anything starts against it. Without
# psql, or with a URL only pgx reads, there is nothing to check with; what
# starts next reports it.
check_connects() {
	local var=$1 err
	command -v psql >/dev/null || return 0
	if ! err=$(psql -X -Atq -c 'select 1' "${!var}" 2>&1 >/dev/null); then
		err=${err#psql: error: }
		# pgx takes run-time parameters in the URL (search_path=...)
		# where libpq refuses them: psql cannot tell, counterd will.
		case $err in "invalid URI query parameter"* | "invalid connection option"*) return 0 ;; esac
		echo "database.sh: cannot connect to $var ($(redact_url "${!var}")): ${err%%$'\n'*}" >&2
		return 1
	fi
}

# ensure_extension URL NAME WHO: make sure the server at URL offers
# extension NAME (packaged by Debian as postgresql-<major>-NAME). When it
# does not and this is root with apt-get, install the package for the
# server's major version, holding the installed server package at its
# version so apt does not upgrade the server under a running cluster.
# Otherwise say what is missing and go on (WHO, the tests that need it,
# fail naming the package).
ensure_extension() {
	local url=$1 name=$2 who=$3 q major pkg pin=()
	if ! command -v psql >/dev/null; then
		echo "database.sh: psql not found; cannot check for the $name extension" >&2
		return 0
	fi
	q="select count(*) from pg_available_extensions where name = '$name'"
	[[ $(psql -X -Atq -c "$q" "$url" 2>/dev/null) != 1 ]] || return 0
	major=$(psql -X -Atq -c "select current_setting('server_version_num')::int / 10000" "$url") || return 0
	pkg=postgresql-$major-$name
	if [[ ${EUID:-$(id -u)} -ne 0 ]] || ! command -v apt-get >/dev/null; then
		echo "database.sh: the server has no $name extension; install $pkg" >&2
		return 0
	fi
	local v
	if v=$(dpkg-query -W -f='${Version}' "postgresql-$major" 2>/dev/null) && [[ -n $v ]]; then
		pin=("postgresql-$major=$v")
	fi
	echo "database.sh: installing $pkg (apt-get)" >&2
	local -a apt=(apt-get install -y -q --no-install-recommends "$pkg" "${pin[@]}")
	DEBIAN_FRONTEND=noninteractive "${apt[@]}" >&2 ||
		{ apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive "${apt[@]}" >&2; } ||
		echo "database.sh: could not install $pkg; $who will fail" >&2
}
