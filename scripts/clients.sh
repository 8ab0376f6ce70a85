#!/usr/bin/env bash
# scripts/clients.sh - install the client libraries the end-to-end tests
# drive (cmd/counterd/clients_test.go), when missing:
#   - the Node packages pinned in cmd/counterd/testdata/clients/package-lock.json,
#     with `npm ci` into .cache/node (gitignored), redone only when the lockfile changes;
#   - Debian's python3-redis, with apt-get, when /usr/bin/python3 cannot import redis
#     and we are root with apt.
# The Go modules (go-redis, rueidis) come with go.mod.
#
# A tool that is absent (no node, no python3) is reported and skipped: its
# tests skip too. With COUNTERD_CLIENTS_REQUIRED=1 (CI) anything that
# cannot be installed is an error, and the tests fail instead of skipping.
set -euo pipefail
cd "$(dirname "$0")/.."

required=${COUNTERD_CLIENTS_REQUIRED:-0}
failed=0
missing() {
	echo "clients.sh: $*" >&2
	failed=1
}

src=cmd/counterd/testdata/clients
dst=.cache/node
if command -v node >/dev/null && command -v npm >/dev/null; then
	stamp=$(sha256sum "$src/package-lock.json" | cut -d' ' -f1)
	if [[ ! -d $dst/node_modules || $(cat "$dst/.installed" 2>/dev/null) != "$stamp" ]]; then
		mkdir -p "$dst"
		cp "$src/package.json" "$src/package-lock.json" "$dst/"
		rm -f "$dst/.installed"
		if (cd "$dst" && npm ci --no-audit --no-fund --loglevel=error >&2); then
			echo "$stamp" >"$dst/.installed"
		else
			missing "npm ci in $dst failed: the Node client tests will not run"
		fi
	fi
else
	missing "node or npm not found: the Node client tests (ioredis, redis) skip"
fi

# Debian's package installs into /usr/lib/python3/dist-packages, which only
# the system interpreter sees (not a pyenv or venv python3 first on PATH).
if [[ -x /usr/bin/python3 ]]; then
	if ! /usr/bin/python3 -c 'import redis' 2>/dev/null; then
		if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-redis >&2 ||
				{ apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-redis >&2; } ||
				missing "apt-get install python3-redis failed: the Python client test will not run"
		else
			missing "python3 cannot import redis and this is not root with apt-get: install python3-redis (Debian) to run the Python client test"
		fi
	fi
else
	missing "/usr/bin/python3 not found: the Python client test (redis-py) skips"
fi

if [[ $failed == 1 && $required == 1 ]]; then
	echo "clients.sh: COUNTERD_CLIENTS_REQUIRED=1 and a client library is missing" >&2
	exit 1
fi
