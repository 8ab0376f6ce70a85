#!/usr/bin/env bash
# scripts/bench.sh - run the counter benchmark (make bench): build counterd
# and counterbench (bench/cmd/counterbench: the harness is its own module,
# bench/go.mod, so its plotting dependencies stay out of counterd's go.mod),
# provide PostgreSQL as scripts/test.sh does (DATABASE_URL when set, else
# the project's throwaway server, stopped again afterwards if this script
# started it), install redis-server and redis-benchmark when they are
# missing and this is root on a system with apt-get, then run
# bin/counterbench.
#
# Settings are COUNTERBENCH_* variables (bin/counterbench -h lists them);
# results go to COUNTERBENCH_OUT (default results/). Without redis-server
# or redis-benchmark the run goes on and their rows say why they are
# missing. A fresh install of the redis-server package may start Debian's
# own service on 127.0.0.1:6379; the benchmark never uses it and starts its
# own server on a private Unix socket.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf 'bench.sh: %s\n' "$*" >&2; }

go build -o bin/ ./cmd/counterd
(cd bench && go build -o ../bin/ ./cmd/counterbench)

if ! command -v redis-server >/dev/null || ! command -v redis-benchmark >/dev/null; then
	if [[ ${EUID:-$(id -u)} -eq 0 ]] && command -v apt-get >/dev/null; then
		log "installing redis-server and redis-tools for the comparison rows"
		if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server redis-tools; } >&2; then
			log "could not install them; the redis rows will say why they are missing"
		fi
	else
		log "redis-server or redis-benchmark is not installed and this is not root with apt-get; the redis rows will say so"
	fi
fi

. scripts/database.sh
use_database DATABASE_URL
if [[ $started_pg == 1 ]]; then
	trap 'scripts/pg.sh stop' EXIT
fi

bin/counterbench "$@"
