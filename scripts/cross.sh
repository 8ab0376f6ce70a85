#!/usr/bin/env bash
# scripts/cross.sh - compile counterd, its tests included (go vet
# type-checks them), for the systems besides Linux it builds on: macOS on
# both architectures, and FreeBSD, which the same _other.go files serve.
# Nothing runs, so this takes only compile time; it fails as soon as code
# only Linux has (epoll, SOCK_CLOEXEC, prlimit, Pdeathsig...) sits outside
# a _linux.go file.
set -euo pipefail
cd "$(dirname "$0")/.."

for target in darwin/arm64 darwin/amd64 freebsd/amd64; do
	echo "go build ./... && go vet ./... for $target" >&2
	GOOS=${target%/*} GOARCH=${target#*/} go build ./...
	GOOS=${target%/*} GOARCH=${target#*/} go vet ./...
done
