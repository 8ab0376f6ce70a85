#!/usr/bin/env bash
# scripts/bench.sh - run the counter benchmark (make bench): build counterd
# and counterbench (bench/cmd/counterbench: the harness is its own module,
# bench/go.mod, so its plotting dependencies stay out of counterd's go.mod),
# provide PostgreSQL as scripts/test.sh does (DATABASE_URL when set, else
# the project's throwaway server, stopped again afterwards if this script
# started it), install redis-server and redis-benchmark when they are
# missing and this is root on a system with apt-get (scripts/redis.sh),
# then run bin/counterbench.
#
# Settings are COUNTERBENCH_* variables (bin/counterbench -h lists them);
# results go to COUNTERBENCH_OUT (default results/). Without redis-server
# or redis-benchmark the run goes on and their rows say why they are
# missing.
set -euo pipefail
cd "$(dirname "$0")/.."

go build -o bin/ ./cmd/counterd
(cd bench && go build -o ../bin/ ./cmd/counterbench)

. scripts/redis.sh
ensure_redis bench.sh

. scripts/database.sh
use_database DATABASE_URL
if [[ $started_pg == 1 ]]; then
	trap 'scripts/pg.sh stop' EXIT
fi

bin/counterbench "$@"
