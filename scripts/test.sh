#!/usr/bin/env bash
# scripts/test.sh [go test flags] - run the test suite against a real
# PostgreSQL: TEST_DATABASE_URL when set, else the project's throwaway server
# (scripts/pg.sh), which is stopped again afterwards if this script started it.
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/database.sh
use_database TEST_DATABASE_URL
if [[ $started_pg == 1 ]]; then
	trap 'scripts/pg.sh stop' EXIT
fi

# The client libraries the end-to-end client tests drive (fast when present).
scripts/clients.sh
# redis-server and redis-benchmark: the harness tests in bench/ compare
# counterd with them (and the Redis-buffer-plus-worker pattern), and the
# client tests' redis-server comparisons run rather than skip.
. scripts/redis.sh
ensure_redis test.sh
# promtool checks /metrics (TestMetricsPassPromtool); install it here so
# CI runs that test rather than skipping it.
if ! command -v promtool >/dev/null && command -v apt-get >/dev/null && [[ $(id -u) == 0 ]]; then
	echo "installing promtool (apt-get install prometheus)" >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus >/dev/null ||
		{ apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus >/dev/null; } ||
		echo "could not install promtool; TestMetricsPassPromtool will skip" >&2
fi
# systemd-analyze checks the units in deploy/systemd (verify, and the
# security exposure score); install it here so CI runs those tests too.
if ! command -v systemd-analyze >/dev/null && command -v apt-get >/dev/null && [[ $(id -u) == 0 ]]; then
	echo "installing systemd-analyze (apt-get install systemd)" >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends systemd >/dev/null ||
		{ apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends systemd >/dev/null; } ||
		echo "could not install systemd-analyze; deploy/systemd's TestVerify and TestSecurityExposure will skip" >&2
fi

if [[ $# -gt 0 ]]; then
	go test "$@" ./...
	exit
fi
# Compile for the other systems first (nothing runs): a Linux-only call
# outside a _linux.go file fails here, before the long suite.
scripts/cross.sh
go test -race -count=1 ./...
# The benchmark harness is its own module (bench/go.mod): vet it and run
# its tests, which include a short run of every section of make bench.
(cd bench && go vet ./... && go test -race -count=1 ./...)
# What ships counterd (deploy/, its own module): the image, the manifests,
# the units, the packages, the dashboard and the rules, each checked.
(cd deploy && go vet ./... && go test -count=1 ./...)
# Run every hot-path benchmark once, so a broken benchmark fails here rather
# than when someone measures. (cmd/counterd's benchmarks run for minutes
# whatever -benchtime says; make gobench runs them.)
go test -run '^$' -bench . -benchtime 1x ./internal/...
