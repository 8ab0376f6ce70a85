#!/usr/bin/env bash
# scripts/test.sh [go test flags] - run the test suite against a real
# PostgreSQL: TEST_DATABASE_URL when set, else the project's throwaway server
# (scripts/pg.sh), which is stopped again afterwards if this script started it.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ -z ${TEST_DATABASE_URL:-} ]]; then
	was_running=0
	scripts/pg.sh pgctl status >/dev/null 2>&1 && was_running=1
	TEST_DATABASE_URL=$(scripts/pg.sh start)
	export TEST_DATABASE_URL
	if [[ $was_running == 0 ]]; then
		trap 'scripts/pg.sh stop' EXIT
	fi
fi

if [[ $# -gt 0 ]]; then
	go test "$@" ./...
	exit
fi
go test -race -count=1 ./...
# Run every hot-path benchmark once, so a broken benchmark fails here rather
# than when someone measures. (cmd/counterd's benchmarks run for minutes
# whatever -benchtime says; make gobench runs them.)
go test -run '^$' -bench . -benchtime 1x ./internal/...
