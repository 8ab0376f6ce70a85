#!/usr/bin/env bash
# scripts/release.sh - build what a release ships into $DIST (dist/):
# counterd and rollup for each of $PLATFORMS (linux and darwin, amd64 and
# arm64), each pair in counterd_$VERSION_$OS_$ARCH.tar.gz with the README,
# the LICENSE if there is one, and the systemd units (deploy/systemd); a
# .deb for each linux platform (deploy/cmd/counterd-deb, nfpm); and
# SHA256SUMS of them all. make release runs it with the Makefile's VERSION.
#
# Settings (environment): VERSION (required: what --version prints, git
# describe --always --dirty), DIST (dist), PLATFORMS ("linux/amd64
# linux/arm64 darwin/amd64 darwin/arm64"), DEB_MAINTAINER (the .deb's
# Maintainer field), SOURCE_DATE_EPOCH (file times; default: the last
# commit's time, so archives of one commit come out the same).
set -euo pipefail
cd "$(dirname "$0")/.."

: "${VERSION:?VERSION is not set (make release sets it from git describe --always --dirty)}"
DIST=${DIST:-dist}
GO=${GO:-go}
PLATFORMS=${PLATFORMS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64}
DEB_MAINTAINER=${DEB_MAINTAINER:-counterd maintainers <maintainers@counterd.invalid>}
if [[ -z ${SOURCE_DATE_EPOCH:-} ]]; then
	SOURCE_DATE_EPOCH=$(git log -1 --format=%ct 2>/dev/null || date +%s)
fi
export SOURCE_DATE_EPOCH
if [[ $VERSION == *-dirty ]]; then
	echo "release: warning: VERSION $VERSION: the checkout has uncommitted changes" >&2
fi
LDFLAGS="-X github.com/counterd/counterd/internal/version.version=$VERSION"

rm -rf "$DIST"
mkdir -p "$DIST/.build"
DIST=$(cd "$DIST" && pwd)
build=$DIST/.build
trap 'rm -rf "$build"' EXIT

# The package builder runs on this machine: build it for the host.
(cd deploy && "$GO" build -o "$build/counterd-deb" ./cmd/counterd-deb)

for platform in $PLATFORMS; do
	os=${platform%/*} arch=${platform#*/}
	name=counterd_${VERSION}_${os}_${arch}
	dir=$build/$name
	echo "release: $name" >&2
	mkdir -p "$dir/systemd"
	CGO_ENABLED=0 GOOS=$os GOARCH=$arch "$GO" build -trimpath -ldflags "$LDFLAGS" -o "$dir/" ./cmd/counterd ./cmd/rollup
	cp README.md "$dir/"
	for f in LICENSE LICENSE.md LICENSE.txt; do
		if [[ -f $f ]]; then cp "$f" "$dir/"; fi
	done
	cp deploy/systemd/counterd.service deploy/systemd/rollup.service deploy/systemd/counterd.env.example deploy/systemd/README.md "$dir/systemd/"
	tar -C "$build" --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" -cf - "$name" |
		gzip -n -9 >"$DIST/$name.tar.gz"
	if [[ $os == linux ]]; then
		"$build/counterd-deb" -version "$VERSION" -arch "$arch" -counterd "$dir/counterd" -rollup "$dir/rollup" \
			-maintainer "$DEB_MAINTAINER" -out "$DIST" >/dev/null
	fi
done

rm -rf "$build"
shopt -s nullglob
cd "$DIST"
sha256sum -- *.tar.gz *.deb >SHA256SUMS
ls -l | sed 1d >&2
