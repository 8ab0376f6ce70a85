#!/usr/bin/env bash
# scripts/cross.sh - compile counterd and its benchmark harness (bench/),
# tests included (go vet type-checks them), for the systems besides Linux
# it builds on: macOS on both architectures, and FreeBSD, which the same
# _other.go files serve.
# Nothing runs, so this takes only compile time; it fails as soon as code
# only Linux has (epoll, SOCK_CLOEXEC, prlimit, Pdeathsig...) sits outside
# a _linux.go file.
set -euo pipefail
cd "$(dirname "$0")/.."

# The benchmark harness (bench/, its own module) is compiled too.
for target in darwin/arm64 darwin/amd64 freebsd/amd64; do
	for module in . bench; do
		echo "go build ./... && go vet ./... in $module for $target" >&2
		(cd "$module" && GOOS=${target%/*} GOARCH=${target#*/} go build ./... &&
			GOOS=${target%/*} GOARCH=${target#*/} go vet ./...)
	done
done
