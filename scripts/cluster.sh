#!/usr/bin/env bash
# scripts/cluster.sh - declare a PL/Proxy cluster of N partitions on one
# PostgreSQL server, for `COUNTERD_PARTITIONS=N make run` and the
# benchmark's partitions section.
#
# Usage: scripts/cluster.sh [--fresh] URL N [NAME]
#
# On the server of URL (a postgres:// URL), makes sure databases
# NAME_proxy and NAME_p0 .. NAME_p(N-1) exist (NAME defaults to counterd),
# creates the plproxy extension in NAME_proxy and declares there the
# foreign server NAME with partitions p0 .. p(N-1), each a connection
# string to NAME_pI on the same server, and a user mapping for URL's user.
# counterd (COUNTERD_CLUSTER=NAME) and rollup (ROLLUP_CLUSTER=NAME), given
# the proxy's URL as DATABASE_URL, migrate the partitions themselves.
# Prints only the proxy's URL on stdout.
#
# Idempotent: a second run with the same N changes nothing but the
# partitions' connection strings (the server may have moved). A cluster
# that already has another number of partitions is refused, since every
# key would move to another partition; --fresh drops the proxy and
# partition databases first (their connections too), so that is how to
# change N, and how the benchmark starts each run empty.
#
# The partitions connect as URL's user without a password (as the
# project's throwaway server allows); a server that wants one needs
# password in the user mapping (ALTER USER MAPPING ... OPTIONS (ADD
# password '...')).
set -euo pipefail

die() { printf 'cluster.sh: %s\n' "$*" >&2; exit 1; }

fresh=0
if [[ ${1:-} == --fresh ]]; then
	fresh=1
	shift
fi
(( $# == 2 || $# == 3 )) || die "usage: scripts/cluster.sh [--fresh] URL N [NAME]"
url=$1 n=$2 name=${3:-counterd}
[[ $url =~ ^postgres(ql)?:// ]] || die "URL must be a postgres:// URL"
# PL/Proxy routes a key by hashtext(key) & (n-1): n is a power of two.
[[ $n =~ ^[0-9]+$ ]] && (( n >= 1 && n <= 256 && (n & (n - 1)) == 0 )) ||
	die "N ($n) must be a power of two within 1..256"
[[ $name =~ ^[a-z_][a-z0-9_]{0,50}$ ]] || die "NAME ($name) must be a lower-case identifier"

# db_url DB: URL with its database replaced by DB (parameters kept).
db_url() { sed -E "s#^(postgres(ql)?://[^/?]*)(/[^?]*)?#\1/$1#" <<<"$url"; }
sql() { psql -X -v ON_ERROR_STOP=1 -Atq "$@"; }

# Where the partitions are: the server URL reaches, as libpq sees it (a
# socket directory for host when URL names none).
read -r host port user < <(sql "$url" -c '\echo :HOST :PORT :USER') ||
	die "cannot connect to the server of URL"

dbs=("${name}_proxy")
for (( i = 0; i < n; i++ )); do dbs+=("${name}_p$i"); done
if (( fresh )); then
	# The proxy first: its PL/Proxy connections hold the partitions.
	sql "$url" -c "DROP DATABASE IF EXISTS ${name}_proxy WITH (FORCE)"
	for d in $(sql "$url" -c "SELECT datname FROM pg_database WHERE datname ~ '^${name}_p[0-9]+\$'"); do
		sql "$url" -c "DROP DATABASE IF EXISTS $d WITH (FORCE)"
	done
fi
for d in "${dbs[@]}"; do
	if [[ -z $(sql "$url" -c "SELECT 1 FROM pg_database WHERE datname = '$d'") ]]; then
		sql "$url" -c "CREATE DATABASE $d"
	fi
done

proxy=$(db_url "${name}_proxy")
quote() { printf "'%s'" "${1//\'/\'\'}"; }
opts=()
for (( i = 0; i < n; i++ )); do
	opts+=("p$i $(quote "host=$host port=$port dbname=${name}_p$i")")
done
have=$(sql "$proxy" -c "SELECT count(*) FROM pg_foreign_server s, unnest(s.srvoptions) o
	WHERE s.srvname = '$name' AND o ~ '^p[0-9]+='")
exists=$(sql "$proxy" -c "SELECT count(*) FROM pg_foreign_server WHERE srvname = '$name'")
if (( exists )) && (( have != n )); then
	die "cluster $name already has $have partitions, not $n; --fresh drops it and its data"
fi
if (( exists )); then
	declare=$(printf 'SET %s, ' "${opts[@]}")
	declare="ALTER SERVER $name OPTIONS (${declare%, })"
else
	declare=$(printf '%s, ' "${opts[@]}")
	declare="CREATE SERVER $name FOREIGN DATA WRAPPER plproxy OPTIONS (${declare%, })"
fi
sql "$proxy" <<SQL
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS plproxy;
$declare;
CREATE USER MAPPING IF NOT EXISTS FOR PUBLIC SERVER $name OPTIONS (user $(quote "$user"));
SQL
printf '%s\n' "$proxy"
